'use strict'
// The KeyedQuotaClocks made with `share`, and their drivers (lib/share/driver.js's ShareDriver):
// rateLimit and the metrics ask whether a limiter is shared, stats() reads its store counters.

const drivers = new WeakMap()

/** Notes `driver` as the share driver of `limiter` (ShareDriver's constructor). */
function registerDriver(limiter, driver) {
  drivers.set(limiter, driver)
}

/** Whether a KeyedQuotaClock was made with `share` (its consume may wait for the store). */
function isSharedLimiter(limiter) {
  return drivers.has(limiter)
}

/** Whether a KeyedQuotaClock's buckets are the fleet's (`share.bucket`). */
function isFleetBucket(limiter) {
  return drivers.get(limiter)?.fleetBucket === true
}

/**
 * A shared limiter's store counters, for stats(): `{ calls, errors, timeouts, reserved,
 * returned }` (store calls made, failed, unanswered within timeoutMs; units reserved, units
 * given back); undefined for any other limiter.
 */
function storeStatsOf(limiter) {
  return drivers.get(limiter)?.storeStats()
}

module.exports = { registerDriver, isSharedLimiter, isFleetBucket, storeStatsOf }
