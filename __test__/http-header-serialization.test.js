'use strict'
// rateLimit writes its RateLimit and RateLimit-Policy lists by hand (string concatenation, with the
// last RateLimit item reused while a key's integers repeat); this checks that text against the
// structured-headers library's serialization (RFC 9651) for many limits, names, clocks and costs,
// request after request through one middleware.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')
const { serializeList } = require('structured-headers')

const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')

// The largest sf-integer (RFC 9651): larger values are written as it.
const MAX_SF_INTEGER = 999_999_999_999_999
const sfInt = (value) => Math.min(MAX_SF_INTEGER, Math.max(0, Math.floor(value)))
const NOON = Date.UTC(2024, 0, 15, 12)

/** One request through `middleware`: its headers, and the decision it put on the request. */
function request(middleware) {
  const headers = {}
  const req = { ip: '192.0.2.1', headers: {} }
  const res = {
    statusCode: 200,
    headersSent: false,
    setHeader: (name, value) => (headers[name.toLowerCase()] = value),
    getHeader: (name) => headers[name.toLowerCase()],
    end() {},
  }
  middleware(req, res, () => {})
  return { headers, decision: req.rateLimit.limits[0].decision }
}

/** The two lists as the library serializes them, from the limiter's status and the request's decision. */
function expectedLists(status, decision, wallNowMs, name) {
  const item = (unit) => (name === undefined ? unit : `${name}-${unit}`)
  const policy = [[item('burst'), new Map([['q', sfInt(status.capacity)], ['w', sfInt(Math.ceil(status.capacity / status.refillPerSecond))]])]]
  const limit = [[item('burst'), new Map([['r', sfInt(decision.tokens)], ['t', sfInt(Math.ceil((status.capacity - decision.tokens) / status.refillPerSecond))]])]]
  if (status.quotaLimit !== null && status.quotaLimit !== undefined) {
    const { period } = status
    const unit = status.unit
    policy.push([item(unit), new Map([['q', sfInt(status.quotaLimit)], ['w', sfInt(Math.round((period.endMs - period.startMs) / 1000))]])])
    limit.push([item(unit), new Map([['r', sfInt(decision.quotaRemaining)], ['t', sfInt(Math.ceil((period.endMs - wallNowMs) / 1000))]])])
  }
  return { policy: serializeList(policy), limit: serializeList(limit) }
}

const limits = fc.record({
  capacity: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constantFrom(1e9, 2 ** 40, 1e15, 9e15)),
  refillPerSecond: fc.oneof(fc.constantFrom(0.001, 0.5, 1, 3, 1e9), fc.double({ min: 0.01, max: 1e6, noNaN: true })),
  quota: fc.option(fc.record({ limit: fc.oneof(fc.integer({ min: 1, max: 10_000 }), fc.constant(Number.MAX_SAFE_INTEGER)), unit: fc.constantFrom('day', 'week', 'month', 'year') }), { nil: undefined }),
  name: fc.option(fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 12 }), { nil: undefined }),
  keyed: fc.boolean(),
})
// Between requests: time passes (often none, so that the same integers repeat), then a cost.
const steps = fc.array(fc.record({ advanceMs: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 5_000 }), fc.integer({ min: 3_600_000, max: 40 * 86_400_000 })), cost: fc.integer({ min: 1, max: 7 }) }), { minLength: 1, maxLength: 25 })

describe('the hand-written RateLimit lists, against the structured-headers library', () => {
  it('RateLimit-Policy and RateLimit equal the library serialization of the same items, request after request', () => {
    fc.assert(
      fc.property(limits, steps, ({ capacity, refillPerSecond, quota, name, keyed }, stepList) => {
        const clock = manualClock({ wallMs: NOON })
        const options = { capacity, refillPerSecond, suspendPolicy: 'ignore', clock }
        if (quota !== undefined) options.quota = { limit: quota.limit, period: { unit: quota.unit, timeZone: 'UTC' } }
        const limiter = keyed ? new KeyedQuotaClock(options) : new QuotaClock(options)
        const middleware = rateLimit({ limiter, name, cost: (req) => req.cost })
        for (const { advanceMs, cost } of stepList) {
          clock.advance(advanceMs)
          const run = (req, res, next) => {
            req.cost = Math.min(cost, capacity)
            return middleware(req, res, next)
          }
          const { headers, decision } = request(run)
          const status = keyed ? limiter.status('192.0.2.1') : limiter.status()
          const expected = expectedLists({ ...status, unit: quota?.unit }, decision, clock.wallMs(), name)
          assert.equal(headers['ratelimit-policy'], expected.policy)
          assert.equal(headers.ratelimit, expected.limit)
        }
      }),
      { numRuns: 300 },
    )
  })
})
