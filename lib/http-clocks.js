'use strict'
// The wall clock each limiter reads, remembered by index.js when a limiter is made, so that the
// HTTP middleware (lib/http.js) can tell how long a quota's open period has left by the limiter's
// own clock (a manualClock in tests, any JS clock source), not by Date.now().

const wallClocks = new WeakMap()

/** Called by the limiter constructors: `readWallMs` is a function returning the wall reading. */
function rememberWallClock(limiter, readWallMs) {
  wallClocks.set(limiter, readWallMs)
}

/** The limiter's wall clock reader; Date.now for a limiter this file was not told about. */
function wallClockOf(limiter) {
  return wallClocks.get(limiter) ?? Date.now
}

module.exports = { rememberWallClock, wallClockOf }
