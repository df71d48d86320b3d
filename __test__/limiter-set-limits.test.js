'use strict'
// QuotaClock#setLimits: new limits now, with what the limiter used carried over.

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, manualClock } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const UTC_MONTH = { unit: 'month', timeZone: 'UTC' }

function make(options = {}) {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, ...options })
  return { clock, limiter }
}

const drain = (limiter, n) => {
  for (let i = 0; i < n; i++) assert.equal(limiter.tryConsume().allowed, true)
}

test('bucket to bucket: what was used stays used, tokens = clamp(tokens + C\' - C, 0, C\')', () => {
  const { limiter } = make()
  drain(limiter, 7)
  const up = limiter.setLimits({ capacity: 50 })
  assert.equal(up.tokens, 43)
  assert.equal(up.capacity, 50)
  const down = limiter.setLimits({ capacity: 5 })
  assert.equal(down.tokens, 0, 'a cut takes what the bucket lacked away first')
  assert.equal(limiter.tryConsume().allowed, false)
})

test('the state is brought to the call\'s reading under the old limits first (refilled at the old rate)', () => {
  const { clock, limiter } = make()
  drain(limiter, 10)
  clock.advance(3000)
  const status = limiter.setLimits({ capacity: 20, refillPerSecond: 100 })
  assert.equal(status.tokens, 13, '3 refilled at 1/s, then +10 of the new capacity')
  assert.equal(status.refillPerSecond, 100)
  clock.advance(10)
  assert.equal(limiter.status().tokens, 14, 'then refilled at the new rate')
})

test('quota to quota: the use carries whole, quotaRemaining = max(0, limit\' - used), quotaUsed keeps it', () => {
  const { limiter } = make({ quota: { limit: 100, period: UTC_DAY } })
  drain(limiter, 8)
  const cut = limiter.setLimits({ quota: { limit: 5, period: UTC_DAY } })
  assert.deepEqual([cut.quotaUsed, cut.quotaRemaining, cut.quotaLimit], [8, 0, 5])
  assert.equal(limiter.tryConsume().allowed, false)
  const up = limiter.setLimits({ quota: { limit: 10, period: UTC_DAY } })
  assert.deepEqual([up.quotaUsed, up.quotaRemaining], [8, 2])
})

test('a new period spec: the use carries into its open period (a plan change never hands out units)', () => {
  const { limiter } = make({ quota: { limit: 10, period: UTC_DAY } })
  drain(limiter, 6)
  const status = limiter.setLimits({ quota: { limit: 300, period: UTC_MONTH } })
  assert.equal(status.period.id, '2024-01')
  assert.deepEqual([status.quotaUsed, status.quotaRemaining], [6, 294])
})

test('quota to none drops the use; none to a quota starts at 0; a bucket to none is gone, none to a bucket is full', () => {
  const { limiter } = make({ quota: { limit: 10, period: UTC_DAY } })
  drain(limiter, 4)
  const none = limiter.setLimits({ quota: null })
  assert.deepEqual([none.quotaUsed, none.quotaRemaining, none.quotaLimit, none.period], [null, null, null, null])
  const again = limiter.setLimits({ quota: { limit: 10, period: UTC_DAY } })
  assert.deepEqual([again.quotaUsed, again.quotaRemaining], [0, 10])

  const alone = new QuotaClock({ suspendPolicy: 'ignore', clock: manualClock({ monotonicMs: 0, wallMs: NOON }), quota: { limit: 5, period: UTC_DAY } })
  assert.equal(alone.tryConsume().allowed, true)
  const bucket = alone.setLimits({ capacity: 3, refillPerSecond: 1 })
  assert.deepEqual([bucket.tokens, bucket.capacity, bucket.quotaUsed], [3, 3, 1])
  assert.equal(alone.tryConsume(3).allowed, true)
  assert.throws(() => alone.tryConsume(4), { code: 'ERR_INVALID_ARG' }, 'n is checked against the capacity in force')
})

test('initialTokens of the new limits is not applied', () => {
  const { limiter } = make()
  drain(limiter, 10)
  assert.equal(limiter.setLimits({ capacity: 10, initialTokens: 10 }).tokens, 0)
})

test('invalid limits throw like the constructor\'s options and change nothing', () => {
  const { limiter } = make({ quota: { limit: 10, period: UTC_DAY } })
  drain(limiter, 2)
  const before = limiter.status()
  assert.throws(() => limiter.setLimits({ capacity: -1 }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
  assert.throws(() => limiter.setLimits({ capacity: 'big' }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
  assert.throws(() => limiter.setLimits({ capasity: 5 }), { code: 'ERR_INVALID_OPTION' })
  assert.throws(() => limiter.setLimits({ quota: { limit: 1, period: { unit: 'hour', timeZone: 'UTC' } } }), { code: 'ERR_SUB_DAY_PERIOD' })
  assert.throws(() => limiter.setLimits({ quota: { limit: 1, period: { unit: 'day', timeZone: 'Mars/Olympus' } } }), { code: 'ERR_UNKNOWN_TIME_ZONE' })
  assert.throws(() => limiter.setLimits(undefined), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
  assert.deepEqual(limiter.status(), before)
})

test('status and tryConsume report the limits in force from the next call', () => {
  const { limiter } = make({ quota: { limit: 10, period: UTC_DAY } })
  limiter.setLimits({ capacity: 4, refillPerSecond: 2, quota: { limit: 3, period: UTC_DAY } })
  const status = limiter.status()
  assert.deepEqual([status.capacity, status.refillPerSecond, status.quotaLimit, status.tokens], [4, 2, 3, 4])
  drain(limiter, 3)
  const denied = limiter.tryConsume()
  assert.equal(denied.allowed, false)
  assert.equal(denied.retryAfterBasis, 'wall-period')
})
