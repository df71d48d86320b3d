'use strict'
// This module instance's native registry of QuotaClocks and the result buffer they share: the
// native tryConsume reads `n` and the limiter's registry index from it and writes the decision
// into it, and this file builds the object (cheaper than a napi-built object). A module loaded
// again (by a test runner, say) gets its own registry; it lives as long as its functions do.

const native = require('./binding.js')

// Positions: [0] in: n, out: status (0 decided, 1 decided with anomalies, 2 error, 3 needs the
// JS elapsed-realtime reader, 4 a JS clock: read it and call consumeSupplied), [1] allowed,
// [2] retryAfterMs, [3] basis (0 none, 1 monotonic-refill, 2 wall-period), [4] tokens,
// [5] quotaRemaining, [6] in: the limiter's registry index; [7] monotonic, [8] wall, [9] elapsed
// realtime, [10] 1 when [9] holds a reading: the readings of a JS clock (in), or (out, status 3)
// those a call took before it stopped for the JS elapsed-realtime reader.
const RESULT = new Float64Array(11)
// [6] is written as an integer through this view, so the native side reads it without converting.
const LIMITER_SLOT = new Uint32Array(RESULT.buffer, 6 * 8, 1)
// `consume` is tryConsume for natively read clocks; `consumeSupplied` the same for readings taken
// in JS (a JS clock's, or those of a call resumed after a JS reader).
const { id: REGISTRY, consume, consumeSupplied } = native.createRegistry(RESULT)

const BASIS = [null, 'monotonic-refill', 'wall-period']
const NO_ANOMALIES = Object.freeze([])

/** Writes a call's input for consumeSupplied. */
function supply(slot, n, monotonicMs, wallMs, elapsedRealtimeMs) {
  RESULT[0] = n
  LIMITER_SLOT[0] = slot
  RESULT[7] = monotonicMs
  RESULT[8] = wallMs
  RESULT[9] = elapsedRealtimeMs === undefined ? NaN : elapsedRealtimeMs
  RESULT[10] = elapsedRealtimeMs === undefined ? 0 : 1
}

/** The decision the native tryConsume just wrote into RESULT. */
function readDecision(hasQuota, anomalies) {
  return {
    allowed: RESULT[1] === 1,
    retryAfterMs: RESULT[2],
    retryAfterBasis: BASIS[RESULT[3]],
    tokens: RESULT[4],
    quotaRemaining: hasQuota ? RESULT[5] : null,
    anomalies,
  }
}

module.exports = { RESULT, LIMITER_SLOT, REGISTRY, consume, consumeSupplied, BASIS, NO_ANOMALIES, supply, readDecision }
