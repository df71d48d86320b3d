'use strict'
// KeyedQuotaClock#refreshPolicy and policyTtlMs, on the in-process table, manual clocks.

const test = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, manualClock } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const UTC_MONTH = { unit: 'month', timeZone: 'UTC' }

/** A limiter whose plans are a Map the test changes; `asked` counts policy calls per key. */
function make(options = {}, plans = new Map()) {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const asked = new Map()
  const policy = (key) => {
    asked.set(key, (asked.get(key) ?? 0) + 1)
    const plan = plans.get(key)
    if (plan instanceof Error) throw plan
    return plan
  }
  const limiter = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, policy, ...options })
  return { clock, limiter, plans, asked }
}

const drain = (limiter, key, n) => {
  for (let i = 0; i < n; i++) assert.equal(limiter.tryConsume(key).allowed, true, `call ${i + 1} of ${n}`)
}

test('policy is asked once while a key is held, and again only after refreshPolicy(key)', () => {
  const { limiter, plans, asked } = make()
  drain(limiter, 'a', 3)
  drain(limiter, 'b', 1)
  assert.equal(asked.get('a'), 1)
  limiter.refreshPolicy('a')
  assert.equal(asked.get('a'), 1, 'marking asks nothing')
  plans.set('a', { capacity: 20 })
  drain(limiter, 'a', 1)
  assert.deepEqual([asked.get('a'), asked.get('b')], [2, 1])
  drain(limiter, 'a', 1)
  assert.equal(asked.get('a'), 2, 'the mark is cleared once the policy is in force')
  assert.equal(limiter.status('a').capacity, 20)
})

test('refreshPolicy() marks every key held now; a key not held: nothing happens', () => {
  const { limiter, asked } = make()
  drain(limiter, 'a', 1)
  drain(limiter, 'b', 1)
  limiter.refreshPolicy('nobody')
  limiter.refreshPolicy()
  limiter.status('a')
  limiter.refund('b')
  assert.deepEqual([asked.get('a'), asked.get('b'), asked.get('nobody')], [2, 2, undefined])
  drain(limiter, 'c', 1)
  drain(limiter, 'c', 1)
  assert.equal(asked.get('c'), 1, 'a key held after refreshPolicy() is not marked')
})

test('every kind of call asks a marked key\'s policy first: tryConsume, consume, refund, status', async () => {
  const { limiter, plans, asked } = make()
  for (const [index, call] of [(k) => limiter.tryConsume(k), (k) => limiter.consume(k), (k) => limiter.refund(k), (k) => limiter.status(k)].entries()) {
    const key = `k${index}`
    drain(limiter, key, 4)
    plans.set(key, { capacity: 30 })
    limiter.refreshPolicy(key)
    await call(key)
    assert.equal(asked.get(key), 2, `call ${index}`)
    assert.equal(limiter.status(key).capacity, 30)
  }
})

test('bucket to bucket: tokens = clamp(tokens + C\' - C, 0, C\') at the call\'s reading, refilled at the old rate first', () => {
  const { clock, limiter, plans } = make()
  drain(limiter, 'a', 10)
  clock.advance(2000)
  plans.set('a', { capacity: 50, refillPerSecond: 1000 })
  limiter.refreshPolicy('a')
  const decision = limiter.tryConsume('a')
  assert.equal(decision.tokens, 2 + 40 - 1)
  plans.set('a', { capacity: 5, refillPerSecond: 1 })
  limiter.refreshPolicy('a')
  assert.equal(limiter.status('a').tokens, 0, 'a cut of 45 takes 41 tokens: none left')
  plans.set('a', { capacity: 50, refillPerSecond: 1 })
  limiter.refreshPolicy('a')
  assert.equal(limiter.status('a').tokens, 45, 'a plan change never hands out units: 5 lacking stays lacking')
})

test('quota to quota: the use carries whole; quotaRemaining = max(0, limit\' - used) may be 0 at once', () => {
  const { limiter, plans } = make({ quota: { limit: 100, period: UTC_DAY } })
  drain(limiter, 't', 8)
  plans.set('t', { quota: { limit: 5, period: UTC_DAY } })
  limiter.refreshPolicy('t')
  const status = limiter.status('t')
  assert.deepEqual([status.quotaUsed, status.quotaRemaining, status.quotaLimit], [8, 0, 5])
  const denied = limiter.tryConsume('t')
  assert.deepEqual([denied.allowed, denied.retryAfterBasis], [false, 'wall-period'])
})

test('a tenant on 10 a month upgraded mid-month to 50 keeps its count (not a free month)', () => {
  const { clock, limiter, plans } = make({ capacity: 1000, refillPerSecond: 1000, quota: { limit: 10, period: UTC_MONTH } })
  drain(limiter, 'tenant', 10)
  assert.equal(limiter.tryConsume('tenant').allowed, false)
  clock.advance(86_400_000)
  plans.set('tenant', { quota: { limit: 50, period: UTC_MONTH } })
  limiter.refreshPolicy('tenant')
  const status = limiter.status('tenant')
  assert.deepEqual([status.quotaUsed, status.quotaRemaining], [10, 40])
  drain(limiter, 'tenant', 40)
  assert.equal(limiter.tryConsume('tenant').allowed, false)
})

test('a new period spec: the use carries into the new spec\'s open period', () => {
  const { limiter, plans } = make({ quota: { limit: 10, period: UTC_DAY } })
  drain(limiter, 't', 6)
  plans.set('t', { quota: { limit: 100, period: UTC_MONTH } })
  limiter.refreshPolicy('t')
  const status = limiter.status('t')
  assert.deepEqual([status.period.id, status.quotaUsed, status.quotaRemaining], ['2024-01', 6, 94])
})

test('quota to none drops the use, none to a quota starts at 0, no bucket to a bucket is full, initialTokens not applied', () => {
  const { limiter, plans } = make({ quota: { limit: 10, period: UTC_DAY } })
  drain(limiter, 'q', 4)
  plans.set('q', { quota: null })
  limiter.refreshPolicy('q')
  assert.deepEqual([limiter.status('q').quotaUsed, limiter.status('q').quotaLimit], [null, null])
  plans.set('q', { quota: { limit: 10, period: UTC_DAY }, initialTokens: 10 })
  limiter.refreshPolicy('q')
  const back = limiter.status('q')
  assert.deepEqual([back.quotaUsed, back.quotaRemaining, back.tokens], [0, 10, 6])

  const alone = make({ capacity: undefined, refillPerSecond: undefined, quota: { limit: 5, period: UTC_DAY } })
  drain(alone.limiter, 'x', 2)
  alone.plans.set('x', { capacity: 3, refillPerSecond: 1 })
  alone.limiter.refreshPolicy('x')
  const bucket = alone.limiter.status('x')
  assert.deepEqual([bucket.tokens, bucket.capacity, bucket.quotaUsed], [3, 3, 2])
  alone.plans.set('x', { capacity: undefined })
  alone.plans.delete('x')
  alone.limiter.refreshPolicy('x')
  assert.equal(alone.limiter.status('x').tokens, Infinity, 'a bucket to none: the bucket is gone')
})

test('n is checked against the capacity in force after the refresh', () => {
  const { limiter, plans } = make()
  drain(limiter, 'a', 1)
  plans.set('a', { capacity: 40 })
  limiter.refreshPolicy('a')
  assert.equal(limiter.tryConsume('a', 30).allowed, true)
  plans.set('a', { capacity: 2 })
  limiter.refreshPolicy('a')
  assert.throws(() => limiter.tryConsume('a', 3), { code: 'ERR_INVALID_ARG' })
})

test('a bad answer throws as for a new key, changes nothing, and the key stays marked', () => {
  const { limiter, plans, asked } = make({ quota: { limit: 10, period: UTC_DAY } })
  drain(limiter, 'a', 3)
  const before = limiter.status('a')
  limiter.refreshPolicy('a')
  plans.set('a', new Error('plans unavailable'))
  assert.throws(() => limiter.tryConsume('a'), (error) => error.code === 'ERR_INVALID_OPTION' && /policy\("a"\) threw/.test(error.message) && error.cause === plans.get('a'))
  plans.set('a', { capacity: -5 })
  assert.throws(() => limiter.tryConsume('a'), (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION' && /policy\("a"\)\.capacity/.test(error.message))
  plans.set('a', { quota: { limit: 1, period: { unit: 'day', timeZone: 'Nowhere/City' } } })
  assert.throws(() => limiter.status('a'), { code: 'ERR_UNKNOWN_TIME_ZONE' })
  plans.set('a', { bogus: 1 })
  assert.throws(() => limiter.refund('a'), { code: 'ERR_INVALID_OPTION' })
  const calls = asked.get('a')
  plans.delete('a')
  assert.deepEqual(limiter.status('a'), before, 'still the old limits and state, and asked again (still marked)')
  assert.equal(asked.get('a'), calls + 1)
  limiter.status('a')
  assert.equal(asked.get('a'), calls + 1, 'the good answer cleared the mark')
})

test('policyTtlMs: a held key is marked once that long has passed on the limiter\'s timeline since its policy was asked', () => {
  const { clock, limiter, asked } = make({ policyTtlMs: 60_000 })
  drain(limiter, 'a', 1)
  clock.advance(59_999)
  drain(limiter, 'a', 1)
  assert.equal(asked.get('a'), 1)
  clock.advance(1)
  drain(limiter, 'a', 1)
  assert.equal(asked.get('a'), 2)
  clock.advance(30_000)
  limiter.status('a')
  assert.equal(asked.get('a'), 2, 'counted from the last ask')
  clock.stepWall(3_600_000)
  limiter.status('a')
  assert.equal(asked.get('a'), 2, 'a wall step is not time on the timeline')
  clock.advance(30_000)
  limiter.status('a')
  assert.equal(asked.get('a'), 3)
})

test('policyTtlMs is a positive safe integer', () => {
  for (const bad of [0, -1, 1.5, 2 ** 53, NaN]) {
    assert.throws(() => make({ policyTtlMs: bad }), (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION' && /policyTtlMs/.test(error.message), String(bad))
  }
  assert.throws(() => make({ policyTtlMs: '1000' }), (error) => error instanceof TypeError && error.code === 'ERR_INVALID_OPTION' && /policyTtlMs/.test(error.message))
  assert.throws(() => make({ policyTtlMS: 1000 }), { code: 'ERR_INVALID_OPTION' })
  make({ policyTtlMs: 1 })
})

test('refreshPolicy checks its key like every call', () => {
  const { limiter } = make()
  assert.throws(() => limiter.refreshPolicy(''), { name: 'RangeError', code: 'ERR_INVALID_ARG' })
  assert.throws(() => limiter.refreshPolicy(5), { name: 'TypeError', code: 'ERR_INVALID_ARG' })
  assert.throws(() => limiter.refreshPolicy('x'.repeat(257)), { name: 'RangeError', code: 'ERR_INVALID_ARG' })
})

test('a JS clock: the refresh is decided on the call\'s readings', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const jsClock = { monotonicMs: () => clock.monotonicMs(), wallMs: () => clock.wallMs() }
  const plans = new Map()
  const limiter = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock: jsClock, policy: (key) => plans.get(key), policyTtlMs: 1000 })
  drain(limiter, 'a', 10)
  clock.advance(1000)
  plans.set('a', { capacity: 20 })
  assert.equal(limiter.tryConsume('a').tokens, 1 + 10 - 1)
})

test('keys with equal limits after a refresh share their policy; dropping keys lets go of old ones', () => {
  const { limiter, plans } = make({ maxKeys: 2 })
  drain(limiter, 'a', 1)
  plans.set('a', { capacity: 7 })
  limiter.refreshPolicy('a')
  assert.equal(limiter.status('a').capacity, 7)
  limiter.delete('a')
  drain(limiter, 'b', 1)
  drain(limiter, 'c', 1)
  assert.equal(limiter.status('a').capacity, 7, 'a key not held: what a fresh key would have')
})
