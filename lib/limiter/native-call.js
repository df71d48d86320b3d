'use strict'
// How a limiter's call goes to the native side and comes back, written once for QuotaClock
// (lib/limiter/quota-clock.js) and KeyedQuotaClock (lib/keyed/keyed.js); see ARCHITECTURE.md for
// the round trip.
//
// A call's input and its outcome travel in a result buffer (lib/native/contract.js's layout). After
// a call the status position says how it ended: decided (the decision is in the buffer), decided
// with anomalies (take them), an error (take it; the slow entry points throw it instead), or what
// the native side needs from JS before it can decide, having read and changed nothing: a JS
// clock's readings, the JS elapsed-realtime reader's reading (resumed on the readings the call
// took), or a key's policy. `bring` is the one resume path for the readings; the caller writes
// its own input again and repeats the call with the readings supplied.

const { toPublicError, internalError } = require('../native/errors.js')
const { AT, STATUS, BASIS } = require('../native/contract.js')
const { own } = require('../common/validate.js')
const { toPeriod } = require('../time/calendar.js')

const N_OR_STATUS = AT.nOrStatus
const ALLOWED = AT.allowed
const RETRY_AFTER_MS = AT.retryAfterMs
const BASIS_AT = AT.basis
const TOKENS = AT.tokens
const QUOTA_REMAINING = AT.quotaRemaining
const MONOTONIC_MS = AT.monotonicMs
const WALL_MS = AT.wallMs
const ELAPSED_REALTIME_MS = AT.elapsedRealtimeMs
const HAS_ELAPSED_REALTIME = AT.hasElapsedRealtime
const { decided: DECIDED, decidedWithAnomalies: DECIDED_WITH_ANOMALIES, error: ERROR, needsReadings: NEEDS_READINGS, needsReader: NEEDS_READER, needsPolicy: NEEDS_POLICY } = STATUS

const NO_ANOMALIES = Object.freeze([])

/** The decision the native side just wrote into `result` (quotaRemaining NaN: no quota). */
function readDecision(result, anomalies) {
  const quotaRemaining = result[QUOTA_REMAINING]
  return {
    allowed: result[ALLOWED] === 1,
    retryAfterMs: result[RETRY_AFTER_MS],
    retryAfterBasis: BASIS[result[BASIS_AT]],
    tokens: result[TOKENS],
    // NaN is the one value not equal to itself.
    quotaRemaining: quotaRemaining === quotaRemaining ? quotaRemaining : null,
    anomalies,
  }
}

/** Writes the readings a call is to be made on (elapsedRealtimeMs undefined: none). */
function supplyReadings(result, monotonicMs, wallMs, elapsedRealtimeMs) {
  result[MONOTONIC_MS] = monotonicMs
  result[WALL_MS] = wallMs
  result[ELAPSED_REALTIME_MS] = elapsedRealtimeMs === undefined ? NaN : elapsedRealtimeMs
  result[HAS_ELAPSED_REALTIME] = elapsedRealtimeMs === undefined ? 0 : 1
}

/**
 * The resume path: takes the readings a call stopped for (`status`: a JS clock's, or the JS
 * reader's with the readings the call took) from `js` (lib/time/clocks.js's JsClock) and writes
 * them into `result`. It runs user code (a clock, a reader), which may call limiters sharing
 * `result`: the caller writes its own input (n, the limiter, the operation) after it, then calls
 * again with the readings supplied.
 */
function bring(status, result, js) {
  if (status === NEEDS_READINGS) {
    const [monotonicMs, wallMs] = js.readings()
    supplyReadings(result, monotonicMs, wallMs, undefined)
  } else if (status === NEEDS_READER) {
    // Read before the reader runs: it may call other limiters that share `result`.
    const monotonicMs = result[MONOTONIC_MS]
    const wallMs = result[WALL_MS]
    supplyReadings(result, monotonicMs, wallMs, js.elapsedRealtime())
  } else {
    throw internalError(`status ${status}`)
  }
}

// What a `final` of `resume` answers for a status that is not final (a need to answer first).
const RESUME = Symbol('resume')

/** The `policyOf` of a limiter that never needs a policy (QuotaClock). */
function noPolicy() {
  throw internalError(`status ${NEEDS_POLICY}`)
}

/**
 * The one resume loop, for every limiter kind (QuotaClock, KeyedQuotaClock, a zone): `status` is
 * what the last native call left in `result`; `final(status)` returns (or throws) the call's
 * outcome for a final status, RESUME for a need. A policy need is answered by `policyOf()` (kept
 * for the later calls), a readings need by `bring` from `js`; then `again(policy, supplied)`
 * writes the caller's input again (user code may have made calls sharing `result`), calls once
 * more and returns the new status.
 */
function resume(status, result, js, final, policyOf, again) {
  let policy
  for (;;) {
    const outcome = final(status)
    if (outcome !== RESUME) return outcome
    const supplied = status !== NEEDS_POLICY
    if (supplied) bring(status, result, js)
    else policy = policyOf()
    status = again(policy, supplied)
  }
}

/** The public error for a coded one from the native side (a monotonic regression latches a JS clock). */
function failure(js, coded) {
  const error = toPublicError(coded)
  return js === undefined ? error : js.failed(error)
}

/** Runs a native call of the slow paths; a coded error it throws comes out public (as `failure`). */
function callLimiter(js, body) {
  try {
    return body()
  } catch (error) {
    throw error && typeof error.code === 'string' ? failure(js, error) : error
  }
}

/** The public status of a native status, with the limits in force. */
function toStatus(status, capacity, refillPerSecond, quotaLimit) {
  const period = own(status, 'period')
  return {
    tokens: status.tokens,
    quotaUsed: own(status, 'quotaUsed') ?? null,
    quotaRemaining: own(status, 'quotaRemaining') ?? null,
    period: period == null ? null : toPeriod(period),
    capacity,
    refillPerSecond,
    quotaLimit: quotaLimit ?? null,
    // A key with a shared bucket (share.bucket): the store's tokens as last heard of, refilled since.
    ...(status.fleetTokens == null ? {} : { fleetTokens: status.fleetTokens }),
  }
}

module.exports = { N_OR_STATUS, DECIDED, DECIDED_WITH_ANOMALIES, ERROR, NEEDS_POLICY, NO_ANOMALIES, RESUME, readDecision, supplyReadings, bring, resume, noPolicy, failure, callLimiter, toStatus }
