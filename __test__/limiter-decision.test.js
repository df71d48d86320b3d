'use strict'
// tryConsume(n = 1): Decision, status(), limiter.periodFor(). Quotas here are UTC 'day'
// quotas only (the calendar is tested elsewhere). Waits are computed by hand:
//   bucket: ceil((n - tokens) / refillPerSecond * 1000), basis 'monotonic-refill'
//   quota:  ceil(periodEnd - wallNow),                  basis 'wall-period' (also on a tie)

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, QuotaClockError } = require('..')

const DAY = 86_400_000
const DAY_START = Date.UTC(2024, 0, 15) // the manualClock default wall
const { NOON, manualLimiter } = require('./helpers/limiters') // DAY_START + 12 h
const NEXT_DAY = DAY_START + DAY
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

function near(actual, expected, message) {
  assert.ok(Math.abs(actual - expected) < 1e-9, `${message || 'value'}: expected ${expected}, got ${actual}`)
}

const make = manualLimiter

function assertDecisionShape(d) {
  assert.deepEqual(Object.keys(d).sort(), ['allowed', 'anomalies', 'quotaRemaining', 'retryAfterBasis', 'retryAfterMs', 'tokens'])
  assert.equal(typeof d.allowed, 'boolean')
  assert.equal(typeof d.retryAfterMs, 'number')
  assert.ok(Array.isArray(d.anomalies))
  assert.equal(typeof d.tokens, 'number')
}

// ---------------------------------------------------------------------------------------------

test('tryConsume(n = 1): n defaults to 1', () => {
  const { limiter } = make({ capacity: 10 })
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
  near(d.tokens, 9)
  const e = limiter.tryConsume(undefined)
  assert.equal(e.allowed, true)
  near(e.tokens, 8)
})

test('Decision when allowed: retryAfterMs 0, retryAfterBasis null, tokens left after the decision, anomalies empty', () => {
  const { limiter } = make({ capacity: 10 })
  const d = limiter.tryConsume(3)
  assertDecisionShape(d)
  assert.equal(d.allowed, true)
  assert.equal(d.retryAfterMs, 0)
  assert.equal(d.retryAfterBasis, null)
  near(d.tokens, 7)
  assert.deepEqual(d.anomalies, [])
})

test('quotaRemaining is null without a quota', () => {
  const { limiter } = make()
  assert.equal(limiter.tryConsume().quotaRemaining, null)
  const { clock, limiter: l2 } = make({ capacity: 1, initialTokens: 0 })
  void clock
  const denied = l2.tryConsume()
  assert.equal(denied.allowed, false)
  assert.equal(denied.quotaRemaining, null)
})

test('allowed only if the bucket holds ≥ n tokens: exactly n tokens is enough', () => {
  const { limiter } = make({ capacity: 10, initialTokens: 4 })
  const d = limiter.tryConsume(4)
  assert.equal(d.allowed, true)
  near(d.tokens, 0)
})

test('a bucket holding fewer than n tokens denies', () => {
  const { limiter } = make({ capacity: 10, initialTokens: 3.5 })
  const d = limiter.tryConsume(4)
  assert.equal(d.allowed, false)
  near(d.tokens, 3.5)
})

test('allowed: both are consumed (n tokens and n from the quota)', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 100, period: UTC_DAY } })
  const d = limiter.tryConsume(4)
  assert.equal(d.allowed, true)
  near(d.tokens, 6)
  assert.equal(d.quotaRemaining, 96)
  const s = limiter.status()
  assert.equal(s.quotaUsed, 4)
  assert.equal(s.quotaRemaining, 96)
  near(s.tokens, 6)
})

test("allowed only if the period's used + n ≤ limit: used + n = limit is allowed", () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 5, period: UTC_DAY } })
  assert.equal(limiter.tryConsume(2).allowed, true)
  const d = limiter.tryConsume(3)
  assert.equal(d.allowed, true)
  assert.equal(d.quotaRemaining, 0)
})

test('used + n > limit is denied even with tokens in the bucket; nothing is consumed', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume(4)
  const d = limiter.tryConsume(2)
  assert.equal(d.allowed, false)
  near(d.tokens, 6, 'no tokens consumed')
  assert.equal(d.quotaRemaining, 1, 'no quota consumed')
  assert.equal(limiter.status().quotaUsed, 4)
  assert.equal(limiter.tryConsume(1).allowed, true, 'the remaining 1 is still there')
})

test('denied by the bucket: nothing is consumed from the quota either', () => {
  const { limiter } = make({ capacity: 10, initialTokens: 1, quota: { limit: 5, period: UTC_DAY } })
  const d = limiter.tryConsume(2)
  assert.equal(d.allowed, false)
  near(d.tokens, 1)
  assert.equal(d.quotaRemaining, 5)
  assert.equal(limiter.status().quotaUsed, 0)
})

test("bucket wait: ceil((n - tokens) / refillPerSecond * 1000) with basis 'monotonic-refill'", () => {
  // n 2, tokens 0, refill 4/s: 2/4*1000 = 500
  const { limiter } = make({ capacity: 10, refillPerSecond: 4, initialTokens: 0 })
  const d = limiter.tryConsume(2)
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 500)
  assert.equal(d.retryAfterBasis, 'monotonic-refill')
  assert.equal(d.quotaRemaining, null)
})

test('bucket wait is rounded up: tokens 0.3, n 1, refill 3/s → ceil(233.33…) = 234', () => {
  const { clock, limiter } = make({ capacity: 10, refillPerSecond: 3, initialTokens: 0 })
  clock.advance(100) // 0.3 tokens
  const d = limiter.tryConsume(1)
  assert.equal(d.allowed, false)
  near(d.tokens, 0.3)
  assert.equal(d.retryAfterMs, Math.ceil(((1 - 0.3) / 3) * 1000))
  assert.equal(d.retryAfterMs, 234)
})

test('bucket wait with fractional refill: n 3, tokens 0, refill 0.7/s → ceil(4285.71…) = 4286', () => {
  const { limiter } = make({ capacity: 10, refillPerSecond: 0.7, initialTokens: 0 })
  const d = limiter.tryConsume(3)
  assert.equal(d.retryAfterMs, 4286)
  assert.equal(d.retryAfterBasis, 'monotonic-refill')
})

test('refills the bucket from real elapsed time, never above capacity', () => {
  const { clock, limiter } = make({ capacity: 10, refillPerSecond: 2, initialTokens: 0 })
  clock.advance(1500)
  near(limiter.tryConsume(3).tokens, 0)
  clock.advance(60_000)
  near(limiter.status().tokens, 10)
  near(limiter.tryConsume(10).tokens, 0)
})

test('after waiting the bucket retryAfterMs the same request is allowed', () => {
  const { clock, limiter } = make({ capacity: 10, refillPerSecond: 3, initialTokens: 0 })
  clock.advance(100)
  const d = limiter.tryConsume(2)
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, Math.ceil(((2 - 0.3) / 3) * 1000)) // 567
  clock.advance(d.retryAfterMs - 1)
  assert.equal(limiter.tryConsume(2).allowed, false, 'one ms early is still too early')
  clock.advance(1)
  assert.equal(limiter.tryConsume(2).allowed, true)
})

test("quota wait: ceil(periodEnd - wallNow) with basis 'wall-period'", () => {
  const wall = NEXT_DAY - 3_600_000 // 23:00 UTC
  const { limiter } = make({ capacity: 10, quota: { limit: 1, period: UTC_DAY }, wallMs: wall })
  assert.equal(limiter.tryConsume().allowed, true)
  const d = limiter.tryConsume()
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 3_600_000)
  assert.equal(d.retryAfterBasis, 'wall-period')
  assert.equal(d.quotaRemaining, 0)
})

test('quota wait is rounded up for a fractional wall reading: ceil(1000.25) = 1001', () => {
  const wall = NEXT_DAY - 1000.25
  const { limiter } = make({ capacity: 10, quota: { limit: 0, period: UTC_DAY }, wallMs: wall })
  const d = limiter.tryConsume()
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 1001)
  assert.equal(d.retryAfterBasis, 'wall-period')
})

test('after waiting the quota retryAfterMs the next period opens and the request is allowed', () => {
  const { clock, limiter } = make({ capacity: 10, quota: { limit: 2, period: UTC_DAY }, wallMs: NEXT_DAY - 5000 })
  limiter.tryConsume(2)
  const d = limiter.tryConsume()
  assert.equal(d.retryAfterMs, 5000)
  clock.advance(d.retryAfterMs - 1)
  assert.equal(limiter.tryConsume().allowed, false)
  clock.advance(1)
  const ok = limiter.tryConsume()
  assert.equal(ok.allowed, true)
  assert.equal(ok.quotaRemaining, 1)
})

test('retryAfterMs is the longer of the waits that apply: quota wait longer → wall-period', () => {
  const { limiter } = make({ capacity: 10, refillPerSecond: 4, initialTokens: 0, quota: { limit: 0, period: UTC_DAY }, wallMs: NEXT_DAY - 3_600_000 })
  const d = limiter.tryConsume(2) // bucket 500, quota 3 600 000
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 3_600_000)
  assert.equal(d.retryAfterBasis, 'wall-period')
})

test('retryAfterMs is the longer of the waits that apply: bucket wait longer → monotonic-refill', () => {
  // quota exhausted with 1000 ms to midnight; bucket needs 5 tokens at 1/s = 5000 ms
  const { limiter } = make({ capacity: 10, refillPerSecond: 1, initialTokens: 1, quota: { limit: 1, period: UTC_DAY }, wallMs: NEXT_DAY - 1000 })
  assert.equal(limiter.tryConsume(1).allowed, true) // bucket 0, quota used 1
  const d = limiter.tryConsume(5)
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 5000)
  assert.equal(d.retryAfterBasis, 'monotonic-refill')
})

test('only the waits that apply count: quota fine, bucket short → the bucket wait alone', () => {
  const { limiter } = make({ capacity: 10, refillPerSecond: 4, initialTokens: 0, quota: { limit: 100, period: UTC_DAY }, wallMs: NOON })
  const d = limiter.tryConsume(2)
  assert.equal(d.retryAfterMs, 500)
  assert.equal(d.retryAfterBasis, 'monotonic-refill')
  assert.equal(d.quotaRemaining, 100)
})

test('only the waits that apply count: bucket fine, quota exhausted → the quota wait alone', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 1, period: UTC_DAY }, wallMs: NEXT_DAY - 200 })
  limiter.tryConsume()
  const d = limiter.tryConsume()
  assert.equal(d.retryAfterMs, 200)
  assert.equal(d.retryAfterBasis, 'wall-period')
})

test("on a tie the basis is 'wall-period'", () => {
  // bucket: n 2, tokens 0, 4/s → 500; quota: limit 0, 500 ms to midnight → 500
  const { limiter } = make({ capacity: 10, refillPerSecond: 4, initialTokens: 0, quota: { limit: 0, period: UTC_DAY }, wallMs: NEXT_DAY - 500 })
  const d = limiter.tryConsume(2)
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 500)
  assert.equal(d.retryAfterBasis, 'wall-period')
})

test("on a tie after rounding up the basis is 'wall-period' (bucket ceil(333.33…) = 334, quota ceil(333.5) = 334)", () => {
  const { limiter } = make({ capacity: 10, refillPerSecond: 3, initialTokens: 0, quota: { limit: 0, period: UTC_DAY }, wallMs: NEXT_DAY - 333.5 })
  const d = limiter.tryConsume(1)
  assert.equal(d.retryAfterMs, 334)
  assert.equal(d.retryAfterBasis, 'wall-period')
})

test('a request larger than the quota limit (limit 0) is denied with the quota wait', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 0, period: UTC_DAY }, wallMs: NOON })
  const d = limiter.tryConsume()
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, NEXT_DAY - NOON)
  assert.equal(d.retryAfterBasis, 'wall-period')
  assert.equal(d.quotaRemaining, 0)
  near(d.tokens, 10, 'nothing consumed')
})

test('a request larger than the quota limit (n 5 > limit 3) is denied with the quota wait', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 3, period: UTC_DAY }, wallMs: NOON })
  const d = limiter.tryConsume(5)
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, NEXT_DAY - NOON)
  assert.equal(d.retryAfterBasis, 'wall-period')
  assert.equal(d.quotaRemaining, 3)
})

test('quotaRemaining is limit − used in the open period; a new period starts at the full limit', () => {
  const { clock, limiter } = make({ capacity: 100, refillPerSecond: 1000, quota: { limit: 10, period: UTC_DAY }, wallMs: NEXT_DAY - 10_000 })
  assert.equal(limiter.tryConsume(3).quotaRemaining, 7)
  assert.equal(limiter.tryConsume(2).quotaRemaining, 5)
  clock.advance(20_000) // into the next UTC day
  const d = limiter.tryConsume(1)
  assert.equal(d.quotaRemaining, 9)
  assert.deepEqual(d.anomalies, [], 'crossing one boundary while awake is no anomaly')
})

test('each call takes one monotonic and one wall reading (and no elapsed-realtime reading when they agree)', () => {
  const calls = { m: 0, w: 0, er: 0 }
  let m = 0
  let w = NOON
  const clock = {
    monotonicMs: () => (calls.m++, m),
    wallMs: () => (calls.w++, w),
    elapsedRealtimeMs: () => (calls.er++, m),
  }
  const limiter = new QuotaClock({ capacity: 1000, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 1000, period: UTC_DAY } })
  const base = { ...calls }
  assert.equal(base.er, 1, 'the reader is called once at construction for its baseline')
  for (let i = 0; i < 10; i++) {
    m += 5
    w += 5
    limiter.tryConsume(i % 2 === 0 ? 1 : 2) // allowed and, later, some denied
  }
  assert.equal(calls.m - base.m, 10)
  assert.equal(calls.w - base.w, 10)
  assert.equal(calls.er - base.er, 0)
  limiter.status()
  assert.equal(calls.m - base.m, 11, 'status() reads the clocks like tryConsume')
  assert.equal(calls.w - base.w, 11)
  assert.equal(calls.er - base.er, 0)
})

test('the elapsed-realtime reader is read only when the readings disagree (dw > dm + tol)', () => {
  const calls = { er: 0 }
  let m = 0
  let w = NOON
  let er = 0
  const clock = { monotonicMs: () => m, wallMs: () => w, elapsedRealtimeMs: () => (calls.er++, er) }
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  w += 10_000
  er += 10_000 // a 10 s suspend
  const d = limiter.tryConsume()
  assert.equal(calls.er, 2)
  assert.deepEqual(d.anomalies.map((a) => a.kind), ['suspend'])
})

test('n is a positive safe integer ≤ capacity, else RangeError with code ERR_INVALID_ARG (nothing consumed)', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 100, period: UTC_DAY } })
  for (const n of [0, -1, 1.5, 11, NaN, Infinity, 2 ** 53]) {
    assert.throws(() => limiter.tryConsume(n), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG', `n = ${n}`)
  }
  const s = limiter.status()
  near(s.tokens, 10)
  assert.equal(s.quotaUsed, 0)
  assert.equal(limiter.tryConsume(10).allowed, true, 'n = capacity is valid')
})

test('a fractional n is refused on the native fast paths too (a native clock, a held key): the contract\'s RangeError, nothing consumed', () => {
  const { QuotaClock: Limiter, KeyedQuotaClock, systemClock } = require('..')
  const limits = { capacity: 10, refillPerSecond: 1e-9, suspendPolicy: 'ignore', clock: systemClock(), quota: { limit: 100, period: UTC_DAY } }
  const one = new Limiter(limits)
  assert.equal(one.tryConsume(1).allowed, true)
  for (const n of [1.5, 2.25, 9.999]) {
    assert.throws(() => one.tryConsume(n), { name: 'RangeError', code: 'ERR_INVALID_ARG', message: `n must be a positive safe integer no larger than capacity (10); received ${n}` })
  }
  assert.equal(one.status().quotaUsed, 1)
  const keyed = new KeyedQuotaClock(limits)
  assert.equal(keyed.tryConsume('k').allowed, true) // held: its next calls take the quiet path
  assert.throws(() => keyed.tryConsume('k', 1.5), { name: 'RangeError', code: 'ERR_INVALID_ARG', message: "n must be a positive safe integer; received 1.5" })
  assert.equal(keyed.status('k').quotaUsed, 1)
})

// ---------------------------------------------------------------------------------------------
// status()

test('status() → { tokens, quotaUsed, quotaRemaining, period, capacity, refillPerSecond, quotaLimit } without consuming', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 7, period: UTC_DAY } })
  limiter.tryConsume(2)
  const s1 = limiter.status()
  const s2 = limiter.status()
  assert.deepEqual(Object.keys(s1).sort(), ['capacity', 'period', 'quotaLimit', 'quotaRemaining', 'quotaUsed', 'refillPerSecond', 'tokens'])
  near(s1.tokens, 8)
  assert.equal(s1.quotaUsed, 2)
  assert.equal(s1.quotaRemaining, 5)
  assert.deepEqual(s2, s1, 'status() consumes nothing')
  assert.equal(typeof s1.period.id, 'string') // ids are the calendar's business; only UTC day bounds here
  assert.equal(s1.period.startMs, DAY_START)
  assert.equal(s1.period.endMs, NEXT_DAY)
  assert.equal(s1.period.startKind, 'exact')
  assert.equal(s1.period.timeZone, 'UTC')
})

test('status(): without a quota the four quota fields are null', () => {
  const { limiter } = make({ capacity: 10 })
  const s = limiter.status()
  near(s.tokens, 10)
  assert.equal(s.quotaUsed, null)
  assert.equal(s.quotaRemaining, null)
  assert.equal(s.period, null)
  assert.equal(s.quotaLimit, null)
})

test('status() reads and reconciles the clocks like tryConsume (it refills from elapsed time)', () => {
  const { clock, limiter } = make({ capacity: 10, refillPerSecond: 2, initialTokens: 0 })
  clock.advance(1500)
  near(limiter.status().tokens, 3)
})

test('status() reconciles like tryConsume: its anomalies go to onAnomaly (and are not raised again)', async () => {
  const seen = []
  const { clock, limiter } = make({ capacity: 10, onAnomaly: (a) => seen.push(a) })
  clock.stepWall(-60_000)
  const s = limiter.status()
  assert.equal(typeof s.tokens, 'number')
  for (const deadline = Date.now() + 10_000; seen.length === 0 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 10))
  assert.deepEqual(seen.map((a) => a.kind), ['wall-step-back'])
  assert.deepEqual(limiter.tryConsume().anomalies, [], 'status() re-anchored the readings')
})

test('status() reports the period now open after a boundary is crossed', () => {
  const { clock, limiter } = make({ capacity: 10, quota: { limit: 3, period: UTC_DAY }, wallMs: NEXT_DAY - 1000 })
  limiter.tryConsume(3)
  clock.advance(1000)
  const s = limiter.status()
  assert.equal(s.period.startMs, NEXT_DAY)
  assert.equal(s.period.endMs, NEXT_DAY + DAY)
  assert.equal(s.quotaUsed, 0)
  assert.equal(s.quotaRemaining, 3)
})

test('status() throws the same clock errors as tryConsume (monotonic regression)', () => {
  const { clock, limiter } = make()
  clock.set({ monotonicMs: -1 })
  assert.throws(() => limiter.status(), (e) => e instanceof QuotaClockError && e.code === 'ERR_MONOTONIC_REGRESSION')
})

// ---------------------------------------------------------------------------------------------
// limiter.periodFor()

test("limiter.periodFor(wallMs) applies the limiter's own period spec", () => {
  const { limiter } = make({ quota: { limit: 1, period: UTC_DAY } })
  const wall = Date.UTC(2024, 2, 3, 5, 6, 7)
  const p = limiter.periodFor(wall)
  assert.equal(typeof p.id, 'string')
  assert.equal(p.startMs, Date.UTC(2024, 2, 3))
  assert.equal(p.endMs, Date.UTC(2024, 2, 4))
  assert.equal(p.startKind, 'exact')
  assert.equal(p.timeZone, 'UTC')
})

test('limiter.periodFor(wallMs) does not read the clock or change the limiter', () => {
  const { limiter } = make({ capacity: 10, quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume(2)
  limiter.periodFor(Date.UTC(2030, 0, 1))
  const s = limiter.status()
  assert.equal(s.period.startMs, DAY_START)
  assert.equal(s.quotaUsed, 2)
})

test('limiter.periodFor(wallMs) is null without a quota', () => {
  const { limiter } = make()
  assert.equal(limiter.periodFor(Date.UTC(2024, 0, 1)), null)
})
