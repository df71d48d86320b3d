'use strict'
// quota-clock-source: a rate limiter with a Rust core that keeps the monotonic and the wall clock
// apart. This file only gathers the public API; each part lives in lib/ by concern:
//   lib/native.js       the native addon (and what to do when no binary fits this platform)
//   lib/validate.js     coded type errors and option objects read once
//   lib/errors.js       QuotaClockError and the mapping of native error codes
//   lib/clocks.js       clock sources, and how a limiter reads the clock it is given
//   lib/calendar.js     period specs and periodFor
//   lib/options.js      a limiter's options
//   lib/registry.js     the native registry and the result buffer its limiters share
//   lib/native-call.js  a limiter's call to the native side and back: the decision, what the
//                       native side needs first (the one resume path), the failure path
//   lib/limiter-facts.js what the HTTP middleware needs to know about a limiter
//   lib/did-you-mean.js the one suggestion rule for unknown names (options, middleware, CLI)
//   lib/cli.js          what the command-line tool (bin/) uses besides this entry
//   lib/anomalies.js    onAnomaly delivery
//   lib/quota-clock.js  QuotaClock
//   lib/keyed.js        KeyedQuotaClock
//   lib/throttle/       createThrottle and memoryDb (shared limits in MongoDB)

const { QuotaClock } = require('./lib/quota-clock.js')
const { KeyedQuotaClock } = require('./lib/keyed.js')
const { QuotaClockError } = require('./lib/errors.js')
const { systemClock, hostElapsedRealtime, procUptimeElapsedRealtime, manualClock } = require('./lib/clocks.js')
const { periodFor } = require('./lib/calendar.js')
const { createThrottle, memoryDb } = require('./lib/throttle/index.js')

module.exports = {
  QuotaClock,
  QuotaClockError,
  KeyedQuotaClock,
  systemClock,
  hostElapsedRealtime,
  procUptimeElapsedRealtime,
  manualClock,
  periodFor,
  createThrottle,
  memoryDb,
}
