'use strict'
// The option checks redisStore() and mongoStore() share: messages name the function and the option.

const { coded, describe, isPlainObject, readOptions } = require('../common/validate.js')

const LONE_SURROGATE = /\p{Cs}/u

function invalid(ErrorClass, message, options) {
  return coded(ErrorClass, 'ERR_INVALID_OPTION', message, options)
}

/** The own options of `options` (undefined: none), unknown ones refused, the message naming `fn`. */
function readStoreOptions(fn, options, known) {
  if (options === undefined) return Object.create(null)
  if (!isPlainObject(options)) {
    throw invalid(TypeError, `${fn}: options must be an object { ${known.join(', ')} } or undefined; received ${describe(options)}`)
  }
  try {
    return readOptions(options, known)
  } catch (error) {
    throw invalid(TypeError, `${fn}: ${error.message}`, error.cause === undefined ? undefined : { cause: error.cause })
  }
}

/** A string option of minLength..maxLength UTF-16 code units, well-formed Unicode. */
function checkText(fn, name, value, { minLength, maxLength, what }) {
  if (typeof value !== 'string') throw invalid(TypeError, `${fn}: ${name} must be ${what}; received ${describe(value)}`)
  if (value.length < minLength || value.length > maxLength || LONE_SURROGATE.test(value)) {
    throw invalid(RangeError, `${fn}: ${name} must be ${what}; received ${describe(value)}`)
  }
  return value
}

module.exports = { invalid, readStoreOptions, checkText }
