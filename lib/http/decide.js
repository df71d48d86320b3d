'use strict'
// The decision of rateLimit, written once for every framework: which limits a request takes, the
// all-or-nothing refund, the RateLimit headers, the 429 / 503 answers and what goes to the error
// path. A framework adapter (./middleware.js for Express/Connect and node:http, ./fastify.js for
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

const { describeLimiter, describeRefunded, describeStatus, describeThrottle, headerItems, quotaReset, recordFor, writeHeaders } = require('./headers.js')
const { parseOptions } = require('./options.js')
const { periodTaken } = require('./give-back.js')
const { consumeKeyedTaken } = require('../keyed/keyed.js')
const { MAX_KEY_UNITS, isThenable, isError, callbackError, invalidKey, checkKey, checkCost, askCallbacks } = require('./plan.js')
const { ThrottleTimeout, refundTaken, refundQuietly, checkWithin, isCallerError, throttleError, throttleUnavailable, throttleDenial } = require('./take.js')
const { createResponder, violatedBy } = require('./respond.js')

/** Makes the framework-neutral handler `(req, res, next) => undefined | Promise<void>`. */
function createDecider(options, io) {
  const { entries, headers, skip, onLimited } = parseOptions(options)
  const { goOn, fail, limited, unavailable, after } = createResponder(io, headers, onLimited)
  const syncEntries = entries.filter((e) => !e.isThrottle && !e.shared)
  // Shared KeyedQuotaClocks (`share`): awaited after the in-process limits, before the throttles.
  const sharedEntries = entries.filter((e) => e.shared)
  const throttleEntries = entries.filter((e) => e.isThrottle)
  // One limiter entry, in-process or shared (`share`): the fast path of the usual one-limit middleware.
  const single = entries.length === 1 && !entries[0].isThrottle ? entries[0] : undefined
  // The headers of a request decided without awaiting are built and written before the next
  // request starts: its items are reused (every slot written each time), not made per request.
  const singleItems = single !== undefined && headers ? headerItems(1) : undefined

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
        const record = headers ? describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, singleItems, 0) : recordFor(entry, key, decision.tokens, decision.quotaRemaining)
        if (!decision.allowed) return limited(req, res, next, decision, violatedBy(entry, record, decision, n), quotaReset(record, decision), singleItems)
        writeHeaders(io, res, singleItems, undefined)
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
    const items = headers ? headerItems(1) : undefined
    return sharedLimit(req, res, next, single, [key], [n], taken, items, nothingTakenBefore).then(
      (answered) => {
        if (answered) return
        writeHeaders(io, res, items, undefined)
        goOn(next)
      },
      (err) => {
        refundQuietly(taken, taken.length)
        fail(isError(err) ? err : throttleError(err), res, next)
      },
    )
  }

  // ---- Several entries ----

  function severalLimits(req, res, next) {
    if (skip === undefined) return severalAsked(req, res, next)
    return unlessSkipped(req, res, next, severalAsked)
  }

  function severalAsked(req, res, next) {
    let asked
    try {
      asked = askCallbacks(entries, req)
    } catch (err) {
      return fail(err, res, next)
    }
    if (isThenable(asked)) return asked.then((value) => severalDecide(req, res, next, value), (err) => fail(err, res, next))
    return severalDecide(req, res, next, asked)
  }

  const nothingTakenBefore = () => {}
  // Without entries to await, the headers of an allowed request are built as the limits are checked.
  const awaited = sharedEntries.length + throttleEntries.length > 0
  const buildAsChecked = headers && !awaited
  const checkedItems = buildAsChecked ? headerItems(entries.length) : undefined

  /** The in-process entry `s` denied the request (`taken[s]`; the earlier ones refunded): its headers and the 429. */
  function severalDenied(req, res, next, keys, taken, s) {
    const { entry, key, n, decision } = taken[s]
    const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
    const violated = violatedBy(entry, record, decision, n)
    let items
    if (headers) {
      items = headerItems(entries.length)
      for (let e = 0; e < s; e++) {
        const { entry: earlier, key: earlierKey, n: earlierN, decision: d } = taken[e]
        describeRefunded(earlier, earlierKey, d.tokens, d.quotaRemaining, items, earlier.index, earlierN)
      }
      describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
      for (let later = s + 1; later < syncEntries.length; later++) describeStatus(syncEntries[later], keys[syncEntries[later].index], items)
    }
    return limited(req, res, next, decision, violated, quotaReset(record, decision), items)
  }

  function severalDecide(req, res, next, { keys, costs }) {
    const taken = []
    let allowedCount = 0
    try {
      for (let s = 0; s < syncEntries.length; s++) {
        const entry = syncEntries[s]
        const key = keys[entry.index]
        const n = costs[entry.index]
        const decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
        taken.push({ entry, key, n, decision, period: periodTaken(entry) })
        if (decision.allowed) {
          allowedCount++
          // (Every entry is in-process here: each allowed request writes every slot of checkedItems.)
          if (buildAsChecked) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, checkedItems, entry.index)
          continue
        }
        // A denial refunds what the earlier limits took; the later ones are reported from status.
        allowedCount = 0 // refunded here, whether or not every refund succeeds
        refundTaken(taken, s)
        return severalDenied(req, res, next, keys, taken, s)
      }
      if (buildAsChecked) writeHeaders(io, res, checkedItems, undefined)
    } catch (err) {
      refundQuietly(taken, allowedCount)
      return fail(err, res, next)
    }
    if (awaited) {
      let items
      if (headers) {
        items = headerItems(entries.length)
        try {
          for (const { entry, key, decision } of taken) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
        } catch (err) {
          refundQuietly(taken, taken.length)
          return fail(err, res, next)
        }
      }
      return throttled(req, res, next, taken, keys, items, costs)
    }
    return goOn(next)
  }

  /**
   * A shared limiter entry, after every in-process limit allowed the request: true when the
   * request was answered here (a denial, or 503 when the store is unavailable).
   */
  async function sharedLimit(req, res, next, entry, keys, costs, taken, items, refundAll) {
    const key = keys[entry.index]
    const n = costs[entry.index]
    let decision
    let period
    try {
      ;({ decision, period } = await consumeKeyedTaken(entry.limiter, key, n))
    } catch (err) {
      if (!(isError(err) && err.code === 'ERR_STORE_UNAVAILABLE')) throw err
      refundAll()
      unavailable(res, items, 'The shared quota store could not be reached in time, so the request was not served.')
      return true
    }
    if (decision.allowed) {
      taken.push({ entry, key, n, decision, period })
      if (headers) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
      return false
    }
    // Denied: what the earlier limits took goes back; later shared limits are reported from status.
    refundAll()
    const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
    const violated = violatedBy(entry, record, decision, n)
    if (headers) {
      describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
      for (const later of sharedEntries.slice(sharedEntries.indexOf(entry) + 1)) describeStatus(later, keys[later.index], items)
    }
    await limited(req, res, next, decision, violated, quotaReset(record, decision), items)
    return true
  }

  /** The shared limiter entries, then the throttle entries, after every in-process limit allowed the request. */
  async function throttled(req, res, next, taken, keys, items, costs) {
    let refunded = false
    const refundAll = () => {
      refunded = true // once, even if a refund throws
      refundTaken(taken, taken.length)
      if (headers) {
        for (const { entry, key, n, decision } of taken) describeRefunded(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index, n)
      }
    }
    try {
      for (const entry of sharedEntries) {
        if (await sharedLimit(req, res, next, entry, keys, costs, taken, items, refundAll)) return
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
          const why = err instanceof ThrottleTimeout ? `no answer within ${entry.timeoutMs} ms` : nonsense ? 'it answered something that is not a count' : 'it failed'
          unavailable(res, items, `The rate limit store could not be reached (${why}), so the request was not served.`)
          return
        }
        entry.outage.answered()
        if (headers) describeThrottle(entry, result, items, entry.index)
        if (!result.allowed) {
          refundAll()
          const { decision, violated } = throttleDenial(entry, result)
          await limited(req, res, next, decision, violated, undefined, items)
          return
        }
      }
      writeHeaders(io, res, items, undefined)
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
