'use strict'
// The error classes callers see: a coded error from the native side becomes a QuotaClockError
// (clock trouble), a RangeError (a value out of range), a TypeError or an Error with its code,
// as the contract's table of codes says (every code is one of src/error.rs's ErrorCode).

const { CLOCK_ERROR_CODES, RANGE_ERROR_CODES, TYPE_ERROR_CODES } = require('./contract.js')
const { coded } = require('../common/validate.js')
const { didYouMeanTimeZone } = require('../common/did-you-mean.js')

// How the Rust calendar's ERR_UNKNOWN_TIME_ZONE message quotes the name it received.
const RECEIVED_ZONE = /received '((?:[^'\\]|\\.)*)', which is not a known time zone$/

class QuotaClockError extends Error {
  constructor(code, message, options) {
    super(message, options)
    this.name = 'QuotaClockError'
    this.code = code
  }
}

/** Turns a coded error from the native side into the class its code is thrown as (lib/native/contract.js). */
function toPublicError({ code, message }) {
  if (code === 'ERR_UNKNOWN_TIME_ZONE') message = withZoneSuggestion(message)
  if (CLOCK_ERROR_CODES.has(code)) return new QuotaClockError(code, message)
  if (RANGE_ERROR_CODES.has(code)) return coded(RangeError, code, message)
  if (TYPE_ERROR_CODES.has(code)) return coded(TypeError, code, message)
  return coded(Error, code || 'ERR_INTERNAL', message)
}

/** The calendar's unknown-time-zone message, with a did-you-mean when a known name is near. */
function withZoneSuggestion(message) {
  const received = RECEIVED_ZONE.exec(message)
  // (A name with quotes or escapes in it is no typo of a zone name.)
  if (received === null || received[1].includes('\\')) return message
  return message + didYouMeanTimeZone(received[1])
}

/** Runs a native call; a coded error it throws comes out as the public class. */
function callNative(body) {
  try {
    return body()
  } catch (error) {
    throw error && typeof error.code === 'string' ? toPublicError(error) : error
  }
}

/** A process warning; never throws (not even if emitWarning was replaced by one that does). */
function warn(message, code) {
  try {
    process.emitWarning(message, { code })
  } catch {
    // Nowhere left to report it.
  }
}

/** An error that is a bug in this package, never the caller's. */
function internalError(what) {
  return coded(Error, 'ERR_INTERNAL', `quota-clock-source internal error (please report it): ${what}`)
}

module.exports = { QuotaClockError, toPublicError, callNative, warn, internalError }
