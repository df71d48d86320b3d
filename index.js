'use strict'
// quota-clock-source: a rate limiter with a Rust core that keeps the monotonic and the wall clock
// apart. This file only gathers the public API; each part lives in a folder of lib/ by concern:
//   lib/common/    what every layer uses: coded errors and option objects read once
//                  (validate.js), the one suggestion rule for unknown names (did-you-mean.js),
//                  bounding a call in time (timeout.js), the outage warning (outage.js)
//   lib/native/    the native addon (native.js, and what to do when no binary fits this platform),
//                  its contract, QuotaClockError and the mapping of native error codes (errors.js),
//                  the registry and the result buffer its limiters share, stats() read back
//   lib/time/      clock sources (clocks.js), period specs and periodFor (calendar.js), onAnomaly
//                  delivery (anomalies.js)
//   lib/limiter/   QuotaClock (quota-clock.js), a limiter's options, a limiter's call to the native
//                  side and back (native-call.js: the decision, the one resume path, the failure
//                  path), what the HTTP middleware needs to know about a limiter
//   lib/share/     what a shared KeyedQuotaClock's store calls are made of
//   lib/keyed/     KeyedQuotaClock (keyed.js), its key policies and its backends (the in-process
//                  table, a zone, a shared table)
//   lib/throttle/  createThrottle and memoryDb (shared limits in MongoDB)
// The subpaths' folders (lib/http/, lib/stores/, lib/metrics/) and what the command-line tool
// uses besides this entry (lib/cli/) sit on top of these.

const { QuotaClock } = require('./lib/limiter/quota-clock.js')
const { KeyedQuotaClock } = require('./lib/keyed/keyed.js')
const { QuotaClockError } = require('./lib/native/errors.js')
const { systemClock, hostElapsedRealtime, procUptimeElapsedRealtime, manualClock } = require('./lib/time/clocks.js')
const { periodFor } = require('./lib/time/calendar.js')
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
