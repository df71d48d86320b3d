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
// and, where the framework has them, four optional ones:
//
//   io.getHeader(res, name)               a header already set (another rateLimit's list, appended to;
//                                         asked by its name in lower case)
//   io.setResult(req, result)             the decision, where the framework's handlers read it
//                                         (`{ allowed, limits: [{ name, mode, key, cost, decision }] }`)
//   io.onFinish(res, done)                calls done(finalRes?) once the response is finished (refundIf)
//   io.clientOf(req)                      what the default key reads the client address from
//
// Entries in `mode: 'shadow'` (docs/http.md) are decided and take what they admit, but their denial
// never denies the request: it is handed to onShadowLimited, and they write no header items.
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
const { thrownText } = require('../common/validate.js')

// The `taken` of a request that took nothing (a denial, or no refundIf to give it back for).
const NOTHING_TAKEN = Object.freeze([])

/** A throttle's allowance as a decision (for the request's result): its smallest window's remaining. */
function throttleAllowance(result) {
  let quotaRemaining = null
  for (const window of Object.values(result.windows ?? {})) {
    if (window && typeof window.remaining === 'number' && (quotaRemaining === null || window.remaining < quotaRemaining)) quotaRemaining = window.remaining
  }
  return { allowed: true, retryAfterMs: 0, retryAfterBasis: null, tokens: Infinity, quotaRemaining, anomalies: [] }
}

/** Makes the framework-neutral handler `(req, res, next) => undefined | Promise<void>`. */
function createDecider(options, io) {
  const { entries, headers, skip, onLimited, onShadowLimited, refundIf } = parseOptions(options, io.clientOf)
  const { goOn, fail, limited, unavailable, after } = createResponder(io, headers, onLimited)
  // The decision goes on the request (req.rateLimit, ctx.state.rateLimit, ...) where the adapter says where.
  const reports = io.setResult !== undefined
  const watchesFinish = refundIf !== undefined && io.onFinish !== undefined
  const syncEntries = entries.filter((e) => !e.isThrottle && !e.shared)
  // Shared KeyedQuotaClocks (`share`): awaited after the in-process limits, before the throttles.
  const sharedEntries = entries.filter((e) => e.shared)
  const throttleEntries = entries.filter((e) => e.isThrottle)
  // One enforced limiter entry, in-process or shared (`share`): the fast path of the usual one-limit middleware.
  const single = entries.length === 1 && !entries[0].isThrottle && !entries[0].shadow ? entries[0] : undefined
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
    let taken = NOTHING_TAKEN
    try {
      decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
      if (!decision.allowed) {
        const record = headers ? describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, singleItems, 0) : recordFor(entry, key, decision.tokens, decision.quotaRemaining)
        return denied(req, res, next, reports ? [checked(entry, key, n, decision)] : undefined, undefined, decision, violatedBy(entry, record, decision, n), quotaReset(record, decision), singleItems)
      }
      if (watchesFinish) taken = [{ entry, key, n, period: periodTaken(entry) }]
      if (headers) {
        describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, singleItems, 0)
        writeHeaders(io, res, singleItems, undefined)
      }
    } catch (err) {
      // (No limiter call since the decision wrote its period: status() does not.)
      if (decision !== undefined && decision.allowed) refundQuietly([{ entry, key, n, period: periodTaken(entry) }], 1)
      return fail(err, res, next)
    }
    return passOn(req, res, next, reports ? [checked(entry, key, n, decision)] : undefined, taken, undefined)
  }

  /** A lone shared entry: its consume awaited as sharedLimit does for several, without their bookkeeping. */
  function singleShared(req, res, next, key, n) {
    const run = { taken: [], checks: reports ? [] : undefined, shadowed: undefined }
    const items = headers ? headerItems(1) : undefined
    return sharedLimit(req, res, next, single, [key], [n], run, items, nothingTakenBefore).then(
      (answered) => {
        if (answered) return undefined
        writeHeaders(io, res, items, undefined)
        return passOn(req, res, next, run.checks, run.taken, run.shadowed)
      },
      (err) => {
        refundQuietly(run.taken, run.taken.length)
        fail(isError(err) ? err : throttleError(err), res, next)
      },
    )
  }

  // ---- How a decided request ends: on the request, the shadow denials, then on or the 429 ----

  /** What `result.limits` says of one entry's decision. */
  function checked(entry, key, n, decision) {
    return { name: entry.name, mode: entry.shadow ? 'shadow' : 'enforce', key, cost: n, decision }
  }

  /** A shadow entry's denial, as onShadowLimited is told it (onLimited's `info`). */
  function shadowDenial(entry, key, n, decision) {
    const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
    return { decision, violated: violatedBy(entry, record, decision, n) }
  }

  /** onShadowLimited for each shadow denial, then `proceed`; a throw or rejection fails the request, with `taken` given back. */
  function shadowsThen(req, res, next, shadowed, taken, proceed) {
    if (shadowed === undefined || onShadowLimited === undefined) return proceed()
    const failed = (err) => {
      refundQuietly(taken, taken.length)
      return fail(callbackError(err, 'onShadowLimited'), res, next)
    }
    let pending
    try {
      for (const info of shadowed) {
        const returned = onShadowLimited(req, info)
        if (isThenable(returned)) (pending ??= []).push(returned)
      }
    } catch (err) {
      return failed(err)
    }
    if (pending === undefined) return proceed()
    return Promise.all(pending).then(proceed, failed)
  }

  /** An allowed request: its result on the request, its shadow denials, refundIf watched, then on. */
  function passOn(req, res, next, checks, taken, shadowed) {
    if (reports) io.setResult(req, { allowed: true, limits: checks })
    // Without shadow denials (nearly every request) no continuation is made for shadowsThen.
    if (shadowed === undefined || onShadowLimited === undefined) return proceed(req, res, next, taken)
    return shadowsThen(req, res, next, shadowed, taken, () => proceed(req, res, next, taken))
  }

  /** An allowed request goes on, refundIf watching what it took. */
  function proceed(req, res, next, taken) {
    if (watchesFinish && taken.length > 0) refundWhenFinished(req, res, taken)
    return goOn(next)
  }

  /** A request an enforced entry denied (everything it took already given back): the 429 or onLimited. */
  function denied(req, res, next, checks, shadowed, decision, violated, reset, items) {
    if (reports) io.setResult(req, { allowed: false, limits: checks })
    return shadowsThen(req, res, next, shadowed, NOTHING_TAKEN, () => limited(req, res, next, decision, violated, reset, items))
  }

  let refundIfWarned = false
  /** refundIf(req, res) once the response is finished: true gives back what the request took. */
  function refundWhenFinished(req, res, taken) {
    const warn = (err) => {
      if (refundIfWarned) return
      refundIfWarned = true
      process.emitWarning(`rateLimit: refundIf(req, res) threw ${thrownText(err)}; the request's units were kept`, { code: 'QUOTA_CLOCK_REFUND_IF_FAILED' })
    }
    io.onFinish(res, (finalRes = res) => {
      let answer
      try {
        answer = refundIf(req, finalRes)
      } catch (err) {
        return warn(err)
      }
      if (!isThenable(answer)) {
        if (answer) refundQuietly(taken, taken.length)
        return undefined
      }
      return Promise.resolve(answer).then((value) => {
        if (value) refundQuietly(taken, taken.length)
      }, warn)
    })
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
  // (A shadow entry's slot stays '': it writes no items.)
  const checkedItems = buildAsChecked ? headerItems(entries.length) : undefined

  /** The in-process entry `syncEntries[s]` denied the request (`earlier`: what the entries before it took, refunded): its headers and the 429. */
  function severalDenied(req, res, next, keys, earlier, denial, s, checks, shadowed) {
    const { entry, key, n, decision } = denial
    const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
    const violated = violatedBy(entry, record, decision, n)
    let items
    if (headers) {
      items = headerItems(entries.length)
      for (const { entry: before, key: beforeKey, n: beforeN, decision: d } of earlier) {
        if (!before.shadow) describeRefunded(before, beforeKey, d.tokens, d.quotaRemaining, items, before.index, beforeN)
      }
      describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
      for (let later = s + 1; later < syncEntries.length; later++) {
        if (!syncEntries[later].shadow) describeStatus(syncEntries[later], keys[syncEntries[later].index], items)
      }
    }
    return denied(req, res, next, checks, shadowed, decision, violated, quotaReset(record, decision), items)
  }

  function severalDecide(req, res, next, { keys, costs }) {
    // What the allowing entries took (given back when an enforced one denies), in order.
    let taken = []
    let shadowed
    const checks = reports ? [] : undefined
    try {
      for (let s = 0; s < syncEntries.length; s++) {
        const entry = syncEntries[s]
        const key = keys[entry.index]
        const n = costs[entry.index]
        const decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
        if (checks !== undefined) checks.push(checked(entry, key, n, decision))
        if (decision.allowed) {
          taken.push({ entry, key, n, decision, period: periodTaken(entry) })
          // (Every entry is in-process here: each allowed request writes every enforced slot of checkedItems.)
          if (buildAsChecked && !entry.shadow) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, checkedItems, entry.index)
          continue
        }
        if (entry.shadow) {
          ;(shadowed ??= []).push(shadowDenial(entry, key, n, decision))
          continue
        }
        // A denial refunds what the earlier limits took; the later ones are reported from status.
        const earlier = taken
        taken = [] // refunded here, whether or not every refund succeeds
        refundTaken(earlier, earlier.length)
        return severalDenied(req, res, next, keys, earlier, { entry, key, n, decision }, s, checks, shadowed)
      }
      if (buildAsChecked) writeHeaders(io, res, checkedItems, undefined)
    } catch (err) {
      refundQuietly(taken, taken.length)
      return fail(err, res, next)
    }
    const run = { taken, checks, shadowed }
    if (awaited) {
      let items
      if (headers) {
        items = headerItems(entries.length)
        try {
          for (const { entry, key, decision } of taken) {
            if (!entry.shadow) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
          }
        } catch (err) {
          refundQuietly(taken, taken.length)
          return fail(err, res, next)
        }
      }
      return throttled(req, res, next, run, keys, items, costs)
    }
    return passOn(req, res, next, checks, taken, shadowed)
  }

  /**
   * A shared limiter entry, after every in-process limit allowed the request: true when the
   * request was answered here (an enforced denial, or 503 when the store is unavailable).
   */
  async function sharedLimit(req, res, next, entry, keys, costs, run, items, refundAll) {
    const key = keys[entry.index]
    const n = costs[entry.index]
    let decision
    let period
    try {
      ;({ decision, period } = await consumeKeyedTaken(entry.limiter, key, n))
    } catch (err) {
      if (!(isError(err) && err.code === 'ERR_STORE_UNAVAILABLE')) throw err
      if (entry.shadow) return false // a shadow limit never answers the request, an outage of its store neither
      refundAll()
      unavailable(res, items, 'The shared quota store could not be reached in time, so the request was not served.')
      return true
    }
    if (run.checks !== undefined) run.checks.push(checked(entry, key, n, decision))
    if (decision.allowed) {
      run.taken.push({ entry, key, n, decision, period })
      if (headers && !entry.shadow) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
      return false
    }
    if (entry.shadow) {
      ;(run.shadowed ??= []).push(shadowDenial(entry, key, n, decision))
      return false
    }
    // Denied: what the earlier limits took goes back; later shared limits are reported from status.
    refundAll()
    const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
    const violated = violatedBy(entry, record, decision, n)
    if (headers) {
      describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index)
      for (const later of sharedEntries.slice(sharedEntries.indexOf(entry) + 1)) {
        if (!later.shadow) describeStatus(later, keys[later.index], items)
      }
    }
    await denied(req, res, next, run.checks, run.shadowed, decision, violated, quotaReset(record, decision), items)
    return true
  }

  /** The shared limiter entries, then the throttle entries, after every in-process limit allowed the request. */
  async function throttled(req, res, next, run, keys, items, costs) {
    const { taken } = run
    let refunded = false
    const refundAll = () => {
      refunded = true // once, even if a refund throws
      refundTaken(taken, taken.length)
      if (headers) {
        for (const { entry, key, n, decision } of taken) {
          if (!entry.shadow) describeRefunded(entry, key, decision.tokens, decision.quotaRemaining, items, entry.index, n)
        }
      }
    }
    try {
      for (const entry of sharedEntries) {
        if (await sharedLimit(req, res, next, entry, keys, costs, run, items, refundAll)) return
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
          if (entry.shadow) continue // a shadow limit never answers the request
          refundAll()
          const why = err instanceof ThrottleTimeout ? `no answer within ${entry.timeoutMs} ms` : nonsense ? 'it answered something that is not a count' : 'it failed'
          unavailable(res, items, `The rate limit store could not be reached (${why}), so the request was not served.`)
          return
        }
        entry.outage.answered()
        if (headers && !entry.shadow) describeThrottle(entry, result, items, entry.index)
        const { decision, violated } = result.allowed ? { decision: throttleAllowance(result) } : throttleDenial(entry, result)
        if (run.checks !== undefined) run.checks.push(checked(entry, keys[entry.index], 1, decision))
        if (!result.allowed) {
          if (entry.shadow) {
            ;(run.shadowed ??= []).push({ decision, violated })
            continue
          }
          refundAll()
          await denied(req, res, next, run.checks, run.shadowed, decision, violated, undefined, items)
          return
        }
      }
      writeHeaders(io, res, items, undefined)
    } catch (err) {
      if (!refunded) refundQuietly(taken, taken.length)
      fail(isError(err) ? err : throttleError(err), res, next)
      return
    }
    await passOn(req, res, next, run.checks, taken, run.shadowed)
  }

  return single !== undefined ? singleLimit : severalLimits
}

module.exports = { createDecider }
