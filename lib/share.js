'use strict'
// The share driver of a shared KeyedQuotaClock (`share`): the store calls. The reservation book
// (per key: the period, the units reserved and left, what the store had unreserved, failOpen units
// owed, whether a call is under way, the last use) is native; this file asks the store what the
// book says is needed and hands the answers back.
//
// - A consume its reservation covers is decided in one native call and never waits here.
// - One that it does not cover waits for one store call, shared by every concurrent call for the
//   key (one flight per key), for at most `timeoutMs` (one unref'd timer per flight).
// - While a key's flight has timed out and not settled, its uncovered calls fail at once
//   (nothing queues); a late answer is still credited to the reservation (or given back).
// - A key's next slice is reserved in the background when the native decision asks for it.
// - Unused units go back after `idleMs` (an unref'd timer, running only while units are held),
//   when a key is deleted or dropped, and on close().

const { QuotaClockError, toPublicError, internalError } = require('./errors.js')
const { checkReserveAnswer, isQuotaStore, storeOperations } = require('./quota-store.js')
const { coded, isPlainObject, readOptions, typeError, rangeError, thrownText } = require('./validate.js')
const native = require('./native.js')

const SHARE_KEYS = ['store', 'name', 'leaseUnits', 'idleMs', 'timeoutMs', 'failOpen']
const DEFAULT_IDLE_MS = 10_000
const DEFAULT_TIMEOUT_MS = 300
const MAX_NAME_LENGTH = 128
// A flight that timed out is the key's only store call until it settles, or until it is this many
// timeouts old (a client that never settles its promise must not stop the key for good).
const ABANDON_AFTER_TIMEOUTS = 10
const MIN_ABANDON_MS = 1_000
// How many times an uncovered call asks the store again when concurrent calls took what its call
// reserved (each round is one store call; the call's timeoutMs bounds them too).
const MAX_STORE_ROUNDS = 64
// The largest timer delay Node accepts (about 24.8 days).
const MAX_TIMER_MS = 2 ** 31 - 1

/** Checks `share` (ERR_INVALID_OPTION naming share.<field>); returns it normalized. */
function parseShareOptions(share) {
  if (!isPlainObject(share)) throw typeError('ERR_INVALID_OPTION', 'share', 'an object { store, name, leaseUnits?, idleMs?, timeoutMs?, failOpen? }', share)
  const read = readOptions(share, SHARE_KEYS, 'share')
  if (!isQuotaStore(read.store)) {
    throw typeError('ERR_INVALID_OPTION', 'share.store', 'a quota store made by redisStore() or mongoStore() of quota-clock-source/shared', read.store)
  }
  const { name } = read
  if (typeof name !== 'string') throw typeError('ERR_INVALID_OPTION', 'share.name', `a string of 1 to ${MAX_NAME_LENGTH} characters`, name)
  if (name.length === 0 || name.length > MAX_NAME_LENGTH) {
    throw coded(RangeError, 'ERR_INVALID_OPTION', `share.name must be a string of 1 to ${MAX_NAME_LENGTH} characters; received a string of ${name.length}`)
  }
  const leaseUnits = read.leaseUnits === undefined ? undefined : positiveInteger(read.leaseUnits, 'share.leaseUnits')
  const idleMs = read.idleMs === undefined ? DEFAULT_IDLE_MS : milliseconds(read.idleMs, 'share.idleMs')
  const timeoutMs = read.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : milliseconds(read.timeoutMs, 'share.timeoutMs')
  const failOpen = read.failOpen === undefined ? false : read.failOpen
  if (typeof failOpen !== 'boolean') throw typeError('ERR_INVALID_OPTION', 'share.failOpen', 'a boolean', failOpen)
  return { store: read.store, name, leaseUnits, idleMs, timeoutMs, failOpen }
}

/** A positive safe integer. */
function positiveInteger(value, name) {
  if (typeof value !== 'number') throw typeError('ERR_INVALID_OPTION', name, 'a positive safe integer', value)
  if (!(Number.isSafeInteger(value) && value >= 1)) throw rangeError('ERR_INVALID_OPTION', name, 'a positive safe integer', value)
  return value
}

/** A wait in ms: a number > 0, no longer than a timer can be set for. */
function milliseconds(value, name) {
  if (typeof value !== 'number') throw typeError('ERR_INVALID_OPTION', name, 'a number of milliseconds', value)
  if (!(value > 0 && value <= MAX_TIMER_MS)) throw rangeError('ERR_INVALID_OPTION', name, `a number of milliseconds > 0 and no larger than ${MAX_TIMER_MS}`, value)
  return value
}

/**
 * An unref'd setTimeout for a wait on the store whose `fire` runs only after the I/O that has
 * already arrived. Node runs expired timers before it reads its sockets, so after a stretch of
 * work that never yields (a loop of awaited covered calls runs on microtasks alone), an answer
 * sitting in the socket would lose to its own timeout and a healthy store would be reported
 * unavailable. `fire` runs after the loop's poll phase (setImmediate) and checks for itself
 * whether the answer came first.
 */
function timeoutAfterIO(fire, ms) {
  // (The immediate is not unref'd: an unref'd one would wait for the poll phase to wake for some
  // other reason, up to the next timer.)
  const timer = setTimeout(() => setImmediate(fire), ms)
  timer.unref()
  return timer
}

/** A thrown value as an Error (a non-Error is wrapped, as its cause). */
function asError(value) {
  if (value instanceof Error) return value
  return coded(Error, 'ERR_CALLBACK', `quota store threw a non-Error value: ${thrownText(value)}`, { cause: value })
}

// The KeyedQuotaClocks made with `share`, and their drivers (rateLimit asks them after the
// in-process limiters; stats() reads their store counters).
const drivers = new WeakMap()

/** Whether a KeyedQuotaClock was made with `share` (its consume may wait for the store). */
function isSharedLimiter(limiter) {
  return drivers.has(limiter)
}

/**
 * A shared limiter's store counters, for stats(): `{ calls, errors, timeouts, reserved,
 * returned }` (store calls made, failed, unanswered within timeoutMs; units reserved, units
 * given back); undefined for any other limiter.
 */
function storeStatsOf(limiter) {
  return drivers.get(limiter)?.storeStats()
}

class ShareDriver {
  #handle
  #ops
  #name
  #idleMs
  #timeoutMs
  #failOpen
  #decide
  #readMonotonic
  #readPeriodSlot
  #flights = new Map()
  #demand = new Map()
  #idleTimer
  // Bumped by close(): answers to store calls made before it are given back, not credited.
  #generation = 0
  #pending = new Set()
  #stats = { calls: 0, errors: 0, timeouts: 0, reserved: 0, returned: 0 }

  /**
   * `decide(key, n, operation)`: the limiter's native shared consume; returns a Decision, or the
   * units it lacks (a number) when it needs the store. `readMonotonic()`: a JS clock's monotonic
   * reading, or undefined for a native clock. `readPeriodSlot()`: the period the last decision
   * took its quota units in.
   */
  constructor(limiter, handle, options, decide, readMonotonic, readPeriodSlot) {
    drivers.set(limiter, this)
    this.#handle = handle
    this.#ops = storeOperations(options.store)
    this.#name = options.name
    this.#idleMs = options.idleMs
    this.#timeoutMs = options.timeoutMs
    this.#failOpen = options.failOpen
    this.#decide = decide
    this.#readMonotonic = readMonotonic
    this.#readPeriodSlot = readPeriodSlot
  }

  /** The store counters for stats(): calls made, failed, timed out; units reserved, given back. */
  storeStats() {
    return { ...this.#stats }
  }

  /** After a decision that was not the plain covered one: a background refill, dropped keys' give-backs. */
  afterDecision(key) {
    // (With calls waiting for the key, the refill asks for what they lack together.)
    const { refill, giveBacks } = native.keyedShareWork(this.#handle, key, this.#demand.get(key) ?? 0)
    if (refill != null) {
      if (this.#flights.has(key)) native.keyedShareFailed(this.#handle, key, refill.periodSlot, refill.charge)
      else this.#fly(key, refill)
    }
    this.#sendAll(giveBacks)
  }

  /**
   * A consume its reservation does not cover (`lacking` units short): waits for the store. With
   * `taken`, `taken.period` is set to the period the decision took its units in, right after it.
   */
  async uncovered(key, n, lacking, taken) {
    // The units asked for by the calls waiting for this key: a store call asks for what they lack
    // together, so a burst of calls needs a round trip or two, not one per call.
    const waiting = { key, n, counted: false, taken }
    this.#countDemand(waiting, true)
    try {
      return await this.#uncovered(key, n, lacking, waiting)
    } finally {
      this.#countDemand(waiting, false)
    }
  }

  /** A waiting call's decision, with the period it took its units in noted for the caller. */
  #decided(decision, waiting) {
    if (waiting.taken !== undefined) waiting.taken.period = this.#readPeriodSlot()
    return decision
  }

  /** Counts a waiting call's units in the key's demand, or stops counting them. */
  #countDemand(waiting, counted) {
    if (waiting.counted === counted) return
    waiting.counted = counted
    const demand = this.#demand
    const units = (demand.get(waiting.key) ?? 0) + (counted ? waiting.n : -waiting.n)
    if (units > 0) demand.set(waiting.key, units)
    else demand.delete(waiting.key)
  }

  async #uncovered(key, n, lacking, waiting) {
    const deadline = performance.now() + this.#timeoutMs
    for (let round = 0; ; round++) {
      let flight = this.#flights.get(key)
      if (flight !== undefined && flight.timedOut && !this.#abandoned(flight)) {
        // The key's store call is hanging or failing: fail at once, queue nothing.
        return this.#unavailable(key, n, flight, 0, waiting)
      }
      if (flight === undefined || flight.timedOut) {
        const request = native.keyedShareRequest(this.#handle, key, lacking, this.#demand.get(key))
        if (request == null) throw internalError('no reservation request for a key that needs one')
        flight = this.#fly(key, request)
      }
      const outcome = await this.#wait(flight, deadline)
      if (outcome !== OK) return this.#unavailable(key, n, flight, performance.now() - (deadline - this.#timeoutMs), waiting)
      // Decided now: a refill this decision asks for is not for this call's units.
      this.#countDemand(waiting, false)
      const decision = this.#decide(key, n, AFTER_STORE)
      if (typeof decision !== 'number') return this.#decided(decision, waiting)
      this.#countDemand(waiting, true)
      // Others took what the call reserved, and the store has more: ask again, within the wait.
      // (Or the store had too little and this key's units left went back first, so that the next
      // call sees every process's leftovers: the give-back lands before it is made.)
      await this.#sendDropped(deadline)
      lacking = decision
      if (round + 1 >= MAX_STORE_ROUNDS || performance.now() >= deadline) {
        return this.#unavailable(key, n, { error: undefined }, performance.now() - (deadline - this.#timeoutMs), waiting)
      }
    }
  }

  /** The store is unavailable for this call: failOpen decides it as if the quota had room. */
  #unavailable(key, n, flight, waitedMs, waiting) {
    this.#countDemand(waiting, false)
    if (flight.error !== undefined && flight.error.code === 'ERR_STORE_RESPONSE' && flight.error instanceof QuotaClockError) throw flight.error
    if (this.#failOpen) {
      const decision = this.#decided(this.#decide(key, n, FAIL_OPEN), waiting)
      this.#armIdleTimer() // what it owes the store is charged by the next store call, or when idle
      return decision
    }
    const why = flight.error === undefined ? `no answer within share.timeoutMs (${this.#timeoutMs} ms)` : `the store failed: ${thrownText(flight.error)}`
    const waited = waitedMs > 0 ? `after waiting ${Math.round(waitedMs)} ms` : 'at once, as its store call is still unanswered'
    throw new QuotaClockError(
      'ERR_STORE_UNAVAILABLE',
      `quota store of share "${this.#name}" unavailable (${why}); the call was refused ${waited} and consumed nothing`,
      { cause: flight.error },
    )
  }

  #abandoned(flight) {
    return performance.now() - flight.startedMs > Math.max(MIN_ABANDON_MS, ABANDON_AFTER_TIMEOUTS * this.#timeoutMs)
  }

  /** Waits for a flight's outcome, or its timeout, or the caller's own deadline if sooner. */
  #wait(flight, deadline) {
    if (flight.settled) return Promise.resolve(flight.outcome)
    if (deadline >= flight.deadline) return flight.done
    // A call that joined after its own wait began: one timer per flight serves every such call.
    return new Promise((resolve) => {
      flight.early.push({ deadline, resolve })
      this.#armEarly(flight)
    })
  }

  /** The flight's timer for its early waiters, set at the soonest of their deadlines. */
  #armEarly(flight) {
    let soonest = Infinity
    for (const waiter of flight.early) soonest = Math.min(soonest, waiter.deadline)
    if (flight.earlyTimer !== undefined && flight.earlyAt <= soonest) return
    clearTimeout(flight.earlyTimer)
    flight.earlyAt = soonest
    flight.earlyTimer = timeoutAfterIO(() => {
      flight.earlyTimer = undefined
      const now = performance.now()
      const waiting = []
      for (const waiter of flight.early) {
        if (waiter.deadline <= now + 1) waiter.resolve(TIMED_OUT)
        else waiting.push(waiter)
      }
      flight.early = waiting
      if (waiting.length > 0) this.#armEarly(flight)
    }, Math.max(0, soonest - performance.now()))
  }

  /** Makes the store call a request describes; its answer is credited whenever it comes. */
  #fly(key, request) {
    const startedMs = performance.now()
    const flight = {
      settled: false,
      timedOut: false,
      outcome: undefined,
      error: undefined,
      startedMs,
      deadline: startedMs + this.#timeoutMs,
      done: undefined,
      // Calls whose own deadline comes before the flight's, and their timer.
      early: [],
      earlyTimer: undefined,
      earlyAt: Infinity,
    }
    const generation = this.#generation
    const args = {
      name: this.#name,
      key,
      periodId: request.periodId,
      limit: request.limit,
      leaseUnits: request.leaseUnits,
      lacking: request.lacking,
      charge: request.charge,
      expiresAtMs: request.periodEndMs,
    }
    this.#stats.calls++
    let call
    try {
      call = Promise.resolve(this.#ops.reserve(args))
    } catch (error) {
      call = Promise.reject(error)
    }
    let settleTimeout
    const timedOut = new Promise((resolve) => {
      // The wait is timed from the loop's next turn: by then the call is on the wire (node-redis
      // writes on an immediate), not held back by work that has not yielded since the call was made.
      setImmediate(() => {
        if (flight.settled) return
        settleTimeout = timeoutAfterIO(() => {
          if (flight.settled) return // its answer was read first
          flight.timedOut = true
          this.#stats.timeouts++
          resolve(TIMED_OUT)
        }, this.#timeoutMs)
      })
    })
    const failed = (error) => {
      if (!flight.timedOut) this.#stats.errors++ // (a call is a timeout or an error, never both)
      flight.error = error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE' ? error : asError(error)
      native.keyedShareFailed(this.#handle, key, request.periodSlot, request.charge)
      return FAILED
    }
    const answered = call.then(
      (answer) => {
        let checked
        try {
          checked = checkReserveAnswer(answer, args)
        } catch (error) {
          return failed(error)
        }
        const { granted, unreserved } = checked
        this.#stats.reserved += granted
        let credited = false
        if (generation === this.#generation) credited = native.keyedShareCredit(this.#handle, key, request.periodSlot, granted, unreserved)
        else native.keyedShareFailed(this.#handle, key, request.periodSlot, 0) // (charged: nothing owed)
        if (credited) this.#armIdleTimer()
        // Not the key's any more (dropped, another period, or the limiter was closed): back it goes.
        else if (granted > 0) this.#send({ key, periodId: request.periodId, units: granted })
        return OK
      },
      failed,
    ).then((outcome) => {
      clearTimeout(settleTimeout)
      flight.settled = true
      flight.outcome = outcome
      if (this.#flights.get(key) === flight) this.#flights.delete(key)
      return outcome
    }, (error) => {
      // A native call above threw (a bug): the flight fails rather than leave its waiters hanging.
      flight.error = error && typeof error.code === 'string' ? toPublicError(error) : asError(error)
      flight.settled = true
      flight.outcome = FAILED
      if (this.#flights.get(key) === flight) this.#flights.delete(key)
      return FAILED
    })
    flight.done = Promise.race([answered, timedOut])
    flight.done.then((outcome) => {
      clearTimeout(flight.earlyTimer)
      flight.earlyTimer = undefined
      for (const waiter of flight.early) waiter.resolve(outcome)
      flight.early = []
    })
    this.#flights.set(key, flight)
    return flight
  }

  /** Idle give-back runs only while some key holds units. */
  #armIdleTimer() {
    if (this.#idleTimer !== undefined) return
    const every = Math.min(MAX_TIMER_MS, Math.max(5, Math.floor(this.#idleMs / 4)))
    this.#idleTimer = setInterval(() => this.#giveBackIdle(), every)
    this.#idleTimer.unref()
  }

  #giveBackIdle() {
    let giveBacks
    try {
      giveBacks = native.keyedShareGiveBack(this.#handle, this.#idleMs, this.#readMonotonic())
    } catch {
      return // an unreadable clock: next time
    }
    this.#sendAll(giveBacks)
    if (!native.keyedShareHolds(this.#handle)) {
      clearInterval(this.#idleTimer)
      this.#idleTimer = undefined
    }
  }

  /** Give-backs of keys deleted (called after delete()). */
  flushDropped() {
    this.#sendAll(native.keyedShareGiveBack(this.#handle, Infinity, undefined))
  }

  /** Sends the give-backs waiting in the book; resolves once the store has them, or at `deadline`. */
  #sendDropped(deadline) {
    const giveBacks = native.keyedShareGiveBack(this.#handle, Infinity, undefined)
    if (giveBacks.length === 0) return undefined
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, deadline - performance.now()))
      timer.unref()
      Promise.all(this.#sendAll(giveBacks)).then(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }

  /** Sends give-backs (and failOpen charges); returns the promises of their outcomes. */
  #sendAll(giveBacks) {
    const sent = []
    for (const giveBack of giveBacks) {
      const key = String.fromCharCode(...giveBack.key)
      if (giveBack.units > 0) sent.push(this.#send({ key, periodId: giveBack.periodId, units: giveBack.units }))
      if (giveBack.charge > 0) sent.push(this.#charge(key, giveBack))
    }
    return sent
  }

  /** Gives units back; the promise is kept until it settles (close() waits for it). */
  #send({ key, periodId, units }) {
    return this.#track(() => this.#ops.giveBack({ name: this.#name, key, periodId, units }), () => (this.#stats.returned += units))
  }

  /**
   * Adds failOpen units still owed to the store's count without reserving anything: a reserve
   * that asks for nothing (leaseUnits and lacking 0) and carries the charge.
   */
  #charge(key, { periodId, periodEndMs, charge }) {
    const request = { name: this.#name, key, periodId, limit: 0, leaseUnits: 0, lacking: 0, charge, expiresAtMs: periodEndMs }
    return this.#track(() => this.#ops.reserve(request), (answer) => checkReserveAnswer(answer, request))
  }

  /** Runs a store call whose outcome close() waits for (undefined when done, else its error). */
  #track(call, done) {
    this.#stats.calls++
    const state = { timedOut: false }
    let promise
    try {
      promise = Promise.resolve(call())
    } catch (error) {
      promise = Promise.reject(error)
    }
    const sent = promise.then(done).then(
      () => undefined,
      (error) => {
        if (!state.timedOut) this.#stats.errors++ // (a call is a timeout or an error, never both)
        return asError(error)
      },
    )
    const tracked = this.#bounded(sent, state)
    this.#pending.add(tracked)
    tracked.then(() => this.#pending.delete(tracked))
    return tracked
  }

  /** A give-back's outcome (undefined: done), or a timeout error after timeoutMs. */
  #bounded(promise, state) {
    return new Promise((resolve) => {
      let answered = false
      const timer = timeoutAfterIO(() => {
        if (answered) return // its answer was read first
        state.timedOut = true
        this.#stats.timeouts++
        resolve(coded(Error, 'ERR_STORE_UNAVAILABLE', `no answer within share.timeoutMs (${this.#timeoutMs} ms)`))
      }, this.#timeoutMs)
      promise.then((outcome) => {
        answered = true
        clearTimeout(timer)
        resolve(outcome)
      })
    })
  }

  /**
   * Gives back every reservation and resolves once the store has it; rejects with
   * ERR_STORE_UNAVAILABLE when a give-back failed or got no answer within timeoutMs (those units
   * stay reserved in the store until the period ends). Store calls still under way are given
   * back when they answer. The limiter stays usable: a later consume reserves again.
   */
  async close() {
    this.#generation++
    if (this.#idleTimer !== undefined) {
      clearInterval(this.#idleTimer)
      this.#idleTimer = undefined
    }
    this.#sendAll(native.keyedShareGiveBack(this.#handle, 0, undefined))
    // Answers still to come are given back as they land (bounded by timeoutMs for close's wait).
    const flights = [...this.#flights.values()].map((flight) => flight.done)
    await Promise.all(flights)
    const outcomes = await Promise.all([...this.#pending])
    const failed = outcomes.find((outcome) => outcome !== undefined)
    if (failed !== undefined) {
      throw new QuotaClockError(
        'ERR_STORE_UNAVAILABLE',
        `quota store of share "${this.#name}" did not take back every reservation on close (${thrownText(failed)}); those units stay reserved until their period ends`,
        { cause: failed },
      )
    }
  }
}

// A flight's outcomes.
const OK = 'ok'
const FAILED = 'failed'
const TIMED_OUT = 'timed-out'
// Operations of a shared consume (lib/contract.js's OPERATION).
const { sharedConsume: SHARED_CONSUME, sharedAfterStore: AFTER_STORE, sharedFailOpen: FAIL_OPEN } = require('./contract.js').OPERATION

module.exports = { ShareDriver, parseShareOptions, isSharedLimiter, storeStatsOf, timeoutAfterIO, SHARED_CONSUME }
