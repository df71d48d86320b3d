'use strict'
// What rateLimit's decision takes and gives back: the refund of what limiter entries took (all or
// nothing), a throttle's check within its timeout and what its answer or failure means.

const { QuotaClockError } = require('../native/errors.js')
const { thrownText } = require('../common/validate.js')
const { storeCallWithin, NOT_COUNTED } = require('../share/store-call.js')
const { THROTTLE_LIMITS } = require('./options.js')
const { giveBack } = require('./give-back.js')
const { isError } = require('./plan.js')

/** Gives back what the first `count` limiter entries took for this request (no clock is read). */
function refundTaken(taken, count) {
  for (let i = 0; i < count; i++) {
    const { entry, key, n, period } = taken[i]
    giveBack(entry, key, n, period)
  }
}

function refundQuietly(taken, count) {
  try {
    refundTaken(taken, count)
  } catch {
    // The request fails anyway; the limiter reports its own error on its next call.
  }
}

/**
 * A throttle store that did not answer within `entry.timeoutMs`: unavailable, as any store that has
 * not answered (ERR_STORE_UNAVAILABLE), and told apart from one that failed by its class.
 */
class ThrottleTimeout extends QuotaClockError {
  constructor(entry) {
    super('ERR_STORE_UNAVAILABLE', `the throttle store did not answer within ${entry.timeoutMs} ms`)
  }
}

function throttleUnavailable(entry, err) {
  entry.outage.failed(() => {
    const reason = err instanceof ThrottleTimeout ? err.message : `it failed: ${err.message}`
    return `rateLimit: the throttle store is unavailable (${reason}); requests ${entry.failOpen ? 'pass unchecked (failOpen)' : 'are answered 503'} until it answers again`
  })
}

/**
 * throttle.check within entry.timeoutMs (lib/share/store-call.js; its round trips are the
 * throttle's to count); a late answer is ignored.
 */
function checkWithin(entry, key) {
  return storeCallWithin(() => entry.throttle.check(key, entry.limits), NOT_COUNTED, entry.timeoutMs, () => {
    throw new ThrottleTimeout(entry)
  })
}

// Argument and clock errors are the caller's to see (the error path); a store answer that makes no
// sense is answered 503 even with failOpen (it is never an allowance); anything else a throttle
// rejects with means its store did not serve the check.
function isCallerError(err) {
  return err.code === 'ERR_INVALID_ARG' || err.code === 'ERR_CLOCK_READING'
}

/** A throttle's rejection as an Error with a code (a store may reject with anything). */
function throttleError(err) {
  if (isError(err) && typeof err.code === 'string') return err
  return new QuotaClockError('ERR_STORE_UNAVAILABLE', `rateLimit: the throttle store failed: ${thrownText(err)}`, { cause: err })
}

/** A throttle's denial as a decision, and the item it violated. */
function throttleDenial(entry, result) {
  const unit = THROTTLE_LIMITS.find((l) => l.reason === result.reason)?.unit ?? entry.windows[0]
  const window = result.windows[unit]
  const decision = {
    allowed: false,
    retryAfterMs: result.retryAfterMs,
    retryAfterBasis: 'wall-period',
    tokens: 0,
    quotaRemaining: window && typeof window.remaining === 'number' ? window.remaining : 0,
    anomalies: [],
  }
  return { decision, violated: [entry.items.plain[unit]] }
}

module.exports = { ThrottleTimeout, refundTaken, refundQuietly, checkWithin, isCallerError, throttleError, throttleUnavailable, throttleDenial }
