'use strict'
// What the HTTP middleware (lib/http/) needs to know about a limiter and cannot ask it, recorded
// by the limiter constructors (lib/limiter/quota-clock.js, lib/keyed/keyed.js), in a face folder
// so that they never import from a subpath folder:
// - its wall clock, so that a quota's reset time in the RateLimit header is read from the
//   limiter's own clock (a manualClock in tests, any JS clock source), not from Date.now();
// - whether every key has the same limits (no `policy`), so that one record of the limits in force
//   serves every key instead of one `status(key)` per key.
// And, for the metrics (lib/metrics/): whether a limiter was closed (a zone limiter's close()).

const facts = new WeakMap()
const UNKNOWN = Object.freeze({ readWallMs: Date.now, sameLimitsForEveryKey: false })
const SYSTEM_CLOCK_FACTS = [UNKNOWN, Object.freeze({ readWallMs: Date.now, sameLimitsForEveryKey: true })]

/** The wall reading of a limiter's clock (lib/time/clocks.js's `clockArguments` result) as a JS function. */
function wallReaderOf({ kind, manual, clock }) {
  if (kind === 'manual') return () => manual.wallMs()
  if (clock !== undefined) return () => clock.wallMs() // a JS clock: its method looked up at every reading
  return Date.now // the system clocks: CLOCK_REALTIME
}

/** Called by the limiter constructors with their clock arguments. */
function rememberLimiter(limiter, clockArgs, sameLimitsForEveryKey) {
  const readWallMs = wallReaderOf(clockArgs)
  // Limiters on the system clocks share one frozen record: no object and closure per limiter.
  const record = readWallMs === Date.now
    ? SYSTEM_CLOCK_FACTS[sameLimitsForEveryKey ? 1 : 0]
    : Object.freeze({ readWallMs, sameLimitsForEveryKey })
  facts.set(limiter, record)
}

/** Whether a limiter constructor of this package made `value` (a Proxy of one, or Object.create of the prototype, is not). */
function isLimiter(value) {
  return facts.has(value)
}

/** `{ readWallMs, sameLimitsForEveryKey }`; for a limiter made elsewhere, Date.now and false. */
function limiterFacts(limiter) {
  return facts.get(limiter) ?? UNKNOWN
}

const closed = new WeakSet()

/** Called by a limiter's close() when the limiter is closed for good (a zone limiter's). */
function rememberClosed(limiter) {
  closed.add(limiter)
}

/** Whether `limiter` was closed for good (its stats() answers the counters it had). */
function isClosed(limiter) {
  return closed.has(limiter)
}

// How many times a limiter's limits were changed while running (setLimits, refreshPolicy; see
// docs/keyed.md, "Changing a plan"): the HTTP middleware reads the limits in force again when it moved.
const limitChanges = new WeakMap()

/** Called when `limiter`'s limits change (or may, at a key's next call). */
function rememberLimitsChanged(limiter) {
  limitChanges.set(limiter, (limitChanges.get(limiter) ?? 0) + 1)
}

/** How many times `limiter`'s limits were changed (0: never). */
function limitsGeneration(limiter) {
  return limitChanges.get(limiter) ?? 0
}

// How many times a KeyedQuotaClock's `policy` was asked for a key (a new key, or a held key's
// refresh: policyTtlMs, or a mark another limiter of its zone made): the HTTP middleware reads the
// key's limits again when it moved. At most MAX_ASKED keys a limiter; a key let go of reads as 0,
// which only makes the middleware read its limits once more.
const policyAsks = new WeakMap()
const MAX_ASKED = 10_000

/** Called when `limiter`'s `policy` is asked for `key`. */
function rememberPolicyAsked(limiter, key) {
  let asked = policyAsks.get(limiter)
  if (asked === undefined) policyAsks.set(limiter, (asked = new Map()))
  const count = (asked.get(key) ?? 0) + 1
  asked.delete(key) // (re-inserted last: the key asked least recently goes first when full)
  if (asked.size >= MAX_ASKED) asked.delete(asked.keys().next().value)
  asked.set(key, count)
}

/** How many times `limiter`'s `policy` was asked for `key`, as remembered (0: not, or let go of). */
function policyAskedCount(limiter, key) {
  return policyAsks.get(limiter)?.get(key) ?? 0
}

module.exports = { rememberLimiter, rememberClosed, isClosed, isLimiter, limiterFacts, rememberLimitsChanged, limitsGeneration, rememberPolicyAsked, policyAskedCount }
