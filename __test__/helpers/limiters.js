'use strict'
// Limiters and options that several test files build the same way.

const { QuotaClock, manualClock } = require('../..')

/** The manual clock's default day, at noon UTC: Monday 2024-01-15T12:00:00Z. */
const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = Object.freeze({ unit: 'day', timeZone: 'UTC' })

/** Options for a QuotaClock on a fresh manual clock at NOON (bursts of 10, 1 token/s), with `extra` on top. */
const baseOptions = (extra = {}) => ({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), ...extra })

/** The smallest valid options, on the system clock: a bucket of 5 refilled at 1 token/s. */
const PLAIN_OPTIONS = Object.freeze({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })

/**
 * A QuotaClock on its own manual clock (monotonic 0, wall `wallMs`; with `reader`, an
 * elapsed-realtime reader at 0). Options left undefined are left out. Returns { clock, limiter }.
 */
function manualLimiter({ capacity = 10, refillPerSecond = 1, initialTokens, quota, wallMs = NOON, policy = 'ignore', onAnomaly, reader = false } = {}) {
  const clock = manualClock(reader ? { monotonicMs: 0, wallMs, elapsedRealtimeMs: 0 } : { monotonicMs: 0, wallMs })
  const options = { capacity, refillPerSecond, suspendPolicy: policy, clock }
  if (initialTokens !== undefined) options.initialTokens = initialTokens
  if (quota !== undefined) options.quota = quota
  if (onAnomaly !== undefined) options.onAnomaly = onAnomaly
  return { clock, limiter: new QuotaClock(options) }
}

module.exports = { NOON, UTC_DAY, baseOptions, PLAIN_OPTIONS, manualLimiter }
