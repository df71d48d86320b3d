'use strict'
// QuotaClock's status and refund: status() carries the limits in force, and refund(n = 1) gives
// back what a tryConsume took (as KeyedQuotaClock does for one key).

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, QuotaClockError, manualClock } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

function make(options = {}) {
  const clock = manualClock({ monotonicMs: 0, wallMs: options.wallMs ?? NOON })
  delete options.wallMs
  return { clock, limiter: new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, ...options }) }
}

test('status() reports the limits in force: capacity, refillPerSecond, quotaLimit', () => {
  const { limiter } = make({ capacity: 7, refillPerSecond: 0.5, quota: { limit: 42, period: UTC_DAY } })
  const s = limiter.status()
  assert.equal(s.capacity, 7)
  assert.equal(s.refillPerSecond, 0.5)
  assert.equal(s.quotaLimit, 42)
  assert.equal(make({ capacity: 3 }).limiter.status().quotaLimit, null, 'null without a quota')
  assert.equal(make({ quota: { limit: 0, period: UTC_DAY } }).limiter.status().quotaLimit, 0, 'a limit of 0 is a limit')
})

test('refund(n) gives back n tokens and n quota units', () => {
  const { limiter } = make({ quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume(3)
  assert.equal(limiter.refund(2), undefined)
  const s = limiter.status()
  assert.equal(s.tokens, 9)
  assert.equal(s.quotaUsed, 1)
  assert.equal(s.quotaRemaining, 4)
})

test('refund() defaults to 1', () => {
  const { limiter } = make({ quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume(2)
  limiter.refund()
  const s = limiter.status()
  assert.equal(s.tokens, 9)
  assert.equal(s.quotaUsed, 1)
})

test('refund caps tokens at capacity and never takes the quota below zero', () => {
  const { limiter } = make({ quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume(1)
  limiter.refund(1000) // n may exceed capacity: the bucket caps what comes back
  const s = limiter.status()
  assert.equal(s.tokens, 10)
  assert.equal(s.quotaUsed, 0)
  assert.equal(s.quotaRemaining, 5)
})

test('refund makes a denied request possible again (a refund across limits)', () => {
  const { limiter } = make({ capacity: 2, initialTokens: 0, quota: { limit: 1, period: UTC_DAY } })
  const { limiter: other } = make({ capacity: 1, initialTokens: 1 })
  other.tryConsume()
  other.refund()
  assert.equal(other.tryConsume().allowed, true)
  assert.equal(limiter.tryConsume().allowed, false)
})

test('refund reads and reconciles the clocks like tryConsume (refill, re-anchoring, anomalies to onAnomaly)', async () => {
  const seen = []
  const { clock, limiter } = make({ capacity: 10, refillPerSecond: 2, initialTokens: 0, onAnomaly: (a) => seen.push(a) })
  clock.advance(1500)
  clock.stepWall(-60_000)
  limiter.refund(1)
  assert.equal(limiter.status().tokens, 4, '3 refilled from elapsed time, then 1 given back')
  for (const deadline = Date.now() + 10_000; seen.length === 0 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10))
  assert.deepEqual(seen.map((a) => a.kind), ['wall-step-back'])
  assert.deepEqual(limiter.tryConsume().anomalies, [], 'refund re-anchored the readings')
})

test('refund gives back only into the open period: after a boundary the new period starts at zero use', () => {
  const { clock, limiter } = make({ quota: { limit: 3, period: UTC_DAY }, wallMs: Date.UTC(2024, 0, 16) - 1000 })
  limiter.tryConsume(3)
  clock.advance(1000)
  limiter.refund(2)
  const s = limiter.status()
  assert.equal(s.period.id, '2024-01-16')
  assert.equal(s.quotaUsed, 0)
})

test('refund throws the clock errors of tryConsume and gives nothing back', () => {
  const { clock, limiter } = make({ initialTokens: 5 })
  clock.set({ monotonicMs: -1 })
  assert.throws(() => limiter.refund(1), (e) => e instanceof QuotaClockError && e.code === 'ERR_MONOTONIC_REGRESSION')
  const { clock: c2, limiter: l2 } = make({ initialTokens: 5, quota: { limit: 5, period: UTC_DAY } })
  c2.set({ wallMs: Date.UTC(2019, 0, 1) })
  assert.throws(() => l2.refund(1), (e) => e instanceof QuotaClockError && e.code === 'ERR_IMPLAUSIBLE_WALL_CLOCK')
  c2.set({ wallMs: NOON })
  assert.equal(l2.status().tokens, 5)
})

test('refund(n): n must be a positive safe integer (RangeError ERR_INVALID_ARG), and nothing changes', () => {
  const { limiter } = make({ initialTokens: 5 })
  for (const bad of [0, -1, 1.5, NaN, Infinity, 2 ** 53, '1', null, {}]) {
    assert.throws(() => limiter.refund(bad), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG' && /n must be a positive safe integer/.test(e.message), `refund(${String(bad)})`)
  }
  assert.equal(limiter.status().tokens, 5)
})
