'use strict'
// The decision of rateLimit, written once for every framework: which limits a request takes, the
// all-or-nothing refund, the RateLimit headers, the 429 / 503 answers and what goes to the error
// path. A framework adapter (./middleware.js for Express/Connect and node:http, ../fastify.js for
// Fastify) supplies `io`, the four things that differ between frameworks:
//
//   io.setHeader(res, name, value)        a response header (res: the framework's response object)
//   io.sendProblem(res, status, problem)  an RFC 9457 problem response (429, 503)
//   io.pass(next)                         the request goes on (next: the framework's continuation)
//   io.fail(err, res, next)               an error of this request (always an Error with a code
//                                         when it is the package's, or the user's own Error)
//
// A request whose callbacks answer synchronously and whose limits are all in-process limiters is
// decided without awaiting anything (the handler returns undefined); otherwise the handler returns a
// promise that settles once the request was answered or passed on. It never rejects.

const { isNativeError } = require('node:util').types
const { QuotaClockError } = require('../errors.js')
const { coded, describe, thrownText } = require('../validate.js')
const { describeLimiter, describeThrottle, limitItems, quotaReset, recordFor, setRateLimitHeaders, statusOf } = require('./headers.js')
const { parseOptions, THROTTLE_LIMITS } = require('./options.js')
const { quotaExceededProblem } = require('./responses.js')
const { giveBack, periodTaken } = require('./give-back.js')
const { consumeKeyedTaken } = require('../keyed.js')
const { withTimeout } = require('../timeout.js')

const MAX_KEY_UNITS = 256

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

function throttleUnavailable(entry, err) {
  entry.outage.failed(() => {
    const reason = err.code === 'ERR_THROTTLE_TIMEOUT' ? err.message : `it failed: ${err.message}`
    return `rateLimit: the throttle store is unavailable (${reason}); requests ${entry.failOpen ? 'pass unchecked (failOpen)' : 'are answered 503'} until it answers again`
  })
}

/** throttle.check within entry.timeoutMs; a late answer is ignored. */
function checkWithin(entry, key) {
  let pending
  try {
    pending = Promise.resolve(entry.throttle.check(key, entry.limits))
  } catch (err) {
    pending = Promise.reject(err)
  }
  return withTimeout(pending, entry.timeoutMs, () => {
    throw coded(Error, 'ERR_THROTTLE_TIMEOUT', `the throttle store did not answer within ${entry.timeoutMs} ms`)
  })
}

// Argument and clock errors are the caller's to see (the error path); a store answer that makes no
// sense is answered 503 even with failOpen (it is never an allowance); anything else a throttle
// rejects with means its store did not serve the check.
function isCallerError(err) {
  return err.code === 'ERR_INVALID_ARG' || err.code === 'ERR_CLOCK_READING'
}

/** A throttle's rejection as an Error with a code (a store may reject with anything). */
function throttleError(err) {
  if (isError(err) && typeof err.code === 'string') return err
  return new QuotaClockError('ERR_STORE_UNAVAILABLE', `rateLimit: the throttle store failed: ${thrownText(err)}`, { cause: err })
}

/** The items of `entry` that denied `decision` for a request of `n`. */
function violatedBy(entry, record, decision, n) {
  const names = []
  if (decision.tokens < n) names.push(entry.items.plain.burst)
  if (record !== undefined && record.unit !== undefined && decision.quotaRemaining !== null && decision.quotaRemaining < n) {
    names.push(entry.items.plain[record.unit])
  }
  if (names.length === 0) names.push(entry.items.plain[decision.retryAfterBasis === 'wall-period' && record?.unit ? record.unit : 'burst'])
  return names
}

const SERVICE_UNAVAILABLE = (why) => ({
  type: 'about:blank',
  title: 'Service Unavailable',
  status: 503,
  detail: `The rate limit store could not be reached (${why}), so the request was not served.`,
})
// A store outage's 503 says when to come back: the store may answer again at any moment.
const UNAVAILABLE_RETRY_AFTER_S = '1'

/** Makes the framework-neutral handler `(req, res, next) => undefined | Promise<void>`. */
function createDecider(options, io) {
  const { entries, headers, skip, onLimited } = parseOptions(options)
  const syncEntries = entries.filter((e) => !e.isThrottle && !e.shared)
  // Shared KeyedQuotaClocks (`share`): awaited after the in-process limits, before the throttles.
  const sharedEntries = entries.filter((e) => e.shared)
  const throttleEntries = entries.filter((e) => e.isThrottle)
  entries.forEach((entry, i) => (entry.index = i))
  // One limiter entry, in-process or shared (`share`): the fast path of the usual one-limit middleware.
  const single = entries.length === 1 && !entries[0].isThrottle ? entries[0] : undefined

  /** Gives back what the first `count` limiter entries took for this request (no clock is read). */
  function refundTaken(taken, count) {
    for (let i = 0; i < count; i++) {
      const { entry, key, n, period } = taken[i]
      giveBack(entry, key, n, period)
    }
  }

  function refundQuietly(taken, count) {
    try {
      refundTaken(taken, count)
    } catch {
      // The request fails anyway; the limiter reports its own error on its next call.
    }
  }

  function goOn(next) {
    io.pass(next)
    return undefined
  }

  function fail(err, res, next) {
    io.fail(err, res, next)
    return undefined
  }

  function limited(req, res, next, decision, violated, reset) {
    io.setHeader(res, 'Retry-After', String(Math.ceil(decision.retryAfterMs / 1000)))
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

  /** Runs the rest of the request once `pending` (a callback's promise) settles. */
  function after(pending, callback, entry, res, next, resume) {
    return Promise.resolve(pending).then(resume, (err) => fail(callbackError(err, callback, entry), res, next))
  }

  /** Asks skip(req) (sync or a promise): passes the request on if it says so, else runs `limit`. */
  function unlessSkipped(req, res, next, limit) {
    let skipThis
    try {
      skipThis = skip(req)
      if (isThenable(skipThis)) return after(skipThis, 'skip(req)', undefined, res, next, (value) => (value ? goOn(next) : limit(req, res, next)))
    } catch (err) {
      return fail(callbackError(err, 'skip(req)'), res, next)
    }
    if (skipThis) return goOn(next) // outside the try: a throw from later handlers is not the limiter's
    return limit(req, res, next)
  }

  // ---- One limiter entry: the fast path of the usual one-limit middleware ----

  function singleLimit(req, res, next) {
    if (skip === undefined) return singleKey(req, res, next)
    return unlessSkipped(req, res, next, singleKey)
  }

  function singleKey(req, res, next) {
    const entry = single
    if (!entry.keyed) return singleCost(req, res, next, undefined)
    let key
    try {
      key = entry.key(req)
      if (typeof key !== 'string') {
        if (isThenable(key)) return after(key, 'key(req)', entry, res, next, (value) => singleChecked(req, res, next, value))
        throw invalidKey(key, entry)
      }
    } catch (err) {
      return fail(callbackError(err, 'key(req)', entry), res, next)
    }
    if (key.length === 0 || key.length > MAX_KEY_UNITS) return fail(invalidKey(key, entry), res, next)
    return singleCost(req, res, next, key)
  }

  function singleChecked(req, res, next, key) {
    try {
      checkKey(key, single)
    } catch (err) {
      return fail(err, res, next)
    }
    return singleCost(req, res, next, key)
  }

  function singleCost(req, res, next, key) {
    const entry = single
    if (entry.cost === undefined) return singleDecide(req, res, next, key, 1)
    let n
    try {
      n = entry.cost(req)
      if (typeof n !== 'number') {
        if (isThenable(n)) {
          return after(n, 'cost(req)', entry, res, next, (value) => {
            try {
              checkCost(value, entry)
            } catch (err) {
              return fail(err, res, next)
            }
            return singleDecide(req, res, next, key, value)
          })
        }
        checkCost(n, entry)
      }
    } catch (err) {
      return fail(callbackError(err, 'cost(req)', entry), res, next)
    }
    return singleDecide(req, res, next, key, n)
  }

  function singleDecide(req, res, next, key, n) {
    const entry = single
    if (entry.shared) return singleShared(req, res, next, key, n)
    let decision
    try {
      decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
      if (headers || !decision.allowed) {
        const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
        if (headers) {
          io.setHeader(res, 'RateLimit-Policy', record.policy)
          io.setHeader(res, 'RateLimit', limitItems(entry, record, decision.tokens, decision.quotaRemaining))
        }
        if (!decision.allowed) return limited(req, res, next, decision, violatedBy(entry, record, decision, n), quotaReset(record, decision))
      }
    } catch (err) {
      // (No limiter call since the decision wrote its period: status() does not.)
      if (decision !== undefined && decision.allowed) refundQuietly([{ entry, key, n, period: periodTaken(entry) }], 1)
      return fail(err, res, next)
    }
    return goOn(next)
  }

  /** A lone shared entry: its consume awaited as sharedLimit does for several, without their bookkeeping. */
  function singleShared(req, res, next, key, n) {
    const taken = []
    const out = headers ? newOut() : undefined
    return sharedLimit(req, res, next, single, [key], [n], taken, out, nothingTakenBefore).then(
      (answered) => {
        if (answered) return
        if (headers) setRateLimitHeaders(io, res, out)
        goOn(next)
      },
      (err) => {
        refundQuietly(taken, taken.length)
        fail(isError(err) ? err : throttleError(err), res, next)
      },
    )
  }

  // ---- Several entries ----

  /**
   * Every entry's key and cost, asked before any limit is: a callback that throws or rejects then
   * fails the request with nothing consumed. Returns the request's `asked` record, or a promise of
   * it when a callback answered with a promise; throws a callback's error.
   */
  function askCallbacks(req) {
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

  function severalLimits(req, res, next) {
    if (skip === undefined) return severalAsked(req, res, next)
    return unlessSkipped(req, res, next, severalAsked)
  }

  function severalAsked(req, res, next) {
    let asked
    try {
      asked = askCallbacks(req)
    } catch (err) {
      return fail(err, res, next)
    }
    if (isThenable(asked)) return asked.then((value) => severalDecide(req, res, next, value), (err) => fail(err, res, next))
    return severalDecide(req, res, next, asked)
  }

  const newOut = () => ({ policy: new Array(entries.length).fill(''), limit: new Array(entries.length).fill('') })
  const nothingTakenBefore = () => {}
  // Without entries to await, the headers of an allowed request are built as the limits are checked.
  const awaited = sharedEntries.length + throttleEntries.length > 0
  const buildAsChecked = headers && !awaited

  function severalDecide(req, res, next, { keys, costs }) {
    const taken = []
    let allowedCount = 0
    let policyHeader = ''
    let limitHeader = ''
    try {
      for (let s = 0; s < syncEntries.length; s++) {
        const entry = syncEntries[s]
        const key = keys[entry.index]
        const n = costs[entry.index]
        const decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
        taken.push({ entry, key, n, decision, period: periodTaken(entry) })
        if (decision.allowed) {
          allowedCount++
          if (buildAsChecked) {
            const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
            const separator = s === 0 ? '' : ', '
            policyHeader += separator + record.policy
            limitHeader += separator + limitItems(entry, record, decision.tokens, decision.quotaRemaining)
          }
          continue
        }
        // A denial refunds what the earlier limits took; the later ones are reported from status.
        allowedCount = 0 // refunded here, whether or not every refund succeeds
        refundTaken(taken, s)
        const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
        const violated = violatedBy(entry, record, decision, n)
        if (headers) {
          const out = newOut()
          for (let e = 0; e < s; e++) {
            const { entry: earlier, key: earlierKey, n: earlierN, decision: d } = taken[e]
            describeLimiter(earlier, earlierKey, d.tokens, d.quotaRemaining, out, earlier.index, earlierN)
          }
          describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
          for (let later = s + 1; later < syncEntries.length; later++) {
            const laterEntry = syncEntries[later]
            const laterKey = keys[laterEntry.index]
            const status = statusOf(laterEntry, laterKey)
            describeLimiter(laterEntry, laterKey, status.tokens, status.quotaRemaining, out, laterEntry.index)
          }
          setRateLimitHeaders(io, res, out)
        }
        return limited(req, res, next, decision, violated, quotaReset(record, decision))
      }
      if (buildAsChecked) {
        io.setHeader(res, 'RateLimit-Policy', policyHeader)
        io.setHeader(res, 'RateLimit', limitHeader)
      }
    } catch (err) {
      refundQuietly(taken, allowedCount)
      return fail(err, res, next)
    }
    if (awaited) {
      let out
      if (headers) {
        out = newOut()
        try {
          for (const { entry, key, decision } of taken) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
        } catch (err) {
          refundQuietly(taken, taken.length)
          return fail(err, res, next)
        }
      }
      return throttled(req, res, next, taken, keys, out, costs)
    }
    return goOn(next)
  }

  /**
   * A shared limiter entry, after every in-process limit allowed the request: true when the
   * request was answered here (a denial, or 503 when the store is unavailable).
   */
  async function sharedLimit(req, res, next, entry, keys, costs, taken, out, refundAll) {
    const key = keys[entry.index]
    const n = costs[entry.index]
    let decision
    let period
    try {
      ;({ decision, period } = await consumeKeyedTaken(entry.limiter, key, n))
    } catch (err) {
      if (!(isError(err) && err.code === 'ERR_STORE_UNAVAILABLE')) throw err
      refundAll()
      if (headers) setRateLimitHeaders(io, res, out)
      io.setHeader(res, 'Retry-After', UNAVAILABLE_RETRY_AFTER_S)
      io.sendProblem(res, 503, {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'The shared quota store could not be reached in time, so the request was not served.',
      })
      return true
    }
    if (decision.allowed) {
      taken.push({ entry, key, n, decision, period })
      if (headers) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
      return false
    }
    // Denied: what the earlier limits took goes back; later shared limits are reported from status.
    refundAll()
    const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
    const violated = violatedBy(entry, record, decision, n)
    if (headers) {
      describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
      for (const later of sharedEntries.slice(sharedEntries.indexOf(entry) + 1)) {
        const laterKey = keys[later.index]
        const status = statusOf(later, laterKey)
        describeLimiter(later, laterKey, status.tokens, status.quotaRemaining, out, later.index)
      }
      setRateLimitHeaders(io, res, out)
    }
    await limited(req, res, next, decision, violated, quotaReset(record, decision))
    return true
  }

  /** The shared limiter entries, then the throttle entries, after every in-process limit allowed the request. */
  async function throttled(req, res, next, taken, keys, out, costs) {
    let refunded = false
    const refundAll = () => {
      refunded = true // once, even if a refund throws
      refundTaken(taken, taken.length)
      if (headers) {
        for (const { entry, key, n, decision } of taken) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index, n)
      }
    }
    try {
      for (const entry of sharedEntries) {
        if (await sharedLimit(req, res, next, entry, keys, costs, taken, out, refundAll)) return
      }
      for (const entry of throttleEntries) {
        let result
        try {
          result = await checkWithin(entry, keys[entry.index])
        } catch (rejected) {
          const err = throttleError(rejected)
          if (isCallerError(err)) throw err
          const nonsense = err.code === 'ERR_STORE_RESPONSE'
          if (!nonsense) {
            throttleUnavailable(entry, err)
            if (entry.failOpen) continue
          }
          refundAll()
          if (headers) setRateLimitHeaders(io, res, out)
          const why = err.code === 'ERR_THROTTLE_TIMEOUT' ? `no answer within ${entry.timeoutMs} ms` : nonsense ? 'it answered something that is not a count' : 'it failed'
          io.setHeader(res, 'Retry-After', UNAVAILABLE_RETRY_AFTER_S)
          io.sendProblem(res, 503, SERVICE_UNAVAILABLE(why))
          return
        }
        entry.outage.answered()
        if (headers) describeThrottle(entry, result, out, entry.index)
        if (!result.allowed) {
          refundAll()
          const unit = THROTTLE_LIMITS.find((l) => l.reason === result.reason)?.unit ?? entry.windows[0]
          const window = result.windows[unit]
          const decision = {
            allowed: false,
            retryAfterMs: result.retryAfterMs,
            retryAfterBasis: 'wall-period',
            tokens: 0,
            quotaRemaining: window && typeof window.remaining === 'number' ? window.remaining : 0,
            anomalies: [],
          }
          if (headers) setRateLimitHeaders(io, res, out)
          await limited(req, res, next, decision, [entry.items.plain[unit]])
          return
        }
      }
      if (headers) setRateLimitHeaders(io, res, out)
    } catch (err) {
      if (!refunded) refundQuietly(taken, taken.length)
      fail(isError(err) ? err : throttleError(err), res, next)
      return
    }
    goOn(next)
  }

  return single !== undefined ? singleLimit : severalLimits
}

module.exports = { createDecider }
