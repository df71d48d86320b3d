'use strict'
// How rateLimit answers a request once it is decided: it goes on, it fails (the error path), it is
// limited (its headers with Retry-After, then the 429 problem or the user's onLimited) or the store
// it needed is unavailable (the 503, written here once). Every header is ./headers.js's writeHeaders'.

const { writeHeaders } = require('./headers.js')
const { quotaExceededProblem } = require('./responses.js')
const { isThenable, callbackError } = require('./plan.js')

/** The items of `entry` that denied `decision` for a request of `n`. */
function violatedBy(entry, record, decision, n) {
  if (decision.retryAfterBasis === 'block') return [entry.items.plain.block]
  const names = []
  if (decision.tokens < n) names.push(entry.items.plain.burst)
  if (record !== undefined && record.unit !== undefined && decision.quotaRemaining !== null && decision.quotaRemaining < n) {
    names.push(entry.items.plain[record.unit])
  }
  if (names.length === 0) names.push(entry.items.plain[decision.retryAfterBasis === 'wall-period' && record?.unit ? record.unit : 'burst'])
  return names
}
// A store outage's 503 says when to come back: the store may answer again at any moment.
const UNAVAILABLE_RETRY_AFTER_MS = 1000

/**
 * The answers of one rateLimit: `io` is the framework adapter's (see ./decide.js), `headers` whether
 * the RateLimit headers are written, `onLimited` the user's callback for a denial (or undefined).
 */
function createResponder(io, headers, onLimited) {
  function goOn(next) {
    io.pass(next)
    return undefined
  }

  function fail(err, res, next) {
    io.fail(err, res, next)
    return undefined
  }

  /** A denial: the headers (`items`: the entries' RateLimit items) and Retry-After, then the 429 or onLimited. */
  function limited(req, res, next, decision, violated, reset, items) {
    writeHeaders(io, res, headers ? items : undefined, decision.retryAfterMs)
    if (onLimited === undefined) {
      io.sendProblem(res, 429, quotaExceededProblem(decision, violated, reset))
      return undefined
    }
    let returned
    try {
      returned = onLimited(req, res, { decision, violated })
      if (!isThenable(returned)) return undefined
    } catch (err) {
      return fail(callbackError(err, 'onLimited'), res, next)
    }
    return Promise.resolve(returned).then(undefined, (err) => fail(callbackError(err, 'onLimited'), res, next))
  }

  /** The 503 of a store that could not serve the request (`items`: the RateLimit items so far). */
  function unavailable(res, items, detail) {
    writeHeaders(io, res, headers ? items : undefined, UNAVAILABLE_RETRY_AFTER_MS)
    io.sendProblem(res, 503, { type: 'about:blank', title: 'Service Unavailable', status: 503, detail })
  }

  /** Runs the rest of the request once `pending` (a callback's promise) settles. */
  function after(pending, callback, entry, res, next, resume) {
    return Promise.resolve(pending).then(resume, (err) => fail(callbackError(err, callback, entry), res, next))
  }

  return { goOn, fail, limited, unavailable, after }
}

module.exports = { createResponder, violatedBy }
