'use strict'
// This module instance's native registry of QuotaClocks and the result buffer they share: the
// native tryConsume reads `n` and the limiter's registry index from it and writes the decision
// into it, and this file builds the object (cheaper than a napi-built object). A module loaded
// again (by a test runner, say) gets its own registry; it lives as long as its functions do.
//
// The buffer's layout is the contract's (lib/contract.js): in, `n` and the limiter (and the
// readings of a JS clock); out, the status, then the decision (or, status needsReader, the
// readings a call took before it stopped for the JS elapsed-realtime reader).

const native = require('./native.js')
const { LAYOUT, AT, STATUS, BASIS } = require('./contract.js')

const RESULT = new Float64Array(LAYOUT.length)
// The limiter's index is written as an integer through this view, so the native side reads it without converting.
const LIMITER_INDEX = new Uint32Array(RESULT.buffer, AT.limiter * Float64Array.BYTES_PER_ELEMENT, 1)
// `consume` is tryConsume for natively read clocks; `consumeSupplied` the same for readings taken
// in JS (a JS clock's, or those of a call resumed after a JS reader).
const { id: REGISTRY, consume, consumeSupplied } = native.createRegistry(RESULT)

// The positions and the status the hot path reads, as plain numbers.
const N_OR_STATUS = AT.nOrStatus
const DECIDED = STATUS.decided

const NO_ANOMALIES = Object.freeze([])

/** Writes a call's input for consumeSupplied. */
function supply(index, n, monotonicMs, wallMs, elapsedRealtimeMs) {
  RESULT[N_OR_STATUS] = n
  LIMITER_INDEX[0] = index
  RESULT[AT.monotonicMs] = monotonicMs
  RESULT[AT.wallMs] = wallMs
  RESULT[AT.elapsedRealtimeMs] = elapsedRealtimeMs === undefined ? NaN : elapsedRealtimeMs
  RESULT[AT.hasElapsedRealtime] = elapsedRealtimeMs === undefined ? 0 : 1
}

const ALLOWED = AT.allowed
const RETRY_AFTER_MS = AT.retryAfterMs
const BASIS_AT = AT.basis
const TOKENS = AT.tokens
const QUOTA_REMAINING = AT.quotaRemaining

/** The decision the native tryConsume just wrote into RESULT. */
function readDecision(hasQuota, anomalies) {
  return {
    allowed: RESULT[ALLOWED] === 1,
    retryAfterMs: RESULT[RETRY_AFTER_MS],
    retryAfterBasis: BASIS[RESULT[BASIS_AT]],
    tokens: RESULT[TOKENS],
    quotaRemaining: hasQuota ? RESULT[QUOTA_REMAINING] : null,
    anomalies,
  }
}

module.exports = { RESULT, LIMITER_INDEX, REGISTRY, consume, consumeSupplied, N_OR_STATUS, DECIDED, NO_ANOMALIES, supply, readDecision }
