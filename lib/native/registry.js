'use strict'
// This module instance's native registry of QuotaClocks and the result buffer they share: the
// native tryConsume reads `n` and the limiter's registry index from it and writes the decision (or
// what it needs first) into it; lib/limiter/native-call.js reads it back. A module loaded again (by
// a test runner, say) gets its own registry; it lives as long as its functions do.
//
// The buffer's layout is the contract's (lib/native/contract.js): in, `n` and the limiter (and
// readings taken in JS); out, the status, then the decision (or, status needsReader, the readings a
// call took before it stopped for the JS elapsed-realtime reader).

const native = require('./native.js')
const { LAYOUT, AT } = require('./contract.js')

const RESULT = new Float64Array(LAYOUT.length)
// The limiter's index is written as an integer through this view, so the native side reads it without converting.
const LIMITER_INDEX = new Uint32Array(RESULT.buffer, AT.limiter * Float64Array.BYTES_PER_ELEMENT, 1)
// `consume` is tryConsume for natively read clocks; `consumeSupplied` the same for readings taken
// in JS (a JS clock's, or those of a call resumed after a JS reader).
const { id: REGISTRY, consume, consumeSupplied } = native.createRegistry(RESULT)

module.exports = { RESULT, LIMITER_INDEX, REGISTRY, consume, consumeSupplied }
