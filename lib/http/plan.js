'use strict'
// rateLimit's plan of a request: what each entry's callbacks answer (its key, its cost), checked,
// before any limit is taken; a callback that throws or rejects fails the request with nothing
// taken. The decision (./decide.js) takes the limits; ./respond.js answers.

const { isNativeError } = require('node:util').types
const { QuotaClockError } = require('../native/errors.js')
const { coded, describe, thrownText, MAX_KEY_UNITS } = require('../common/validate.js')

function isThenable(value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function'
}

function isError(value) {
  return value instanceof Error || isNativeError(value)
}

/**
 * What a user's callback threw or rejected with, as the error of the request: the user's own Error
 * as it is, anything else (null, false, 0, '', undefined, a string) wrapped in ERR_CALLBACK so that
 * it can never read as "no error" (`next(null)` lets the route run).
 */
function callbackError(thrown, callback, entry) {
  if (isError(thrown)) return thrown
  const where = entry === undefined ? '' : ` of ${entry.label}`
  return new QuotaClockError('ERR_CALLBACK', `rateLimit: ${callback}${where} threw ${describeThrown(thrown)} (not an Error); the request was not let through`, { cause: thrown })
}

function describeThrown(thrown) {
  if (typeof thrown === 'string') return JSON.stringify(thrownText(thrown))
  if (thrown === null || typeof thrown !== 'object') return describe(thrown)
  return `${describe(thrown)} (${thrownText(thrown)})`
}

/** A key that `key(req)` returned: a string of 1 to 256 UTF-16 code units, else an error naming the entry. */
function invalidKey(key, entry) {
  const expected = entry.isThrottle ? 'a non-empty string' : 'a string of 1 to 256 UTF-16 code units'
  const received = typeof key === 'string' ? `a string of ${key.length}` : describe(key)
  return coded(typeof key === 'string' ? RangeError : TypeError, 'ERR_INVALID_ARG', `rateLimit: key(req) of ${entry.label} must return ${expected} (or a promise of one); it returned ${received}`)
}

function checkKey(key, entry) {
  if (typeof key !== 'string' || key.length === 0 || (key.length > MAX_KEY_UNITS && !entry.isThrottle)) throw invalidKey(key, entry)
  return key
}

function checkCost(n, entry) {
  if (typeof n !== 'number') {
    throw coded(TypeError, 'ERR_INVALID_ARG', `rateLimit: cost(req) of ${entry.label} must return a positive safe integer (or a promise of one); it returned ${describe(n)}`)
  }
  return n
}

/**
 * Every entry's key and cost, asked before any limit is: a callback that throws or rejects then
 * fails the request with nothing consumed. Returns the request's `asked` record, or a promise of
 * it when a callback answered with a promise; throws a callback's error.
 */
function askCallbacks(entries, req) {
  const keys = new Array(entries.length)
  const costs = new Array(entries.length)
  let pending
  // One callback's answer for entry i, into keys or costs: checked now, or once its promise
  // settles (an answer of the expected type is never taken for a thenable).
  const ask = (i, into, callback, entry, answerType, check) => {
    let value
    let thenable
    try {
      value = into === keys ? entry.key(req) : entry.cost(req)
      thenable = typeof value !== answerType && isThenable(value)
    } catch (err) {
      throw callbackError(err, callback, entry)
    }
    if (!thenable) {
      into[i] = check(value, entry)
      return
    }
    const settled = Promise.resolve(value).then(
      (answer) => (into[i] = check(answer, entry)),
      (err) => {
        throw callbackError(err, callback, entry)
      },
    )
    ;(pending ??= []).push(settled)
  }
  try {
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]
      if (entry.key !== undefined) ask(i, keys, 'key(req)', entry, 'string', checkKey)
      if (entry.cost === undefined) costs[i] = 1
      else ask(i, costs, 'cost(req)', entry, 'number', checkCost)
    }
  } catch (err) {
    // Promises already asked for are settled quietly: this request has failed.
    if (pending !== undefined) for (const p of pending) p.then(undefined, () => {})
    throw err
  }
  if (pending === undefined) return { keys, costs }
  return Promise.all(pending).then(() => ({ keys, costs }))
}

module.exports = { MAX_KEY_UNITS, isThenable, isError, callbackError, invalidKey, checkKey, checkCost, askCallbacks }
