'use strict'
// QuotaClock: a token bucket with an optional calendar quota, on a monotonic and a wall clock
// kept apart. The Rust core decides; this class checks arguments, reads JS clocks, and builds
// the decision from the shared result buffer (lib/registry.js).

const native = require('./binding.js')
const { registerListener, toAnomaly } = require('./anomalies.js')
const { toPeriod } = require('./calendar.js')
const { readClock, readReader, enterClock, startingReadings } = require('./clocks.js')
const { toPublicError, callNative } = require('./errors.js')
const { parseOptions, checkCount, checkPositiveCount } = require('./options.js')
const { STATUS, AT } = require('./contract.js')
const { RESULT, LIMITER_INDEX, REGISTRY, consume, consumeSupplied, N_OR_STATUS, DECIDED, NO_ANOMALIES, supply, readDecision } = require('./registry.js')
const { rememberLimiter } = require('./http/limiter-facts.js')
const { checkNumber, own } = require('./validate.js')

// A limiter's native state is freed once its object has been collected.
const indexes = new FinalizationRegistry((index) => native.releaseLimiter(REGISTRY, index))

class QuotaClock {
  // Its index in this module instance's native registry.
  #index
  #capacity
  #refillPerSecond
  #quotaLimit
  #hasQuota
  // For a limiter read in JS (one field, so that others stay small): `{ clock, reader, reading,
  // latched }`, a JS clock (read here, at every call) or a JS elapsed-realtime reader of
  // systemClock(). The native side holds neither, so a clock or reader that refers back to this
  // limiter does not keep it alive. `reading`: a call the clock makes back into this limiter is
  // refused. `latched`: the monotonic clock regressed; every later call fails with that, and the
  // clock is not read again.
  #js

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly } = parseOptions(options)
    const { kind, manual, clock, reader } = clockArgs
    const { monotonicMs, wallMs, elapsedRealtimeMs } = startingReadings(clockArgs)
    const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
    this.#index = callNative(() =>
      native.createLimiter({ registry: REGISTRY, options: limiterOptions, clock: { kind, manual, monotonicMs, wallMs, elapsedRealtimeMs }, anomalyListener: listener }),
    )
    if (clock !== undefined || reader !== undefined) this.#js = { clock, reader, reading: false, latched: false }
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
    const js = this.#js
    let monotonicMs = NaN
    let wallMs = NaN
    if (!js.latched) {
      enterClock(js)
      try {
        monotonicMs = readClock(js.clock, 'monotonicMs')
        wallMs = readClock(js.clock, 'wallMs')
      } finally {
        js.reading = false
      }
    }
    // Written only now: the clock may have called other limiters, which share RESULT.
    supply(this.#index, n, monotonicMs, wallMs, undefined)
    consumeSupplied()
    if (RESULT[N_OR_STATUS] === DECIDED) return readDecision(this.#hasQuota, NO_ANOMALIES)
    return this.#settle(n)
  }

  /** The JS elapsed-realtime reading (of a JS clock, or of systemClock's reader). */
  #readElapsedRealtime() {
    const js = this.#js
    enterClock(js)
    try {
      return js.clock !== undefined ? readClock(js.clock, 'elapsedRealtimeMs') : readReader(js.reader)
    } finally {
      js.reading = false
    }
  }

  /** The rare outcomes: a decision with anomalies, a JS clock to read, a call that needs the JS reader, or an error. */
  #settle(n) {
    const status = RESULT[N_OR_STATUS]
    if (status === STATUS.needsReadings) return this.#consumeJs(n)
    if (status === STATUS.decidedWithAnomalies) {
      return readDecision(this.#hasQuota, callNative(() => native.limiterTakeAnomalies(REGISTRY, this.#index)).map(toAnomaly))
    }
    if (status === STATUS.needsReader) {
      // Nothing changed yet: resume on the readings the call took, with the reader's.
      const monotonicMs = RESULT[AT.monotonicMs]
      const wallMs = RESULT[AT.wallMs]
      const elapsedRealtimeMs = this.#readElapsedRealtime()
      supply(this.#index, n, monotonicMs, wallMs, elapsedRealtimeMs)
      consumeSupplied()
      if (RESULT[N_OR_STATUS] === DECIDED) return readDecision(this.#hasQuota, NO_ANOMALIES)
      return this.#settle(n)
    }
    throw this.#failed(toPublicError(native.limiterTakeError(REGISTRY, this.#index)))
  }

  #failed(error) {
    if (error.code === 'ERR_MONOTONIC_REGRESSION' && this.#js !== undefined) this.#js.latched = true
    return error
  }

  /** Reads and reconciles the clocks like tryConsume, then gives back `n` tokens (up to capacity) and `n` quota units (down to zero). */
  refund(n = 1) {
    checkPositiveCount(n)
    const [monotonicMs, wallMs] = this.#readJsClock()
    const done = this.#native(() => native.limiterRefund(REGISTRY, this.#index, n, monotonicMs, wallMs, undefined))
    if (done.needsReader) {
      const { takenMonotonicMs, takenWallMs } = done
      const elapsedRealtimeMs = this.#readElapsedRealtime()
      this.#native(() => native.limiterRefund(REGISTRY, this.#index, n, takenMonotonicMs, takenWallMs, elapsedRealtimeMs))
    }
  }

  /** A JS clock's two readings for a call made outside the hot path (undefined for native clocks; NaN once latched). */
  #readJsClock() {
    const js = this.#js
    if (js === undefined || js.clock === undefined) return [undefined, undefined]
    if (js.latched) return [NaN, NaN]
    enterClock(js)
    try {
      return [readClock(js.clock, 'monotonicMs'), readClock(js.clock, 'wallMs')]
    } finally {
      js.reading = false
    }
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
      const elapsedRealtimeMs = this.#readElapsedRealtime()
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

  /** The limiter's own period spec applied to `wallMs`; null without a quota. */
  periodFor(wallMs) {
    checkNumber(wallMs, 'wallMs', 'ERR_INVALID_ARG')
    const period = callNative(() => native.limiterPeriodFor(REGISTRY, this.#index, wallMs))
    return period == null ? null : toPeriod(period)
  }
}

module.exports = { QuotaClock }
