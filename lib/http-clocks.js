'use strict'
// What the HTTP middleware (lib/http.js) needs to know about a limiter and cannot ask it, recorded
// by index.js when the limiter is made:
// - its wall clock, so that a quota's reset time in the RateLimit header is read from the
//   limiter's own clock (a manualClock in tests, any JS clock source), not from Date.now();
// - whether every key has the same limits (no `policy`), so that one record of the limits in force
//   serves every key instead of one `status(key)` per key.

const facts = new WeakMap()
const UNKNOWN = Object.freeze({ readWallMs: Date.now, sameLimitsForEveryKey: false })

/** Called by the limiter constructors. */
function rememberLimiter(limiter, readWallMs, sameLimitsForEveryKey) {
  facts.set(limiter, Object.freeze({ readWallMs, sameLimitsForEveryKey }))
}

/** `{ readWallMs, sameLimitsForEveryKey }`; for a limiter made elsewhere, Date.now and false. */
function limiterFacts(limiter) {
  return facts.get(limiter) ?? UNKNOWN
}

module.exports = { rememberLimiter, limiterFacts }
