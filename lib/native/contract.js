'use strict'
// The JS↔native contract, defined once in Rust and read here at load (`contract()`): error codes
// and the class each is thrown as (src/error.rs, src/napi/names.rs), the string unions' values
// (each enum's list in the core), MAX_WALL_MS (src/calendar/) and the layout of the result
// buffers: positions, statuses, operations (src/napi/buffer.rs). The JS face copies none of them.

const native = require('./native.js')

const CONTRACT = native.contract()

const codesOfClass = (name) => new Set(CONTRACT.errorCodes.filter((entry) => entry.class === name).map((entry) => entry.code))

/** "one of 'a', 'b', 'c'", for messages. */
const oneOf = (values) => `one of ${values.map((value) => `'${value}'`).join(', ')}`

const LAYOUT = CONTRACT.resultBuffer

// A decision's retryAfterBasis by its code in the result buffer.
const BASIS = []
BASIS[LAYOUT.basisNone] = null
for (const { name, code } of CONTRACT.retryAfterBasis) BASIS[code] = name

module.exports = {
  CONTRACT,
  CLOCK_ERROR_CODES: codesOfClass('QuotaClockError'),
  RANGE_ERROR_CODES: codesOfClass('RangeError'),
  TYPE_ERROR_CODES: codesOfClass('TypeError'),
  SUSPEND_POLICIES: CONTRACT.suspendPolicies,
  PERIOD_UNITS: CONTRACT.periodUnits,
  MAX_WALL_MS: CONTRACT.maxWallMs,
  /** Positions, statuses and operations of the result buffers, and their length. */
  LAYOUT,
  AT: LAYOUT.positions,
  STATUS: LAYOUT.status,
  OPERATION: LAYOUT.operation,
  BASIS,
  oneOf,
}
