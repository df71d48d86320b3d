'use strict'
// The in-process keyed table of a KeyedQuotaClock: one of the backends behind the limiter, with
// their one interface (lib/keyed/keyed-backend.js). A shared limiter's table
// (lib/keyed/shared-table.js) is one of these with the reservation book the native side keeps
// beside it.

const native = require('../native/native.js')
const { startingReadings, JsClock } = require('../time/clocks.js')
const { callNative } = require('../native/errors.js')
const { LAYOUT, AT, OPERATION, STATUS } = require('../native/contract.js')
const { REGISTRY } = require('../native/registry.js')
const { N_OR_STATUS, DECIDED, DECIDED_WITH_ANOMALIES, ERROR, NO_ANOMALIES, RESUME, readDecision, resume, failure, callLimiter, toStatus } = require('../limiter/native-call.js')
const { ImmediateBackend } = require('./keyed-backend.js')
const { NEEDS_SLICE, needsQuota } = require('../share/need.js')

const { refund: REFUND } = OPERATION
const NEEDS_STORE = STATUS.needsStore
const DECIDED_WITH_WORK = STATUS.decidedWithWork
const NEEDS_SLICE_STATUS = STATUS.needsSlice

class KeyedTable extends ImmediateBackend {
  #native
  #call
  // The block book's letGo (see onKeyLimit), and the ERR_KEY_LIMIT refusals it undid.
  #letGo = () => false
  #refusalsUndone = 0
  #result
  // The JsClock of a limiter that reads a clock (or systemClock's reader) in JS, as QuotaClock's.
  #js
  #resolvePolicy

  /** `listener()`: the anomaly listener, registered once the clock's starting readings are taken. */
  constructor({ limiterOptions, clockArgs, maxKeys, policy, plan, listener, share, resolvePolicy }) {
    super()
    const { kind, manual } = clockArgs
    const { monotonicMs, wallMs, elapsedRealtimeMs } = startingReadings(clockArgs)
    const result = new Float64Array(LAYOUT.length)
    const anomalyListener = listener()
    this.#native = callNative(() =>
      native.keyedCreate({
        registry: REGISTRY,
        options: limiterOptions,
        maxKeys,
        hasPolicy: policy !== undefined,
        result,
        clock: { kind, manual, monotonicMs, wallMs, elapsedRealtimeMs },
        anomalyListener,
        restore: plan,
        // share.bucket: every key's bucket is the fleet's, in the store; a slice of it taken here, spendable for share.leaseMs.
        share: share === undefined ? undefined : { leaseUnits: share.leaseUnits, bucket: share.bucket ? { leaseMs: share.leaseMs } : undefined },
      }),
    )
    this.#call = native.keyedCallFunction(this.#native)
    this.#result = result
    this.#js = JsClock.of(clockArgs)
    this.#resolvePolicy = resolvePolicy
  }

  /** The native table (a shared limiter's driver makes its book's calls on it). */
  get handle() {
    return this.#native
  }

  /** The call function: `call(key)` with `n` and the operation in the result buffer. */
  get call() {
    return this.#call
  }

  get result() {
    return this.#result
  }

  /** The JsClock, or undefined for a clock read natively. */
  get js() {
    return this.#js
  }

  /**
   * The rare outcomes: anomalies, an error, or what the native side needs first (a policy,
   * readings). A shared consume that needs the store answers a StoreNeed (lib/share/need.js): the
   * quota units its reservation lacks, or a slice of its fleet bucket (`share.bucket`).
   */
  settle(key, n, operation) {
    try {
      return this.#settle(key, n, operation)
    } catch (error) {
      if (!this.#roomMade(error)) throw error
      // Keys whose blocks had ended were let go: the call once more, a key of them dropped for it.
      const result = this.#result
      result[N_OR_STATUS] = n
      result[AT.operation] = operation
      this.#call(key)
      return this.#settle(key, n, operation)
    }
  }

  /**
   * Whether an ERR_KEY_LIMIT refusal made room: the block book let go of keys whose blocks have
   * ended and no call or timer has seen end yet (a manual clock moved on, a loop that never
   * yielded to the timer). The refusal is then not counted: the call is made again.
   */
  #roomMade(error) {
    if (error?.code !== 'ERR_KEY_LIMIT' || !this.#letGo()) return false
    this.#refusalsUndone++
    return true
  }

  /** `letGo()`: lets go of the keys whose blocks have ended; true if there were any (the block book's). */
  set onKeyLimit(letGo) {
    this.#letGo = letGo
  }

  stats() {
    const stats = super.stats()
    stats.keyLimitRefusals -= this.#refusalsUndone
    return stats
  }

  #settle(key, n, operation) {
    const result = this.#result
    const final = (status) => {
      if (status === DECIDED) return operation === REFUND ? undefined : readDecision(result, NO_ANOMALIES)
      if (status === DECIDED_WITH_WORK) return readDecision(result, NO_ANOMALIES)
      if (status === NEEDS_STORE) return needsQuota(result[AT.retryAfterMs])
      if (status === NEEDS_SLICE_STATUS) return NEEDS_SLICE
      if (status === DECIDED_WITH_ANOMALIES) {
        const anomalies = callNative(() => native.keyedTakeAnomalies(this.#native))
        return operation === REFUND ? undefined : readDecision(result, anomalies)
      }
      if (status === ERROR) throw failure(this.#js, native.keyedTakeError(this.#native))
      return RESUME
    }
    return resume(result[N_OR_STATUS], result, this.#js, final, () => this.#resolvePolicy(key), (policy, supplied) => {
      // `policy` and a JS clock may have made calls of their own on this limiter: write it all again.
      result[N_OR_STATUS] = n
      result[AT.operation] = operation
      callLimiter(this.#js, () => native.keyedCallSlow(this.#native, key, policy, supplied))
      return result[N_OR_STATUS]
    })
  }

  /** QuotaClock's status() for one key (a key not held: what a fresh key would have, not holding it, unless `hold`). */
  status(key, hold = false) {
    const result = this.#result
    let read
    const again = (policy, supplied) => {
      read = callLimiter(this.#js, () => native.keyedStatus(this.#native, key, policy, supplied, hold))
      return result[N_OR_STATUS]
    }
    const final = (status) => (status === DECIDED ? toStatus(read, read.capacity, read.refillPerSecond, read.quotaLimit) : RESUME)
    return resume(again(undefined, false), result, this.#js, final, () => this.#resolvePolicy(key), again)
  }

  /** The key held as a consume would hold it (its policy asked), its bucket untouched: `block(key, forMs)`'s. */
  hold(key) {
    try {
      this.status(key, true)
    } catch (error) {
      if (!this.#roomMade(error)) throw error
      this.status(key, true)
    }
  }

  delete(key) {
    return callNative(() => native.keyedDelete(this.#native, key))
  }

  /** Marks a held key blocked (never dropped to make room nor as idle) or not; false: not held. */
  setBlocked(key, blocked) {
    return callNative(() => native.keyedSetBlocked(this.#native, key, blocked))
  }

  /** Marks a held key's policy (every held key's without one) to be asked again at its next call. */
  refreshPolicy(key) {
    if (key === undefined) callNative(() => native.keyedRefreshEveryPolicy(this.#native))
    else callNative(() => native.keyedRefreshPolicy(this.#native, key))
  }

  /** policyTtlMs: a held key's policy is asked again once that long has passed on the limiter's timeline. */
  setPolicyTtl(ttlMs) {
    callNative(() => native.keyedSetPolicyTtl(this.#native, ttlMs))
  }

  get size() {
    return callNative(() => native.keyedSize(this.#native))
  }

  /** The limiter's timeline now (ms of real elapsed time): blocks are timed on it. */
  timelineMs() {
    const js = this.#js
    return callNative(() => native.keyedTimelineMs(this.#native, js === undefined ? undefined : js.readings()[0]))
  }

  writeStats() {
    callNative(() => native.keyedStats(this.#native))
  }

  giveBack(key, n, periodSlot) {
    callNative(() => native.keyedGiveBack(this.#native, key, n, periodSlot))
  }

  snapshot() {
    return callNative(() => native.keyedSnapshot(this.#native))
  }

  /** Nothing to close (the table lives as long as its limiter): the limiter stays usable. */
  close() {
    return Promise.resolve()
  }
}

module.exports = { KeyedTable }
