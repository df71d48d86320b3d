'use strict'
// Shared by the JS face and the throttle: coded errors whose messages name what was received,
// type checks, and option objects read once, from their own properties only.

const { nearest, didYouMean } = require('./did-you-mean.js')

function coded(ErrorClass, code, message, options) {
  const error = new ErrorClass(message, options)
  error.code = code
  return error
}

function describe(value) {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'string':
      return value.length > 200 ? `${JSON.stringify(value.slice(0, 200))}... (${value.length} characters)` : JSON.stringify(value)
    case 'number':
    case 'boolean':
      return String(value)
    case 'bigint':
      return `${value}n`
    case 'undefined':
      return 'undefined'
    case 'function':
      return 'a function'
    case 'symbol':
      return 'a symbol'
    default:
      try {
        return Array.isArray(value) ? 'an array' : 'an object'
      } catch {
        return 'a revoked Proxy'
      }
  }
}

/** Best-effort text of anything thrown, kept short; never throws itself. */
function thrownText(error) {
  let text
  try {
    if (error instanceof Error) text = String(error.message)
    else text = typeof error === 'symbol' ? error.toString() : String(error)
  } catch {
    return 'a value that cannot be turned into text'
  }
  return text.length > 200 ? `${text.slice(0, 200)}... (${text.length} characters)` : text
}

/** An object that is not an array (a revoked Proxy is neither). */
function isPlainObject(value) {
  if (typeof value !== 'object' || value === null) return false
  try {
    return !Array.isArray(value)
  } catch {
    return false
  }
}

function unknownKey(known, path, key, value, code) {
  const hint = didYouMean(nearest(key, known))
  const where = path ? `${path}.${key}` : key
  return coded(TypeError, code, `unknown option '${where}'${hint}; expected one of ${known.map((name) => `'${name}'`).join(', ')}; received ${describe(value)}`)
}

/**
 * The options of `object`: its own enumerable string-keyed properties (what `{ ...object }`
 * copies), each read once, into an object with no prototype. Nothing inherited is an option (a
 * polluted Object.prototype changes nothing); unknown keys are refused (a key whose value is
 * undefined counts as absent); a getter or Proxy trap that throws is a TypeError with `code`
 * naming the option, with what it threw as `cause`.
 */
function readOptions(object, known, path, code = 'ERR_INVALID_OPTION') {
  const values = Object.create(null)
  let unknown
  let reading = path || 'options'
  try {
    for (const key of Object.keys(object)) {
      reading = path ? `${path}.${key}` : key
      const value = object[key]
      if (value === undefined) continue
      if (known.includes(key)) values[key] = value
      else if (unknown === undefined) unknown = { key, value }
    }
  } catch (error) {
    throw coded(TypeError, code, `${reading} could not be read: ${thrownText(error)}`, { cause: error })
  }
  if (unknown !== undefined) throw unknownKey(known, path, unknown.key, unknown.value, code)
  return values
}

function typeError(code, name, expected, value) {
  return coded(TypeError, code, `${name} must be ${expected}; received ${describe(value)}`)
}

function rangeError(code, name, expected, value) {
  return coded(RangeError, code, `${name} must be ${expected}; received ${describe(value)}`)
}

function checkNumber(value, name, code = 'ERR_INVALID_OPTION') {
  if (typeof value !== 'number') throw typeError(code, name, 'a number', value)
  return value
}

function checkFinite(value, name, code = 'ERR_INVALID_OPTION') {
  checkNumber(value, name, code)
  if (!Number.isFinite(value)) throw rangeError(code, name, 'a finite number', value)
  return value
}

/** An own property, or undefined (never one inherited from a polluted Object.prototype). */
function own(object, key) {
  return Object.hasOwn(object, key) ? object[key] : undefined
}

// The contract's sizes, written once: a share's name (share.name, quotaAdmin's name), a key in
// UTF-16 code units, and the longest timer delay Node accepts (about 24.8 days).
const MAX_NAME_LENGTH = 128
const MAX_KEY_UNITS = 256
const MAX_TIMER_MS = 2 ** 31 - 1

module.exports = { coded, describe, thrownText, isPlainObject, readOptions, typeError, rangeError, checkNumber, checkFinite, own, MAX_NAME_LENGTH, MAX_KEY_UNITS, MAX_TIMER_MS }
