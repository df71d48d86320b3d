'use strict'
// What the HTTP middleware (lib/http.js) needs to know about a limiter and cannot ask it, recorded
// by index.js when the limiter is made:
// - its wall clock, so that a quota's reset time in the RateLimit header is read from the
//   limiter's own clock (a manualClock in tests, any JS clock source), not from Date.now();
// - whether every key has the same limits (no `policy`), so that one record of the limits in force
//   serves every key instead of one `status(key)` per key.

const facts = new WeakMap()
const UNKNOWN = Object.freeze({ readWallMs: Date.now, sameLimitsForEveryKey: false })

/** The wall reading of a limiter's clock (index.js's `clockArguments` result) as a JS function. */
function wallReaderOf({ kind, manual, clock }) {
  if (kind === 'manual') return () => manual.wallMs()
  if (clock !== undefined) return () => clock.wallMs() // a JS clock: its method looked up at every reading
  return Date.now // the system clocks: CLOCK_REALTIME
}

/** Called by the limiter constructors with their clock arguments. */
function rememberLimiter(limiter, clockArgs, sameLimitsForEveryKey) {
  facts.set(limiter, Object.freeze({ readWallMs: wallReaderOf(clockArgs), sameLimitsForEveryKey }))
}

/** `{ readWallMs, sameLimitsForEveryKey }`; for a limiter made elsewhere, Date.now and false. */
function limiterFacts(limiter) {
  return facts.get(limiter) ?? UNKNOWN
}

module.exports = { rememberLimiter, limiterFacts }
