'use strict'
// Shared by the JS face and the throttle: coded errors whose messages name what was received.

function coded(ErrorClass, code, message) {
  const error = new ErrorClass(message)
  error.code = code
  return error
}

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value)
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value)
    case 'undefined':
      return 'undefined'
    case 'function':
      return 'a function'
    case 'symbol':
      return 'a symbol'
    default:
      return 'an object'
  }
}

function isPlainObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Refuses keys that are not options (a key whose value is undefined counts as absent). */
function refuseUnknownKeys(object, known, path, code = 'ERR_INVALID_OPTION') {
  for (const key of Object.keys(object)) {
    if (object[key] === undefined || known.includes(key)) continue
    const near = known.find((name) => name.toLowerCase() === key.toLowerCase())
    const hint = near ? ` (did you mean '${near}'?)` : ''
    const where = path ? `${path}.${key}` : key
    throw coded(
      TypeError,
      code,
      `unknown option '${where}'${hint}; expected one of ${known.map((name) => `'${name}'`).join(', ')}; received ${describe(object[key])}`,
    )
  }
}

module.exports = { coded, describe, isPlainObject, refuseUnknownKeys }
