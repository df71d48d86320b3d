'use strict'
// QuotaClock: a token bucket with an optional calendar quota, on a monotonic and a wall clock
// kept apart. The Rust core decides; this class checks arguments, reads JS clocks, and builds
// the decision from the shared result buffer (lib/registry.js).

const native = require('./native.js')
const { registerListener } = require('./anomalies.js')
const { toPeriod } = require('./calendar.js')
const { startingReadings, JsClock, NOT_READ } = require('./clocks.js')
const { toPublicError, callNative } = require('./errors.js')
const { parseOptions, checkCount, checkPositiveCount } = require('./options.js')
const { STATUS, AT } = require('./contract.js')
const { RESULT, LIMITER_INDEX, REGISTRY, consume, consumeSupplied, N_OR_STATUS, DECIDED, NO_ANOMALIES, supply, readDecision } = require('./registry.js')
const { rememberLimiter } = require('./http/limiter-facts.js')
const { readStats } = require('./stats.js')
const { checkNumber, own } = require('./validate.js')

// A limiter's native state is freed once its object has been collected.
const indexes = new FinalizationRegistry((index) => native.releaseLimiter(REGISTRY, index))

// Whether a value is a QuotaClock this class made (a Proxy or an Object.create of its prototype is
// not); for the subpath entries that take limiters.
let isQuotaClock

class QuotaClock {
  static {
    isQuotaClock = (value) => typeof value === 'object' && value !== null && #index in value
  }

  // Its index in this module instance's native registry.
  #index
  #capacity
  #refillPerSecond
  #quotaLimit
  #hasQuota
  // The JsClock of a limiter that reads a clock (or systemClock's reader) in JS; one field, so
  // that the others stay small.
  #js

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly } = parseOptions(options)
    const { kind, manual } = clockArgs
    const { monotonicMs, wallMs, elapsedRealtimeMs } = startingReadings(clockArgs)
    const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
    this.#index = callNative(() =>
      native.createLimiter({ registry: REGISTRY, options: limiterOptions, clock: { kind, manual, monotonicMs, wallMs, elapsedRealtimeMs }, anomalyListener: listener }),
    )
    this.#js = JsClock.of(clockArgs)
    indexes.register(this, this.#index)
    this.#capacity = limiterOptions.capacity
    this.#refillPerSecond = limiterOptions.refillPerSecond
    this.#hasQuota = limiterOptions.quotaPeriod !== undefined
    this.#quotaLimit = this.#hasQuota ? limiterOptions.quotaLimit : null
    rememberLimiter(this, clockArgs, true) // for the HTTP middleware
  }

  /** Takes `n` tokens (and `n` from the quota) if both are there. */
  tryConsume(n = 1) {
    if (n !== 1) checkCount(n, this.#capacity)
    RESULT[N_OR_STATUS] = n
    LIMITER_INDEX[0] = this.#index
    consume()
    if (RESULT[N_OR_STATUS] === DECIDED) return readDecision(this.#hasQuota, NO_ANOMALIES)
    return this.#settle(n)
  }

  /** tryConsume on a JS clock: the readings are taken here and passed in. */
  #consumeJs(n) {
    const [monotonicMs, wallMs] = this.#js.readings()
    // Written only now: the clock may have called other limiters, which share RESULT.
    supply(this.#index, n, monotonicMs, wallMs, undefined)
    consumeSupplied()
    if (RESULT[N_OR_STATUS] === DECIDED) return readDecision(this.#hasQuota, NO_ANOMALIES)
    return this.#settle(n)
  }

  /** The rare outcomes: a decision with anomalies, a JS clock to read, a call that needs the JS reader, or an error. */
  #settle(n) {
    const status = RESULT[N_OR_STATUS]
    if (status === STATUS.needsReadings) return this.#consumeJs(n)
    if (status === STATUS.decidedWithAnomalies) {
      return readDecision(this.#hasQuota, callNative(() => native.limiterTakeAnomalies(REGISTRY, this.#index)))
    }
    if (status === STATUS.needsReader) {
      // Nothing changed yet: resume on the readings the call took, with the reader's.
      const monotonicMs = RESULT[AT.monotonicMs]
      const wallMs = RESULT[AT.wallMs]
      const elapsedRealtimeMs = this.#js.elapsedRealtime()
      supply(this.#index, n, monotonicMs, wallMs, elapsedRealtimeMs)
      consumeSupplied()
      if (RESULT[N_OR_STATUS] === DECIDED) return readDecision(this.#hasQuota, NO_ANOMALIES)
      return this.#settle(n)
    }
    throw this.#failed(toPublicError(native.limiterTakeError(REGISTRY, this.#index)))
  }

  /** A public error about to be thrown (a monotonic regression latches a JS clock). */
  #failed(error) {
    return this.#js === undefined ? error : this.#js.failed(error)
  }

  /** Reads and reconciles the clocks like tryConsume, then gives back `n` tokens (up to capacity) and `n` quota units (down to zero). */
  refund(n = 1) {
    checkPositiveCount(n)
    const [monotonicMs, wallMs] = this.#readJsClock()
    const done = this.#native(() => native.limiterRefund(REGISTRY, this.#index, n, monotonicMs, wallMs, undefined))
    if (done.needsReader) {
      const { takenMonotonicMs, takenWallMs } = done
      const elapsedRealtimeMs = this.#js.elapsedRealtime()
      this.#native(() => native.limiterRefund(REGISTRY, this.#index, n, takenMonotonicMs, takenWallMs, elapsedRealtimeMs))
    }
  }

  /** A JS clock's two readings for a call made outside the hot path (none for native clocks; NaN once latched). */
  #readJsClock() {
    return this.#js === undefined ? NOT_READ : this.#js.readings()
  }

  /** A native call of the slow paths, its coded errors made public (a regression latches). */
  #native(body) {
    try {
      return body()
    } catch (error) {
      throw error && typeof error.code === 'string' ? this.#failed(toPublicError(error)) : error
    }
  }

  /** Reads and reconciles the clocks like tryConsume, consuming nothing; also reports the limits in force. */
  status() {
    const [monotonicMs, wallMs] = this.#readJsClock()
    let status = this.#native(() => native.limiterStatus(REGISTRY, this.#index, monotonicMs, wallMs, undefined))
    if (status.needsReader) {
      const { takenMonotonicMs, takenWallMs } = status
      const elapsedRealtimeMs = this.#js.elapsedRealtime()
      status = this.#native(() => native.limiterStatus(REGISTRY, this.#index, takenMonotonicMs, takenWallMs, elapsedRealtimeMs))
    }
    return {
      tokens: status.tokens,
      quotaUsed: own(status, 'quotaUsed') ?? null,
      quotaRemaining: own(status, 'quotaRemaining') ?? null,
      period: own(status, 'period') == null ? null : toPeriod(status.period),
      capacity: this.#capacity,
      refillPerSecond: this.#refillPerSecond,
      quotaLimit: this.#quotaLimit,
    }
  }

  /** Counters since construction: decisions and anomalies (keys 1, evicted and keyLimitRefusals 0). Reads no clock. */
  stats() {
    callNative(() => native.limiterStats(REGISTRY, this.#index))
    return readStats(RESULT)
  }

  /** The limiter's own period spec applied to `wallMs`; null without a quota. */
  periodFor(wallMs) {
    checkNumber(wallMs, 'wallMs', 'ERR_INVALID_ARG')
    const period = callNative(() => native.limiterPeriodFor(REGISTRY, this.#index, wallMs))
    return period == null ? null : toPeriod(period)
  }
}

module.exports = { QuotaClock, isQuotaClock }
