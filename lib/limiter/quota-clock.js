'use strict'
// QuotaClock: a token bucket with an optional calendar quota, on a monotonic and a wall clock kept
// apart. The Rust core decides; this class checks arguments and makes the calls
// (lib/limiter/native-call.js: the result buffer read back, JS clocks read when the native side
// asks).

const native = require('../native/native.js')
const { registerListener } = require('../time/anomalies.js')
const { startingReadings, JsClock } = require('../time/clocks.js')
const { callNative } = require('../native/errors.js')
const { parseOptions, checkCount } = require('./options.js')
const { RESULT, LIMITER_INDEX, REGISTRY, consume, consumeSupplied } = require('../native/registry.js')
const { N_OR_STATUS, DECIDED, DECIDED_WITH_ANOMALIES, ERROR, NO_ANOMALIES, RESUME, readDecision, resume, noPolicy, failure, callLimiter, toStatus } = require('./native-call.js')
const { rememberLimiter } = require('./limiter-facts.js')
const { checkNumber, coded } = require('../common/validate.js')
const { readStats } = require('../native/stats.js')
const { AT } = require('../native/contract.js')
const { toPeriod } = require('../time/calendar.js')

// A limiter's native state is freed once its object has been collected.
const indexes = new FinalizationRegistry((index) => native.releaseLimiter(REGISTRY, index))

let giveBack

/** The period a QuotaClock decision's quota units count in; read right after the decision (any QuotaClock call writes it). */
function takenPeriod() {
  return RESULT[AT.periodSlot]
}

class QuotaClock {
  // Its index in this module instance's native registry.
  #index
  #capacity
  #refillPerSecond
  #quotaLimit
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
    this.#quotaLimit = limiterOptions.quotaPeriod !== undefined ? limiterOptions.quotaLimit : null
    rememberLimiter(this, clockArgs, true) // for the HTTP middleware
  }

  /** Takes `n` tokens (and `n` from the quota) if both are there. */
  tryConsume(n = 1) {
    if (n !== 1) checkCount(n)
    RESULT[N_OR_STATUS] = n
    LIMITER_INDEX[0] = this.#index
    consume()
    if (RESULT[N_OR_STATUS] === DECIDED) return readDecision(RESULT, NO_ANOMALIES)
    return this.#settle(n)
  }

  /** The rare outcomes: a decision with anomalies, an error, or what the native side needs first (a JS clock's readings, the JS reader's). */
  #settle(n) {
    const final = (status) => {
      if (status === DECIDED) return readDecision(RESULT, NO_ANOMALIES)
      if (status === DECIDED_WITH_ANOMALIES) {
        return readDecision(RESULT, callNative(() => native.limiterTakeAnomalies(REGISTRY, this.#index)))
      }
      if (status === ERROR) throw failure(this.#js, native.limiterTakeError(REGISTRY, this.#index))
      return RESUME
    }
    return resume(RESULT[N_OR_STATUS], RESULT, this.#js, final, noPolicy, () => {
      // Written only now: the clock may have called other limiters, which share RESULT.
      RESULT[N_OR_STATUS] = n
      LIMITER_INDEX[0] = this.#index
      consumeSupplied()
      return RESULT[N_OR_STATUS]
    })
  }

  /** Reads and reconciles the clocks like tryConsume, then gives back `n` tokens (up to capacity) and `n` quota units (down to zero). */
  refund(n = 1) {
    checkCount(n)
    const again = (_, supplied) => {
      callLimiter(this.#js, () => native.limiterRefund(REGISTRY, this.#index, n, supplied))
      return RESULT[N_OR_STATUS]
    }
    resume(again(undefined, false), RESULT, this.#js, (status) => (status === DECIDED ? undefined : RESUME), noPolicy, again)
  }

  /** Reads and reconciles the clocks like tryConsume, consuming nothing; also reports the limits in force. */
  status() {
    let read
    const again = (_, supplied) => {
      read = callLimiter(this.#js, () => native.limiterStatus(REGISTRY, this.#index, supplied))
      return RESULT[N_OR_STATUS]
    }
    const final = (status) => (status === DECIDED ? toStatus(read, this.#capacity, this.#refillPerSecond, this.#quotaLimit) : RESUME)
    return resume(again(undefined, false), RESULT, this.#js, final, noPolicy, again)
  }

  /** Counters since construction: decisions and anomalies (keys 1, evicted and keyLimitRefusals 0). Reads no clock. */
  stats() {
    callNative(() => native.limiterStats(REGISTRY, this.#index))
    return readStats(RESULT)
  }

  static {
    // For the HTTP middleware's all-or-nothing rollback (lib/http/give-back.js), not public API.
    giveBack = (limiter, n, periodSlot) => {
      if (!(#index in limiter)) throw coded(TypeError, 'ERR_INVALID_ARG', 'giveBack needs a QuotaClock')
      callNative(() => native.limiterGiveBack(REGISTRY, limiter.#index, n, periodSlot))
    }
  }

  /** The limiter's own period spec applied to `wallMs`; null without a quota. */
  periodFor(wallMs) {
    checkNumber(wallMs, 'wallMs', 'ERR_INVALID_ARG')
    const period = callNative(() => native.limiterPeriodFor(REGISTRY, this.#index, wallMs))
    return period == null ? null : toPeriod(period)
  }
}

/** Gives back what a decision took, reading no clock: `n` tokens, and `n` quota units if the period `periodSlot` (from takenPeriod) is still open. */
function giveBackTaken(limiter, n, periodSlot) {
  giveBack(limiter, n, periodSlot)
}

module.exports = { QuotaClock, takenPeriod, giveBackTaken }
