'use strict'
// rateLimit: Express/Connect middleware that is also a plain node:http handler step. Its options
// are read in ./options.js, the headers written by ./headers.js, its own responses by
// ./responses.js.

const { coded } = require('../validate.js')
const { describeLimiter, describeThrottle, limitItems, recordFor, setRateLimitHeaders, statusOf } = require('./headers.js')
const { parseOptions, THROTTLE_LIMITS } = require('./options.js')
const { failed, quotaExceededProblem, sendProblem } = require('./responses.js')

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

function throttleUnavailable(entry, err) {
  if (entry.unavailable) return
  entry.unavailable = true
  const reason = err && err.code === 'ERR_THROTTLE_TIMEOUT' ? err.message : `it failed: ${err && err.message}`
  process.emitWarning(
    `rateLimit: the throttle store is unavailable (${reason}); requests ${entry.failOpen ? 'pass unchecked (failOpen)' : 'are answered 503'} until it answers again`,
    { code: 'QUOTA_CLOCK_THROTTLE_UNAVAILABLE' },
  )
}

/** throttle.check within entry.timeoutMs; a late answer is ignored. */
function checkWithin(entry, key) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(coded(Error, 'ERR_THROTTLE_TIMEOUT', `the throttle store did not answer within ${entry.timeoutMs} ms`))
    }, entry.timeoutMs)
    let pending
    try {
      pending = Promise.resolve(entry.throttle.check(key, entry.limits))
    } catch (err) {
      pending = Promise.reject(err)
    }
    pending.then(
      (result) => {
        clearTimeout(timer)
        resolve(result)
      },
      (err) => {
        clearTimeout(timer)
        reject(err)
      },
    )
  })
}

// Argument and clock errors are the caller's to see (next(err)); anything else a throttle rejects
// with means its store did not serve the check.
function isCallerError(err) {
  return err !== null && typeof err === 'object' && (err.code === 'ERR_INVALID_ARG' || err.code === 'ERR_CLOCK_READING')
}

function rateLimit(options) {
  const { entries, headers, skip, onLimited } = parseOptions(options)
  const syncEntries = entries.filter((e) => !e.isThrottle && !e.shared)
  const sharedEntries = entries.filter((e) => e.shared)
  const throttleEntries = entries.filter((e) => e.isThrottle)
  entries.forEach((entry, i) => (entry.index = i))
  const single = entries.length === 1 && syncEntries.length === 1 ? syncEntries[0] : undefined

  /** Gives back what the first `count` limiter entries took for this request. */
  function refundTaken(taken, count) {
    for (let i = 0; i < count; i++) {
      const { entry, key, n } = taken[i]
      if (entry.keyed) entry.limiter.refund(key, n)
      else entry.limiter.refund(n)
    }
  }

  function refundQuietly(taken, count) {
    try {
      refundTaken(taken, count)
    } catch {
      // The request fails anyway; the limiter reports its own error on its next call.
    }
  }

  function limited(req, res, next, decision, violated) {
    res.setHeader('Retry-After', String(Math.ceil(decision.retryAfterMs / 1000)))
    if (onLimited !== undefined) {
      const returned = onLimited(req, res, { decision, violated })
      if (returned !== null && typeof returned === 'object' && typeof returned.then === 'function') {
        return Promise.resolve(returned).then(undefined, (err) => failed(err, res, next))
      }
      return undefined
    }
    sendProblem(res, 429, quotaExceededProblem(decision, violated))
    return undefined
  }

  /** skip(req), with a throw handled like any other error; true when the request was passed on. */
  function skipped(req, res, next) {
    let skipThis
    try {
      skipThis = skip(req)
    } catch (err) {
      failed(err, res, next)
      return true
    }
    if (!skipThis) return false
    if (next) next() // outside the try: a throw from later handlers is not the limiter's
    return true
  }

  /** One limiter entry: the fast path of the usual one-limit middleware. */
  function singleLimit(req, res, next) {
    const entry = single
    let decision
    let key
    let n = 1
    if (skip !== undefined && skipped(req, res, next)) return undefined
    try {
      if (entry.keyed) key = entry.key(req)
      if (entry.cost !== undefined) n = entry.cost(req)
      decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
      if (headers || !decision.allowed) {
        const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
        if (headers) {
          res.setHeader('RateLimit-Policy', record.policy)
          res.setHeader('RateLimit', limitItems(entry, record, decision.tokens, decision.quotaRemaining))
        }
        if (!decision.allowed) return limited(req, res, next, decision, violatedBy(entry, record, decision, n))
      }
    } catch (err) {
      if (decision !== undefined && decision.allowed) refundQuietly([{ entry, key, n }], 1)
      return failed(err, res, next)
    }
    if (next) next()
    return undefined
  }

  const newOut = () => ({ policy: new Array(entries.length).fill(''), limit: new Array(entries.length).fill('') })
  // Without entries to await, the headers of an allowed request are built as the limits are checked.
  const awaited = sharedEntries.length + throttleEntries.length > 0
  const buildAsChecked = headers && !awaited

  function severalLimits(req, res, next) {
    const taken = []
    let allowedCount = 0
    let policyHeader = ''
    let limitHeader = ''
    if (skip !== undefined && skipped(req, res, next)) return undefined
    try {
      for (let s = 0; s < syncEntries.length; s++) {
        const entry = syncEntries[s]
        const key = entry.keyed ? entry.key(req) : undefined
        const n = entry.cost === undefined ? 1 : entry.cost(req)
        const decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
        taken.push({ entry, key, n, decision })
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
        const violated = violatedBy(entry, recordFor(entry, key, decision.tokens, decision.quotaRemaining), decision, n)
        if (headers) {
          const out = newOut()
          for (let e = 0; e < s; e++) {
            const { entry: earlier, key: earlierKey, n: earlierN, decision: d } = taken[e]
            describeLimiter(earlier, earlierKey, d.tokens, d.quotaRemaining, out, earlier.index, earlierN)
          }
          describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
          for (let later = s + 1; later < syncEntries.length; later++) {
            const laterEntry = syncEntries[later]
            const laterKey = laterEntry.keyed ? laterEntry.key(req) : undefined
            const status = statusOf(laterEntry, laterKey)
            describeLimiter(laterEntry, laterKey, status.tokens, status.quotaRemaining, out, laterEntry.index)
          }
          setRateLimitHeaders(res, out)
        }
        return limited(req, res, next, decision, violated)
      }
      if (buildAsChecked) {
        res.setHeader('RateLimit-Policy', policyHeader)
        res.setHeader('RateLimit', limitHeader)
      }
    } catch (err) {
      refundQuietly(taken, allowedCount)
      return failed(err, res, next)
    }
    if (awaited) {
      let out
      if (headers) {
        out = newOut()
        try {
          for (const { entry, key, decision } of taken) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
        } catch (err) {
          refundQuietly(taken, taken.length)
          return failed(err, res, next)
        }
      }
      return throttled(req, res, next, taken, out)
    }
    if (next) next()
    return undefined
  }

  /**
   * A shared limiter entry (after every in-process limit allowed the request): true when the
   * request was answered here (a denial, or 503 when the store is unavailable).
   */
  async function sharedLimit(req, res, next, entry, taken, out, refundAll) {
    const key = entry.key(req)
    const n = entry.cost === undefined ? 1 : entry.cost(req)
    let decision
    try {
      decision = await entry.limiter.consume(key, n)
    } catch (err) {
      if (!(err !== null && typeof err === 'object' && err.code === 'ERR_STORE_UNAVAILABLE')) throw err
      refundAll()
      if (headers) setRateLimitHeaders(res, out)
      sendProblem(res, 503, {
        type: 'about:blank',
        title: 'Service Unavailable',
        status: 503,
        detail: 'The shared quota store could not be reached in time, so the request was not served.',
      })
      return true
    }
    if (decision.allowed) {
      taken.push({ entry, key, n, decision })
      if (headers) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
      return false
    }
    // Denied: what the earlier limits took goes back; later shared limits are reported from status.
    refundAll()
    const violated = violatedBy(entry, recordFor(entry, key, decision.tokens, decision.quotaRemaining), decision, n)
    if (headers) {
      describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
      for (const later of sharedEntries.slice(sharedEntries.indexOf(entry) + 1)) {
        const laterKey = later.key(req)
        const status = statusOf(later, laterKey)
        describeLimiter(later, laterKey, status.tokens, status.quotaRemaining, out, later.index)
      }
      setRateLimitHeaders(res, out)
    }
    await limited(req, res, next, decision, violated)
    return true
  }

  /** The shared limiter entries, then the throttle entries, after every in-process limit allowed the request. */
  async function throttled(req, res, next, taken, out) {
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
        if (await sharedLimit(req, res, next, entry, taken, out, refundAll)) return
      }
      for (const entry of throttleEntries) {
        const key = entry.key(req)
        let result
        try {
          result = await checkWithin(entry, key)
        } catch (err) {
          if (isCallerError(err)) throw err
          throttleUnavailable(entry, err)
          if (entry.failOpen) continue
          refundAll()
          if (headers) setRateLimitHeaders(res, out)
          const why = err && err.code === 'ERR_THROTTLE_TIMEOUT' ? `no answer within ${entry.timeoutMs} ms` : 'it failed'
          sendProblem(res, 503, {
            type: 'about:blank',
            title: 'Service Unavailable',
            status: 503,
            detail: `The rate limit store could not be reached (${why}), so the request was not served.`,
          })
          return
        }
        entry.unavailable = false
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
          if (headers) setRateLimitHeaders(res, out)
          await limited(req, res, next, decision, [entry.items.plain[unit]])
          return
        }
      }
      if (headers) setRateLimitHeaders(res, out)
    } catch (err) {
      if (!refunded) refundQuietly(taken, taken.length)
      failed(err, res, next)
      return
    }
    if (next) next()
  }

  return single !== undefined ? singleLimit : severalLimits
}

module.exports = { rateLimit }
