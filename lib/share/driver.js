'use strict'
// The share driver of a shared KeyedQuotaClock (`share`): the store calls. The reservation book
// (per key: the period, the units reserved and left, what the store had unreserved, failOpen units
// owed, whether a call is under way, the last use) is native; this file asks the store what the
// book says is needed and hands the answers back.
//
// - A consume its reservation covers is decided in one native call and never waits here.
// - One that it does not cover waits for one store call, shared by every concurrent call for the
//   key (one flight per key), for at most `timeoutMs` of the process's time (storeDeadline: one
//   unref'd timer per flight). When calls racing for the key took what it brought, the call asks
//   again, for as long as the store answers: contention is never an outage (ERR_STORE_UNAVAILABLE
//   only for a store call that failed or went unanswered for timeoutMs).
// - A key dropped (maxKeys) while a call waits for it is held again by that call, which takes
//   what the store answered for it (lib/share/unclaimed.js): it ends in a decision or ERR_KEY_LIMIT.
// - While a key's flight has timed out and not settled, its uncovered calls fail at once
//   (nothing queues); a late answer is still credited to the reservation (or given back).
// - A key's next slice is reserved in the background when the native decision asks for it.
// - Unused units go back after `idleMs` (an unref'd timer, running only while units are held),
//   when a key is deleted or dropped, and on close().
// - Every store call says what the key holds unadmitted here after it (`held`, per instance: one
//   random id per limiter), and the identity of the record the key reserved in: a record found
//   gone or remade is charged again with what this limiter reserved and did not give back.
// - A key the store reported exhausted is denied here, with no store call, for a second: the
//   native book marks it short as it takes the answer (`keyedShareCredit`), and decides its
//   uncovered calls on that answer meanwhile.
// - With `bucket`, the key's bucket is the fleet's too: a call its slice does not cover (the
//   native decision answers the StoreNeed NEEDS_SLICE) first waits for a slice
//   (lib/share/bucket.js), then, with a quota, for the quota's units as above.

const { QuotaClockError, internalError } = require('../native/errors.js')
const { storeOperations } = require('./protocol.js')
const { thrownText } = require('../common/validate.js')
const { randomBytes } = require('node:crypto')
const native = require('../native/native.js')
const { OutageWarning } = require('../common/outage.js')
const { GiveBacks } = require('./give-backs.js')
const { OK, reserveArgs, storeCallWithin } = require('./store-call.js')
const { KeyFlights } = require('./key-flights.js')
const { BucketDriver } = require('./bucket.js')
const { UnclaimedAnswers } = require('./unclaimed.js')
const { isNeed } = require('./need.js')
const { isSharedLimiter, registerDriver, storeStatsOf } = require('./drivers.js')

class ShareDriver {
  #handle
  #ops
  #name
  #timeoutMs
  #decide
  #readPeriodSlot
  #readMonotonic
  // The key's reservation call under way, its demand, the idle give-back timer, the close
  // generation (answers to store calls made before close() are given back, not credited), the
  // outage path.
  #keys
  #giveBacks
  // Answers that wait for a call to claim them (a key dropped while calls wait for it).
  #unclaimed
  #stats = { calls: 0, errors: 0, timeouts: 0, reserved: 0, returned: 0 }
  // One process warning per outage of the store.
  #outage = new OutageWarning('QUOTA_CLOCK_STORE_UNAVAILABLE')
  // This limiter's name in the store's records (whose `held` it reports).
  #instance = randomBytes(6).toString('hex')
  // The driver of a fleet bucket (`bucket`), else undefined.
  #bucket
  // Where a key's fleet block, as a store call answered it, goes (the limiter's block book).
  #onBlock = () => {}
  // Block calls under way (blockSet, blockClear, blockRead), which close() waits for.
  #blockCalls = new Set()

  /**
   * `decide(key, n, operation)`: the limiter's native shared consume; returns a Decision, or a
   * StoreNeed (lib/share/need.js) when it needs the store. `readMonotonic()`: a JS clock's monotonic
   * reading, or undefined for a native clock. `readPeriodSlot()`: the period the last decision
   * took its quota units in.
   */
  constructor(limiter, handle, options, decide, readMonotonic, readPeriodSlot) {
    registerDriver(limiter, this)
    this.#handle = handle
    this.#ops = storeOperations(options.store)
    this.#name = options.name
    this.#giveBacks = new GiveBacks(handle, this.#ops, options.name, this.#instance, this.#stats, this.#outage, options.timeoutMs)
    this.#unclaimed = new UnclaimedAnswers(this.#giveBacks)
    this.#timeoutMs = options.timeoutMs
    this.#decide = decide
    this.#readPeriodSlot = readPeriodSlot
    this.#readMonotonic = readMonotonic
    const shared = { handle, ops: this.#ops, name: options.name, instance: this.#instance, stats: this.#stats, outage: this.#outage, onBlock: (key, blockedMs) => this.#onBlock(key, blockedMs) }
    this.#keys = new KeyFlights(shared, options, () => this.#giveBacks.sendIdle(options.idleMs, readMonotonic))
    if (options.bucket) this.#bucket = new BucketDriver(shared, options, decide, readMonotonic)
  }

  /** `onBlock(key, blockedMs)`: a store call's answer of the key's fleet block (0: none). */
  set onBlock(onBlock) {
    this.#onBlock = onBlock
  }

  /**
   * A block operation (lib/share/protocol.js: blockSet, blockClear, blockRead) sent in the
   * background, bounded by timeoutMs and counted in the store counters; its answer goes to `then`,
   * a failure is counted and dropped (the key's next store call, or the next ask, tells again).
   * Resolves (never rejects) to the answer, or undefined when none came.
   */
  sendBlock(operation, fields, then) {
    const call = storeCallWithin((roundTrip) => this.#ops[operation]({ name: this.#name, ...fields }, roundTrip), this.#stats, this.#timeoutMs, () => BLOCK_TIMED_OUT).then(
      (answer) => {
        if (answer === BLOCK_TIMED_OUT) {
          this.#stats.timeouts++
          return undefined
        }
        then?.(answer)
        return answer
      },
      () => {
        this.#stats.errors++
        return undefined
      },
    )
    this.#blockCalls.add(call)
    call.finally(() => this.#blockCalls.delete(call))
    return call
  }

  /** Whether the limiter's buckets are the fleet's (`share.bucket`). */
  get fleetBucket() {
    return this.#bucket !== undefined
  }

  /** The store counters for stats(): calls made, failed, timed out; units reserved, given back. */
  storeStats() {
    return { ...this.#stats }
  }

  /** After a decision that was not the plain covered one: a background refill, dropped keys' give-backs. */
  afterDecision(key) {
    // (With calls waiting for the key, the refill asks for what they lack together.)
    const { refill, giveBacks } = native.keyedShareWork(this.#handle, key, this.#keys.demand(key))
    if (refill != null) {
      if (this.#keys.flights.has(key)) native.keyedShareFailed(this.#handle, key, refill.periodSlot, refill.charge)
      else this.#fly(key, refill)
    }
    this.#giveBacks.sendAll(giveBacks)
    this.#bucket?.afterDecision(key)
  }

  /**
   * A consume that needs the store first (`need`, lib/share/need.js: quota units its reservation
   * lacks, or a slice of its fleet bucket): waits for the store. With `taken`, `taken.period` is
   * set to the period the decision took its units in, right after it.
   */
  async uncovered(key, n, need, taken) {
    // The slice first, then quota units; a round of either can send the call to the other (the
    // quota's store call took long enough for the slice's lease to lapse), each round one store call.
    for (;;) {
      if (need.kind === 'slice') {
        const decided = await this.#bucket.acquire(key, n)
        if (!isNeed(decided)) {
          if (taken !== undefined) taken.period = this.#readPeriodSlot()
          return decided
        }
        need = decided
      }
      const decided = await this.#quotaUncovered(key, n, need.lacking, taken)
      if (!isNeed(decided)) return decided
      need = decided
    }
  }

  /** A consume its reservation does not cover: a Decision, or the need of a slice first. */
  async #quotaUncovered(key, n, lacking, taken) {
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
    this.#keys.addDemand(waiting.key, counted ? waiting.n : -waiting.n)
  }

  async #uncovered(key, n, lacking, waiting) {
    // Each round waits for one store call, at most timeoutMs.
    for (;;) {
      const roundStartMs = performance.now()
      // The key's store call is hanging or failing: fail at once, queue nothing.
      const hanging = this.#keys.hanging(key)
      if (hanging !== undefined) return this.#unavailable(key, n, hanging, 0, waiting)
      let flight = this.#keys.flights.get(key)
      if (flight === undefined || flight.timedOut) {
        const next = this.#requestFor(key, n, lacking)
        if (next.decision !== undefined) return this.#decided(next.decision, waiting)
        flight = this.#fly(key, next.request)
      }
      const outcome = flight.settled ? flight.outcome : await flight.done
      if (outcome !== OK) return this.#unavailable(key, n, flight, performance.now() - roundStartMs, waiting)
      // Decided now: a refill this decision asks for is not for this call's units.
      this.#countDemand(waiting, false)
      const decision = flight.unclaimed === undefined ? this.#decide(key, n, AFTER_STORE) : this.#claim(key, n, flight)
      if (!isNeed(decision) || decision.kind === 'slice') return this.#decided(decision, waiting)
      this.#countDemand(waiting, true)
      // Others took what the call reserved, and the store has more: ask again. (Or the store had
      // too little and this key's units left went back first, so that the next call sees every
      // process's leftovers: the give-back lands before it is made.)
      await this.#giveBacks.sendDroppedWithin(performance.now() + this.#timeoutMs)
      lacking = decision.lacking
    }
  }

  /**
   * `{ request }`: the store call a waiting call makes; a key dropped (maxKeys) since the call
   * began is held again first (ERR_KEY_LIMIT when every held key has quota use), which may
   * decide the call at once: `{ decision }`.
   */
  #requestFor(key, n, lacking) {
    let request = native.keyedShareRequest(this.#handle, key, lacking, this.#keys.demand(key))
    if (request == null) {
      const held = this.#decide(key, n, SHARED_CONSUME)
      // (The key held again may need a slice of its fleet bucket first.)
      if (!isNeed(held) || held.kind === 'slice') return { decision: held }
      request = native.keyedShareRequest(this.#handle, key, held.lacking, this.#keys.demand(key))
      if (request == null) throw internalError('no reservation request for a key that needs one')
    }
    return { request }
  }

  /**
   * The store answered a call whose key was dropped (maxKeys) before the answer came: the first
   * call to wake holds the key again and takes the answer (nothing runs in between, so no other
   * call can drop it meanwhile), then is decided. Units it cannot take go back.
   */
  #claim(key, n, flight) {
    const { request, granted, unreserved, recordId } = this.#unclaimed.take(flight)
    let credited = false
    try {
      const held = this.#decide(key, n, SHARED_CONSUME) // ERR_KEY_LIMIT when every held key has quota use
      if (!isNeed(held) || held.kind === 'slice') return held
      credited = this.#credit(key, request, granted, unreserved, recordId)
      return credited ? this.#decide(key, n, AFTER_STORE) : held
    } finally {
      if (credited) this.#keys.arm()
      else if (granted > 0) this.#giveBacks.send({ key, periodId: request.periodId, units: granted, recordId })
    }
  }

  /** The store is unavailable for this call: failOpen decides it as if the quota had room. */
  #unavailable(key, n, flight, waitedMs, waiting) {
    this.#countDemand(waiting, false)
    const failOpen = () => {
      const decision = this.#decided(this.#decide(key, n, FAIL_OPEN), waiting)
      this.#keys.arm() // what it owes the store is charged by the next store call, or when idle
      return decision
    }
    return this.#keys.unavailable(flight, waitedMs, failOpen, 'calls that reservations do not cover', 'allowed (failOpen)')
  }

  /** Credits a store answer to the key's reservation (false: not the key's, it goes back). */
  #credit(key, request, granted, unreserved, recordId) {
    return native.keyedShareCredit(this.#handle, key, request.periodSlot, request.lacking, granted, unreserved, recordId, this.#readMonotonic())
  }

  /** Makes the store call a request describes; its answer is credited whenever it comes. */
  #fly(key, request) {
    const keys = this.#keys
    const generation = keys.generation
    const args = reserveArgs(this.#name, this.#instance, key, request)
    return keys.fly(key, {
      call: (roundTrip) => this.#ops.reserve(args, roundTrip),
      failed: () => native.keyedShareFailed(this.#handle, key, request.periodSlot, request.charge),
      // (The store checked its answer, lib/share/protocol.js's checkReserveAnswer.)
      answered: ({ granted, unreserved, recordId, blockedMs }, fail, flight) => {
        this.#outage.answered()
        if (blockedMs !== undefined) this.#onBlock(key, blockedMs)
        this.#stats.reserved += granted
        let credited = false
        if (generation === keys.generation) credited = this.#credit(key, request, granted, unreserved, recordId)
        else native.keyedShareFailed(this.#handle, key, request.periodSlot, 0) // (charged: nothing owed)
        if (credited) keys.arm()
        else if (generation === keys.generation && keys.waitedFor(key)) this.#unclaimed.keep(flight, key, request, granted, unreserved, recordId)
        // Not the key's any more (dropped, another period, or the limiter was closed): back it goes.
        else if (granted > 0) this.#giveBacks.send({ key, periodId: request.periodId, units: granted, recordId })
        return OK
      },
    })
  }

  /** Give-backs of keys deleted (called after delete()). */
  flushDropped() {
    this.#giveBacks.sendDropped()
    this.#bucket?.flushDropped()
  }

  /**
   * Gives back every reservation and resolves once the store has it; rejects with
   * ERR_STORE_UNAVAILABLE when a give-back failed or got no answer within timeoutMs (those units
   * stay reserved in the store until the period ends). Store calls still under way are given
   * back when they answer. The limiter stays usable: a later consume reserves again.
   */
  async close() {
    await Promise.all(this.#blockCalls)
    const bucket = this.#bucket === undefined ? undefined : this.#bucket.close().then(() => undefined, (error) => error)
    await this.#closeQuota()
    const failed = await bucket
    if (failed !== undefined) throw failed
  }

  async #closeQuota() {
    this.#keys.closing()
    this.#giveBacks.sendAll(native.keyedShareGiveBack(this.#handle, 0, undefined))
    // Answers still to come are given back as they land (bounded by timeoutMs for close's wait).
    await this.#keys.settled()
    this.#unclaimed.returnAll()
    const outcomes = await this.#giveBacks.outcomes()
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

// What a block call that did not answer within timeoutMs resolves to.
const BLOCK_TIMED_OUT = Symbol('timed out')

// Operations of a shared consume (lib/native/contract.js's OPERATION).
const { sharedConsume: SHARED_CONSUME, sharedAfterStore: AFTER_STORE, sharedFailOpen: FAIL_OPEN } = require('../native/contract.js').OPERATION

module.exports = { ShareDriver, isSharedLimiter, storeStatsOf, SHARED_CONSUME }
