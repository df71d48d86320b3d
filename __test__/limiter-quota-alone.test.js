'use strict'
// A quota alone: with `quota` set, `capacity` and `refillPerSecond` may both be left out. No
// bucket: decisions wait only on the quota, tokens (and capacity, refillPerSecond) are Infinity,
// `n` is bounded only by the quota, the HTTP headers carry only the quota item. One of the two
// without the other is refused.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')
const { serve, items } = require('./helpers/http-servers.js')

const month = { unit: 'month', timeZone: 'UTC' }
const JUNE_10_2025 = Date.UTC(2025, 5, 10, 12)
const quota = (limit) => ({ limit, period: month })
const refused = (code, pattern) => (error) => error.code === code && pattern.test(error.message)

describe('QuotaClock with a quota alone', () => {
  it('decides on the quota only: tokens Infinity, n bounded only by the quota, waits on the period', () => {
    const clock = manualClock({ wallMs: JUNE_10_2025 })
    const limiter = new QuotaClock({ suspendPolicy: 'ignore', quota: quota(10_000), clock })
    const first = limiter.tryConsume(9_000)
    assert.deepEqual(first, { allowed: true, retryAfterMs: 0, retryAfterBasis: null, tokens: Infinity, quotaRemaining: 1_000, anomalies: [] })
    const denied = limiter.tryConsume(1_001)
    assert.equal(denied.allowed, false)
    assert.equal(denied.retryAfterBasis, 'wall-period')
    assert.equal(denied.retryAfterMs, Date.UTC(2025, 6, 1) - JUNE_10_2025)
    assert.equal(denied.tokens, Infinity)
    assert.equal(limiter.tryConsume(1_000).allowed, true)
    const status = limiter.status()
    assert.equal(status.tokens, Infinity)
    assert.equal(status.capacity, Infinity)
    assert.equal(status.refillPerSecond, Infinity)
    assert.equal(status.quotaUsed, 10_000)
    assert.equal(status.quotaLimit, 10_000)
    // A request larger than the whole quota is denied with the quota wait, as with a bucket.
    assert.equal(limiter.tryConsume(Number.MAX_SAFE_INTEGER).retryAfterBasis, 'wall-period')
    for (const n of [0, 1.5, 2 ** 53, NaN]) assert.throws(() => limiter.tryConsume(n), refused('ERR_INVALID_ARG', /n must be a positive safe integer/))
    // The next month: the whole quota again.
    clock.advance(Date.UTC(2025, 6, 1) - JUNE_10_2025)
    assert.equal(limiter.tryConsume(10_000).quotaRemaining, 0)
    limiter.refund(10)
    assert.equal(limiter.status().quotaUsed, 9_990)
  })

  it('refuses one of capacity and refillPerSecond without the other, initialTokens, and no bucket without a quota', () => {
    const make = (options) => () => new QuotaClock({ suspendPolicy: 'ignore', ...options })
    assert.throws(make({ capacity: 10, quota: quota(5) }), (e) => e instanceof TypeError && refused('ERR_INVALID_OPTION', /refillPerSecond must be given with capacity/)(e))
    assert.throws(make({ refillPerSecond: 1, quota: quota(5) }), (e) => e instanceof TypeError && refused('ERR_INVALID_OPTION', /capacity must be given with refillPerSecond/)(e))
    assert.throws(make({ capacity: 10 }), refused('ERR_INVALID_OPTION', /refillPerSecond/))
    assert.throws(make({ refillPerSecond: 1 }), refused('ERR_INVALID_OPTION', /capacity/))
    assert.throws(make({}), refused('ERR_INVALID_OPTION', /capacity/))
    assert.throws(make({ initialTokens: 3, quota: quota(5) }), refused('ERR_INVALID_OPTION', /initialTokens has no bucket/))
    assert.throws(make({ capacity: undefined, refillPerSecond: undefined }), refused('ERR_INVALID_OPTION', /capacity/))
    // Values are still checked when given.
    assert.throws(make({ capacity: Infinity, refillPerSecond: Infinity, quota: quota(5) }), refused('ERR_INVALID_OPTION', /capacity must be a finite number/))
    assert.equal(new QuotaClock({ suspendPolicy: 'ignore', capacity: undefined, refillPerSecond: undefined, quota: quota(5) }).status().capacity, Infinity, 'undefined counts as absent')
  })
})

describe('KeyedQuotaClock with a quota alone', () => {
  it('defaults without a bucket; a policy gives a key a bucket with both fields, or keeps it quota-only', () => {
    const clock = manualClock({ wallMs: JUNE_10_2025 })
    const plans = { metered: { capacity: 2, refillPerSecond: 1 }, bigger: { quota: quota(50) } }
    const limiter = new KeyedQuotaClock({ suspendPolicy: 'ignore', quota: quota(10), clock, policy: (key) => plans[key] })
    const plain = limiter.tryConsume('plain', 10)
    assert.equal(plain.tokens, Infinity)
    assert.equal(plain.quotaRemaining, 0)
    assert.equal(limiter.tryConsume('plain').retryAfterBasis, 'wall-period')
    assert.equal(limiter.tryConsume('bigger', 40).quotaRemaining, 10)
    assert.equal(limiter.status('bigger').capacity, Infinity)
    assert.equal(limiter.tryConsume('metered', 2).tokens, 0)
    const metered = limiter.tryConsume('metered')
    assert.equal(metered.retryAfterBasis, 'monotonic-refill')
    assert.deepEqual([limiter.status('metered').capacity, limiter.status('metered').quotaLimit], [2, 10])
    assert.deepEqual([limiter.status('fresh').tokens, limiter.status('fresh').capacity, limiter.status('fresh').refillPerSecond], [Infinity, Infinity, Infinity])
  })

  it('refuses a KeyPolicy with one of the two, with initialTokens, or with quota null, naming the key; the key is not held', () => {
    const cases = [
      [{ capacity: 5 }, /policy\("k"\)\.refillPerSecond must be given with policy\("k"\)\.capacity/],
      [{ refillPerSecond: 5 }, /policy\("k"\)\.capacity must be given/],
      [{ initialTokens: 1 }, /policy\("k"\)\.initialTokens has no bucket/],
      [{ quota: null }, /policy\("k"\)\.quota is null and the key has no bucket/],
    ]
    for (const [plan, pattern] of cases) {
      const limiter = new KeyedQuotaClock({ suspendPolicy: 'ignore', quota: quota(10), policy: () => plan })
      assert.throws(() => limiter.tryConsume('k'), (e) => e instanceof TypeError && refused('ERR_INVALID_OPTION', pattern)(e), JSON.stringify(plan))
      assert.equal(limiter.size, 0)
    }
    // With a bucket in the defaults, one field overrides as before.
    const withBucket = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', policy: () => ({ capacity: 8 }) })
    assert.equal(withBucket.status('k').capacity, 8)
    assert.throws(() => new KeyedQuotaClock({ suspendPolicy: 'ignore', capacity: 5, quota: quota(10) }), refused('ERR_INVALID_OPTION', /refillPerSecond must be given/))
  })

  it('neither a bucket nor a quota in the defaults: the error says that a quota alone would do, and with a policy that a default quota is enough', () => {
    const withPolicy = () => new KeyedQuotaClock({ suspendPolicy: 'ignore', policy: () => ({ quota: quota(5) }) })
    assert.throws(withPolicy, (e) => e instanceof TypeError && refused('ERR_INVALID_OPTION', /capacity must be a number; received undefined/)(e))
    assert.throws(withPolicy, refused('ERR_INVALID_OPTION', /quota alone/))
    assert.throws(withPolicy, refused('ERR_INVALID_OPTION', /policy.*default `?quota`?/))
    assert.throws(() => new QuotaClock({ suspendPolicy: 'ignore' }), refused('ERR_INVALID_OPTION', /capacity and refillPerSecond.*or a quota alone/))
    assert.throws(() => new QuotaClock({ suspendPolicy: 'ignore' }), (e) => !/policy/.test(e.message), 'no policy, no word of it')
  })

  it('snapshots round-trip quota-only keys (Infinity tokens) with their use', () => {
    const clock = manualClock({ wallMs: JUNE_10_2025 })
    const plans = { metered: { capacity: 4, refillPerSecond: 0.001 } }
    const options = { suspendPolicy: 'ignore', quota: quota(10), clock, policy: (key) => plans[key] }
    const source = new KeyedQuotaClock(options)
    source.tryConsume('a', 7)
    source.tryConsume('metered', 3)
    const restored = new KeyedQuotaClock({ ...options, restore: source.snapshot() })
    assert.equal(restored.size, 2)
    assert.deepEqual([restored.status('a').tokens, restored.status('a').quotaUsed], [Infinity, 7])
    assert.deepEqual([restored.status('metered').tokens, restored.status('metered').quotaUsed], [1, 3])
    assert.equal(restored.tryConsume('a', 3).allowed, true)
    assert.equal(restored.tryConsume('a').allowed, false)
    // Restored into a limiter with a bucket, Infinity tokens are capped at its capacity.
    const bucketed = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', quota: quota(10), clock, restore: source.snapshot() })
    assert.deepEqual([bucketed.status('a').tokens, bucketed.status('a').quotaUsed], [5, 7])
  })
})

describe('HTTP headers of a quota alone carry only the quota item', () => {
  it('one limiter and several limits, on Express', async () => {
    const clock = manualClock({ wallMs: JUNE_10_2025 })
    const tenant = new KeyedQuotaClock({ suspendPolicy: 'ignore', quota: quota(2), clock })
    const app = new QuotaClock({ capacity: 100, refillPerSecond: 10, suspendPolicy: 'ignore', clock })
    const single = await serve('Express 5', rateLimit({ limiter: tenant, name: 'tenant', key: () => 't1' }))
    try {
      const allowed = await single.get()
      assert.equal(allowed.status, 200)
      await allowed.text()
      const periodSeconds = (Date.UTC(2025, 6, 1) - Date.UTC(2025, 5, 1)) / 1000
      assert.deepEqual(items(allowed, 'RateLimit-Policy'), { 'tenant-month': { q: 2, w: periodSeconds } })
      assert.deepEqual(items(allowed, 'RateLimit'), { 'tenant-month': { r: 1, t: (Date.UTC(2025, 6, 1) - JUNE_10_2025) / 1000 } })
      await (await single.get()).text()
      const denied = await single.get()
      assert.equal(denied.status, 429)
      const body = await denied.json()
      assert.deepEqual(body['violated-policies'], ['tenant-month'])
      assert.equal(body.retryAfterBasis, 'wall-period')
      assert.deepEqual(Object.keys(items(denied, 'RateLimit')), ['tenant-month'])
    } finally {
      await single.close()
    }
    const several = await serve('Express 5', rateLimit({ limits: [{ limiter: app, name: 'app' }, { limiter: tenant, name: 'tenant', key: () => 't2' }] }))
    try {
      const response = await several.get()
      assert.equal(response.status, 200)
      await response.text()
      assert.deepEqual(Object.keys(items(response, 'RateLimit-Policy')), ['app-burst', 'tenant-month'])
      assert.deepEqual(Object.keys(items(response, 'RateLimit')), ['app-burst', 'tenant-month'])
    } finally {
      await several.close()
    }
  })
})
