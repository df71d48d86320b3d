'use strict'
// The driver of a fleet bucket (`share.bucket`): the store calls that take slices of a
// key's bucket, which lives in the store. The slice book (per key: the slice's tokens, its lease,
// a store call under way, the fleet's tokens as last heard of, the fleet-clock reading, failOpen)
// is native (src/keyed/share/slice.rs); this file asks the store what the book says is needed and hands
// the answers back.
//
// - A consume its slice covers is decided in one native call and never comes here; nor does one
//   the book denies locally (the store said the bucket was short less than a second ago).
// - One the slice does not cover waits for one `bucketTake` (one store call per key at a time,
//   shared by every concurrent call for it: it asks for what they lack together, the calls made
//   in one synchronous run included), then is decided. It is denied only when the fleet's bucket
//   lacks its tokens, as the store last said. A call whose tokens others waiting took, or whose
//   slice came after its lease had lapsed (the process kept the answer waiting), asks again
//   within its own timeoutMs; when that has passed it is refused with ERR_STORE_UNAVAILABLE (with
//   failOpen, denied on what it holds): no call waits for the store longer than timeoutMs, and its
//   time counts from when the process turned to I/O after its first store call was sent.
// - A take's answer that the key is blocked fleet-wide (blockedMs) goes to the limiter's block
//   book before the calls waiting for it are decided: they are denied by the block (their tokens
//   refunded to the slice), and so is every call of the key while the block lasts.
// - A covered consume that leaves the slice low (half of what it brought) or its lease in its
//   last quarter fetches the next slice in the background.
// - A timer (unref'd, running only while slices are held) gives back the unspent tokens of keys
//   idle for min(idleMs, leaseMs / 2), and of keys deleted or dropped; a few at a time, so the
//   store is never held up by this process's background work. close() gives back every slice
//   and resolves once the store has them.

const { QuotaClockError, internalError, warn } = require('../native/errors.js')
const { thrownText, describe } = require('../common/validate.js')
const { withTimeout, storeDeadline } = require('../common/timeout.js')
const { outcomeOf, OK } = require('./store-call.js')
const { KeyFlights, keyText } = require('./key-flights.js')
const native = require('../native/native.js')
const { NEEDS_SLICE } = require('./need.js')

const { sharedConsume: SHARED_CONSUME, sharedAfterStore: AFTER_STORE, sharedFailOpen: FAIL_OPEN } = require('../native/contract.js').OPERATION

// How many times a call asks the store at most (each round either serves the calls waiting
// together, finds the bucket short, or loses a race a round trip long: this is a guard).
const MAX_ROUNDS = 8
// What a call's wait for a store call resolves to once the call's time is up.
const LATE = 'late'
// Why a call was not served within its time (ERR_STORE_UNAVAILABLE's message).
const STILL_UNANSWERED = 'its store call is still unanswered'
const NOTHING_SPENDABLE = "the store's answers brought it no tokens it could spend (calls made meanwhile took them, or the process kept the answers waiting past their lease)"
// At most this many give-backs in flight at once (the rest wait for the next turn of the timer).
const GIVE_BACKS_AT_ONCE = 32

class BucketDriver {
  #handle
  #ops
  #name
  #instance
  #stats
  #outage
  #onBlock
  #leaseMs
  #idleMs
  #timeoutMs
  #decide
  #readMonotonic
  // The key's store call under way (a take or a give-back), its demand, the give-back timer, the
  // close generation, the outage path.
  #keys
  // Give-backs' outcomes close() waits for (undefined: done, else the error).
  #pending = new Set()
  // Give-backs sent and not settled (at most GIVE_BACKS_AT_ONCE).
  #giveBacksUnderWay = 0

  /**
   * `shared`: `{ handle, ops, name, instance, stats, outage, onBlock }` (onBlock(key, blockedMs):
   * where a take's answer that the key is blocked fleet-wide goes, before its calls are decided).
   * `decide(key, n, operation)`: the limiter's native shared consume (a Decision, or a StoreNeed:
   * lib/share/need.js).
   */
  constructor(shared, options, decide, readMonotonic) {
    this.#handle = shared.handle
    this.#ops = shared.ops
    this.#name = shared.name
    this.#instance = shared.instance
    this.#stats = shared.stats
    this.#outage = shared.outage
    this.#onBlock = shared.onBlock
    this.#leaseMs = options.leaseMs
    this.#idleMs = Math.min(options.idleMs, options.leaseMs / 2)
    this.#timeoutMs = options.timeoutMs
    this.#decide = decide
    this.#readMonotonic = readMonotonic
    // Gives back what idle keys hold, and what dropped keys held; stops when nothing is held.
    const tick = () => {
      this.#pump(this.#idleMs)
      return native.keyedSliceHolds(this.#handle)
    }
    this.#keys = new KeyFlights(shared, { timeoutMs: options.timeoutMs, failOpen: options.failOpen, idleMs: this.#idleMs }, tick)
  }

  /**
   * A consume the key's slice does not cover: waits for a store call that takes a slice, then
   * decides. Resolves to a Decision, or to the quota's StoreNeed (the quota's store call comes
   * next). Denied only when the fleet's bucket lacks `n`, as the store last said; refused with
   * ERR_STORE_UNAVAILABLE (or decided by failOpen) when no store answer it could spend came within
   * timeoutMs.
   */
  async acquire(key, n) {
    const calledMs = performance.now()
    // The call's time: timeoutMs, counted (once its first store call has been answered) from when
    // the process turned to I/O after sending it, so that neither a burst of calls made in one
    // synchronous run nor a loop held before the answer could be read counts against it.
    let deadline = calledMs + this.#timeoutMs
    const keys = this.#keys
    keys.addDemand(key, n)
    try {
      // Calls of the key made in the same synchronous run ask together: one take for what they
      // lack together, not one for the first and another round for the rest.
      if (!keys.flights.has(key)) await undefined
      for (let round = 0; ; round++) {
        const startedMs = performance.now()
        const hanging = keys.hanging(key)
        if (hanging !== undefined) return this.#unavailable(key, n, hanging, 0)
        let flight = keys.flights.get(key)
        const taking = flight !== undefined && !flight.timedOut && flight.take
        if (!taking && flight !== undefined && !flight.timedOut) {
          // A give-back under way: the take follows it (one store call per key at a time).
          if ((await this.#within(flight, deadline)) === LATE) return this.#outOfTime(key, n, calledMs, STILL_UNANSWERED)
          continue
        }
        if (!taking) {
          const request = native.keyedSliceRequest(this.#handle, key, n, keys.demand(key), this.#readMonotonic())
          if (request == null) {
            // The key was dropped (maxKeys) since the call began: held again by deciding anew.
            const decision = this.#decide(key, n, SHARED_CONSUME)
            if (decision !== NEEDS_SLICE) return decision
            if (round >= MAX_ROUNDS) return this.#outOfTime(key, n, calledMs, NOTHING_SPENDABLE)
            continue
          }
          flight = this.#fly(key, request, true)
        }
        const outcome = flight.settled ? flight.outcome : round === 0 ? await flight.done : await this.#within(flight, deadline)
        if (outcome === LATE) return this.#outOfTime(key, n, calledMs, STILL_UNANSWERED)
        if (outcome !== OK) return this.#unavailable(key, n, flight, performance.now() - startedMs)
        if (round === 0) deadline = Math.max(calledMs, flight.timedFromMs ?? performance.now()) + this.#timeoutMs
        const decision = this.#decide(key, n, SHARED_CONSUME)
        if (decision !== NEEDS_SLICE) return withAnomaly(decision, flight.anomaly)
        // Not covered: others waiting took what came, or it came after its lease had lapsed (the
        // process kept the answer waiting). Denied when the fleet's bucket lacks n; else asked
        // again while the call's time lasts.
        if (native.keyedSliceShort(this.#handle, key, n, this.#readMonotonic())) return this.#final(key, n)
        if (round >= MAX_ROUNDS || deadline - performance.now() <= 0) return this.#outOfTime(key, n, calledMs, NOTHING_SPENDABLE)
      }
    } finally {
      keys.addDemand(key, -n)
    }
  }

  /** The flight's outcome, or LATE once the call's deadline has passed (timed as storeDeadline times). */
  #within(flight, deadline) {
    return withTimeout(flight.done, Math.max(0, deadline - performance.now()), () => LATE, storeDeadline)
  }

  /**
   * No store answer the call could spend came within its time (`why`): denied with the fleet's
   * wait when the fleet's bucket, as last heard of and refilled since, lacks `n`; else refused with
   * ERR_STORE_UNAVAILABLE, since the store did not serve the call in time. (With failOpen it is
   * denied on what the key holds: the store answers, so no local bucket may admit past it.)
   */
  #outOfTime(key, n, calledMs, why) {
    if (native.keyedSliceShort(this.#handle, key, n, this.#readMonotonic())) return this.#final(key, n)
    return this.#keys.outOfTime(why, performance.now() - calledMs, () => this.#final(key, n))
  }

  /** Decided on what the slice holds now (denied with the fleet's wait when it is short). */
  #final(key, n) {
    return this.#settled(key, n, this.#decide(key, n, AFTER_STORE))
  }

  /** A decision, or the quota's need; never a slice's (decided on what the key holds). */
  #settled(key, n, decision) {
    if (decision === NEEDS_SLICE) {
      const held = this.#decide(key, n, AFTER_STORE)
      if (held === NEEDS_SLICE) throw internalError('a shared bucket asked for a slice right after a store answer')
      return held
    }
    return decision
  }

  /** The store is unavailable for this call: failOpen decides it by a local bucket of C and R. */
  #unavailable(key, n, flight, waitedMs) {
    const failOpen = () => this.#settled(key, n, this.#decide(key, n, FAIL_OPEN))
    return this.#keys.unavailable(flight, waitedMs, failOpen, 'calls that the slices held here do not cover', 'decided by a local bucket (failOpen)')
  }

  /** The store call a request of the slice book describes (`take`: it takes tokens; else a give-back). */
  #fly(key, request, take) {
    const keys = this.#keys
    const generation = keys.generation
    const args = {
      name: this.#name,
      key,
      capacity: request.capacity,
      refillPerSecond: request.refillPerSecond,
      instance: this.#instance,
      leaseMs: this.#leaseMs,
      want: request.want,
      more: request.more,
      held: request.held,
      give: request.give,
      charge: request.charge,
      fleetMs: request.fleetMs,
      recordId: request.recordId,
      most: request.most,
      spentMs: request.spentMs,
      spend: request.spend,
    }
    const flight = keys.fly(key, {
      call: (roundTrip) => this.#ops.bucketTake(args, roundTrip),
      failed: () => native.keyedSliceFailed(this.#handle, key, request.give, request.charge),
      answered: (answer) => {
        this.#outage.answered()
        if (answer.blockedMs !== undefined) this.#onBlock(key, answer.blockedMs)
        if (answer.repaired) {
          // The store found a record that was not a bucket record and made it anew, empty.
          warn(
            `quota store of share "${this.#name}" held a bucket record for key ${describe(key)} that was not one (a field missing, not a number in range, or a key of another type); ` +
              'it was replaced by an empty bucket of a new identity, which refills from now',
            'QUOTA_CLOCK_STORE_RECORD_REPAIRED',
          )
        }
        if (request.give > 0) this.#stats.returned += request.give
        this.#stats.reserved += answer.granted
        // A take its asking call spends at once, answered after that call stopped waiting: what it
        // granted is not credited (the store records none of it, so no later call may spend it),
        // but what the slice kept is, renewed, as the store counts it out to this process.
        const late = request.spend && flight.timedOut
        const credit = late ? { ...answer, granted: 0, held: answer.held - answer.granted } : answer
        const credited = generation === keys.generation && native.keyedSliceCredit(this.#handle, key, request.sentMs, credit, this.#readMonotonic())
        // A store-clock-step the answer showed: on the decisions of the calls that waited for it too.
        if (credited) flight.anomaly = native.keyedSliceAnomaly(this.#handle) ?? undefined
        // (What the store counts out to this process: what a take spent at once granted, never.)
        const give = request.spend ? answer.held - answer.granted : answer.held
        if (credited) keys.arm()
        else if (give > 0) {
          // Not the key's any more (dropped, or the limiter was closed): the tokens go back.
          const giveBack = { ...request, want: 0, more: 0, held: 0, give, charge: 0, fleetMs: -1, recordId: answer.recordId, most: 0, spend: false }
          queueMicrotask(() => this.#giveBack(key, giveBack))
        }
        return OK
      },
    })
    flight.take = take
    return flight
  }

  /** After a covered decision that left the key's slice low: the next slice, in the background. */
  afterDecision(key) {
    if (this.#keys.flights.has(key)) return
    let request
    try {
      request = native.keyedSliceRequest(this.#handle, key, 0, 0, this.#readMonotonic())
    } catch {
      return // an unreadable clock: the call that needs the slice asks
    }
    if (request != null) this.#fly(key, request, true)
  }

  /**
   * Sends the give-backs the slice book has due (keys idle for `idleMs`, 0: every key), at most
   * GIVE_BACKS_AT_ONCE under way at a time: each one that settles sends the next, so the store
   * is never queued up behind this process's background work, however many keys it holds.
   */
  #pump(idleMs) {
    while (this.#giveBacksUnderWay < GIVE_BACKS_AT_ONCE) {
      let requests
      try {
        requests = native.keyedSliceGiveBacks(this.#handle, idleMs, GIVE_BACKS_AT_ONCE - this.#giveBacksUnderWay, this.#readMonotonic())
      } catch {
        return // an unreadable clock: next time
      }
      if (requests.length === 0) return
      for (const request of requests) {
        this.#giveBacksUnderWay++
        this.#giveBack(keyText(request.key), request).then((failed) => {
          this.#giveBacksUnderWay--
          // (A failed one is not sent again at once: the store is away; the timer tries later.)
          if (failed === undefined) this.#pump(idleMs)
        })
      }
    }
  }

  /** One give-back, after the key's store call under way; close() waits for its outcome. */
  #giveBack(key, request) {
    const before = this.#keys.flights.get(key)
    const send = () => outcomeOf(this.#fly(key, request, false), this.#timeoutMs)
    const outcome = before === undefined ? send() : before.done.then(send)
    this.#pending.add(outcome)
    outcome.then(() => this.#pending.delete(outcome))
    return outcome
  }

  /** Sends the give-backs of keys deleted or dropped at once. */
  flushDropped() {
    this.#pump(Infinity)
  }

  /**
   * Gives back every slice and resolves once the store has them; rejects with
   * ERR_STORE_UNAVAILABLE when the store did not take them within timeoutMs (the store writes
   * them off once the lease has lapsed: leaseMs * 1.1 + 1 s after the last call). The limiter
   * stays usable.
   */
  async close() {
    await this.#keys.settled()
    this.#keys.closing()
    this.#pump(0)
    // Until nothing is under way: a take that started as the calls before close() were decided (a
    // background fetch) or answered late (after its timeout) is not the key's any more, and its
    // answer queues the give-back of what it brought; close() waits for those too, unless a
    // give-back has failed already (then it rejects at once: late answers are given back as they come).
    let failed
    for (;;) {
      if (this.#pending.size > 0) {
        const outcomes = await Promise.all([...this.#pending])
        failed ??= outcomes.find((outcome) => outcome !== undefined)
      } else if (this.#keys.flights.size > 0 && failed === undefined) {
        await this.#keys.finished(this.#timeoutMs)
        await new Promise(setImmediate) // (the give-backs their answers queued)
      } else break
    }
    if (failed !== undefined) {
      throw new QuotaClockError(
        'ERR_STORE_UNAVAILABLE',
        `quota store of share "${this.#name}" did not take back every slice on close (${thrownText(failed)}); the store writes them off once their lease has lapsed`,
        { cause: failed },
      )
    }
  }
}

/** A decision (or the quota's need) with the anomaly its store call showed, if any. */
function withAnomaly(decision, anomaly) {
  if (anomaly === undefined || decision === null || typeof decision !== 'object' || !Array.isArray(decision.anomalies)) return decision
  return { ...decision, anomalies: [...decision.anomalies, anomaly] }
}

module.exports = { BucketDriver }
