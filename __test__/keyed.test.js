'use strict'
// KeyedQuotaClock, sentence by sentence, on manual clocks.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { KeyedQuotaClock, QuotaClock, QuotaClockError, manualClock } = require('..')

const DAY = 86_400_000
const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

function make(options = {}) {
  const clock = options.clock ?? manualClock({ monotonicMs: 0, wallMs: NOON })
  const limiter = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, ...options })
  return { clock, limiter }
}

const isCode = (Class, code) => (error) => error instanceof Class && error.code === code

async function settle(seen, count = 1) {
  // Until `count` were delivered (a generous deadline for a loaded machine), then a little longer.
  const deadline = Date.now() + 10_000
  while (seen.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  await new Promise((resolve) => setTimeout(resolve, 20))
}

// ---------------------------------------------------------------------------------------------
// The class and its options

test('QuotaClock\'s options with the same names, checks and errors; the limits are every key\'s default', () => {
  assert.throws(() => new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1 }), isCode(TypeError, 'ERR_INVALID_OPTION'), 'suspendPolicy has no default')
  assert.throws(() => new KeyedQuotaClock({ capacity: 0, refillPerSecond: 1, suspendPolicy: 'ignore' }), isCode(RangeError, 'ERR_INVALID_OPTION'))
  assert.throws(() => new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendpolicy: 'ignore', suspendPolicy: 'ignore' }), (e) => e.code === 'ERR_INVALID_OPTION' && /suspendpolicy/.test(e.message))
  assert.throws(() => make({ quota: { limit: 1, period: { unit: 'hour', timeZone: 'UTC' } } }), isCode(RangeError, 'ERR_SUB_DAY_PERIOD'))
  assert.throws(() => make({ quota: { limit: 1, period: { unit: 'day', timeZone: 'Nowhere/City' } } }), isCode(RangeError, 'ERR_UNKNOWN_TIME_ZONE'))
  const { limiter } = make({ capacity: 4, refillPerSecond: 2, initialTokens: 3, quota: { limit: 9, period: UTC_DAY } })
  const s = limiter.status('any')
  assert.deepEqual([s.capacity, s.refillPerSecond, s.tokens, s.quotaLimit], [4, 2, 3, 9])
})

test('policy must be a function; maxKeys a positive safe integer (default 1,000,000); restore a Uint8Array', () => {
  assert.throws(() => make({ policy: {} }), isCode(TypeError, 'ERR_INVALID_OPTION'))
  assert.throws(() => make({ maxKeys: '5' }), isCode(TypeError, 'ERR_INVALID_OPTION'))
  for (const bad of [0, -1, 1.5, 2 ** 53, NaN]) assert.throws(() => make({ maxKeys: bad }), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_OPTION' && /maxKeys/.test(e.message))
  assert.throws(() => make({ restore: [1, 2, 3] }), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_OPTION' && /restore/.test(e.message))
  const { limiter } = make({ maxKeys: undefined, policy: undefined, restore: undefined })
  assert.equal(limiter.size, 0)
})

// ---------------------------------------------------------------------------------------------
// Keys

test('keys: a string of 1 to 256 UTF-16 code units; TypeError/RangeError ERR_INVALID_ARG before any clock is read', () => {
  let reads = 0
  const clock = { monotonicMs: () => (reads++, 0), wallMs: () => (reads++, NOON) }
  const { limiter } = make({ clock })
  const before = reads
  for (const method of ['tryConsume', 'refund', 'status', 'delete']) {
    for (const bad of [undefined, 42, null, {}, Symbol('k')]) assert.throws(() => limiter[method](bad), isCode(TypeError, 'ERR_INVALID_ARG'), `${method}(${String(bad)})`)
    assert.throws(() => limiter[method](''), isCode(RangeError, 'ERR_INVALID_ARG'))
    assert.throws(() => limiter[method]('x'.repeat(257)), isCode(RangeError, 'ERR_INVALID_ARG'))
  }
  assert.equal(reads, before, 'no clock was read')
  assert.equal(limiter.size, 0, 'nothing changed')
  assert.equal(limiter.tryConsume('x'.repeat(256)).allowed, true)
  assert.equal(limiter.tryConsume('😀'.repeat(128)).allowed, true, '256 code units (128 surrogate pairs)')
})

test('keys are compared exactly: lone surrogates, Latin-1 and long keys are distinct keys', () => {
  const { limiter } = make({ capacity: 1 })
  const keys = ['\ud800', '\ufffd', 'é', 'e\u0301', 'a'.repeat(200), 'a'.repeat(199) + 'b', '東京', 'tenant-1']
  for (const key of keys) assert.equal(limiter.tryConsume(key).allowed, true, JSON.stringify(key))
  for (const key of keys) assert.equal(limiter.tryConsume(key).allowed, false, JSON.stringify(key))
  assert.equal(limiter.size, keys.length)
})

// ---------------------------------------------------------------------------------------------
// One clock, one reconciliation

test('every call takes one monotonic and one wall reading, whatever its key', () => {
  const calls = { m: 0, w: 0 }
  const inner = manualClock({ wallMs: NOON })
  const clock = { monotonicMs: () => (calls.m++, inner.monotonicMs()), wallMs: () => (calls.w++, inner.wallMs()) }
  const { limiter } = make({ clock })
  const base = { ...calls }
  limiter.tryConsume('a')
  limiter.tryConsume('b')
  limiter.refund('c')
  limiter.status('d')
  assert.deepEqual([calls.m - base.m, calls.w - base.w], [4, 4])
})

test('a clock anomaly is raised once for the whole limiter, on the decision of the call that saw it and through onAnomaly', async () => {
  const seen = []
  const { clock, limiter } = make({ onAnomaly: (a) => seen.push(a) })
  for (const key of ['a', 'b', 'c']) limiter.tryConsume(key)
  clock.advance(1000)
  clock.stepWall(-60_000)
  const first = limiter.tryConsume('b')
  assert.deepEqual(first.anomalies.map((a) => a.kind), ['wall-step-back'])
  assert.equal(first.anomalies[0].creditedMs, 1000, "creditedMs is what the limiter's timeline was credited")
  assert.deepEqual(limiter.tryConsume('a').anomalies, [], 'not once per key')
  assert.deepEqual(limiter.tryConsume('c').anomalies, [])
  await settle(seen)
  assert.deepEqual(seen.map((a) => a.kind), ['wall-step-back'])
})

test("a key's bucket refills by the time credited since that key's previous call, capped at its capacity", () => {
  const { clock, limiter } = make({ capacity: 5, refillPerSecond: 2, initialTokens: 0 })
  limiter.tryConsume('a')
  clock.advance(1000)
  limiter.tryConsume('b')
  clock.advance(500)
  assert.equal(limiter.tryConsume('a').tokens, 2, '1.5 s since a was last looked at: 3 tokens, one taken')
  assert.equal(limiter.tryConsume('b').tokens, 0, '0.5 s since b was held: 1 token, taken')
  clock.advance(60_000)
  assert.equal(limiter.status('a').tokens, 5, 'capped at capacity')
  // A suspend-policy 'credit' jump is credited to the timeline, and so to every key.
  const { clock: c2, limiter: l2 } = make({ capacity: 100, initialTokens: 0, suspendPolicy: 'credit' })
  l2.tryConsume('x')
  c2.suspend(30_000)
  assert.deepEqual(l2.tryConsume('y').anomalies.map((a) => a.kind), ['ambiguous-wall-jump'])
  assert.equal(l2.status('x').tokens, 30)
})

test('the regression latch and the reconciliation errors are the limiter\'s, whatever the key', () => {
  const { clock, limiter } = make()
  limiter.tryConsume('a')
  clock.set({ monotonicMs: -5 })
  assert.throws(() => limiter.tryConsume('a'), isCode(QuotaClockError, 'ERR_MONOTONIC_REGRESSION'))
  assert.throws(() => limiter.tryConsume('b'), isCode(QuotaClockError, 'ERR_MONOTONIC_REGRESSION'))
  assert.throws(() => limiter.status('c'), isCode(QuotaClockError, 'ERR_MONOTONIC_REGRESSION'))
  assert.throws(() => limiter.refund('a'), isCode(QuotaClockError, 'ERR_MONOTONIC_REGRESSION'))
  assert.equal(limiter.size, 1, 'b was not held')

  const { clock: c2, limiter: l2 } = make({ suspendPolicy: 'refuse', initialTokens: 0 })
  l2.tryConsume('a')
  c2.advance(1000)
  c2.suspend(3_600_000)
  assert.throws(() => l2.tryConsume('b'), isCode(QuotaClockError, 'ERR_AMBIGUOUS_WALL_JUMP'))
  assert.equal(l2.tryConsume('a').tokens, 0, 'the monotonic 1 s was credited, then the call refused; the next proceeds')
})

test('a wall reading before earliestPlausibleWallMs throws for a key with a quota and changes nothing', () => {
  const clock = manualClock({ wallMs: NOON })
  const { limiter } = make({ clock, initialTokens: 5, quota: { limit: 5, period: UTC_DAY }, policy: (key) => (key === 'free' ? { quota: null } : undefined) })
  limiter.tryConsume('a')
  clock.set({ wallMs: 0 })
  assert.throws(() => limiter.tryConsume('a'), isCode(QuotaClockError, 'ERR_IMPLAUSIBLE_WALL_CLOCK'))
  assert.throws(() => limiter.tryConsume('b'), isCode(QuotaClockError, 'ERR_IMPLAUSIBLE_WALL_CLOCK'))
  assert.equal(limiter.size, 1)
  assert.equal(limiter.tryConsume('free').allowed, true, 'a key without a quota does not ask the calendar')
})

// ---------------------------------------------------------------------------------------------
// New keys and policy

test('a key first held starts with its initialTokens and no quota use', () => {
  const { limiter } = make({ initialTokens: 4, quota: { limit: 7, period: UTC_DAY } })
  const d = limiter.tryConsume('new', 2)
  assert.equal(d.tokens, 2)
  assert.equal(d.quotaRemaining, 5)
})

test('policy(key) is called synchronously when a key is first held, again if it was dropped and comes back, never for a held key', () => {
  const asked = []
  const { limiter } = make({ policy: (key) => (asked.push(key), key === 'vip' ? { capacity: 100 } : undefined) })
  assert.equal(limiter.tryConsume('vip', 50).tokens, 50)
  assert.deepEqual(asked, ['vip'])
  limiter.tryConsume('vip')
  limiter.refund('vip')
  limiter.status('vip')
  assert.deepEqual(asked, ['vip'], 'not on the path of a held key')
  assert.equal(limiter.delete('vip'), true)
  assert.equal(limiter.tryConsume('vip').tokens, 99)
  assert.deepEqual(asked, ['vip', 'vip'])
  assert.throws(() => limiter.tryConsume('plain', 11), isCode(RangeError, 'ERR_INVALID_ARG'), 'plain keys keep the default capacity')
})

test('KeyPolicy: each field overrides the default; quota: null means none', () => {
  const plans = {
    free: { capacity: 2, refillPerSecond: 0.5, quota: { limit: 3, period: { unit: 'month', timeZone: 'America/Los_Angeles' } } },
    internal: { quota: null },
    starter: { initialTokens: 1 },
  }
  const { limiter } = make({ quota: { limit: 1000, period: UTC_DAY }, policy: (key) => plans[key.split(':')[0]] })
  const free = limiter.status('free:1')
  assert.deepEqual([free.capacity, free.refillPerSecond, free.quotaLimit, free.tokens, free.period.timeZone, free.period.id], [2, 0.5, 3, 2, 'America/Los_Angeles', '2024-01'])
  const internal = limiter.tryConsume('internal:1')
  assert.equal(internal.quotaRemaining, null)
  assert.equal(limiter.status('internal:1').quotaLimit, null)
  const starter = limiter.tryConsume('starter:1')
  assert.deepEqual([starter.tokens, starter.quotaRemaining], [0, 999])
  assert.equal(limiter.status('other').capacity, 10)
})

test('a policy that throws: TypeError ERR_INVALID_OPTION naming the key, the thrown error as cause; the key is not held', () => {
  const boom = new Error('plans unavailable')
  const { limiter } = make({ policy: (key) => { if (key === 'bad') throw boom } })
  assert.throws(() => limiter.tryConsume('bad'), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_OPTION' && e.message.includes('"bad"') && e.cause === boom)
  assert.throws(() => limiter.status('bad'), (e) => e.code === 'ERR_INVALID_OPTION' && e.cause === boom)
  assert.equal(limiter.size, 0)
  // Anything at all may be thrown.
  const { limiter: l2 } = make({ policy: () => { throw Symbol('odd') } })
  assert.throws(() => l2.tryConsume('k'), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_OPTION' && typeof e.cause === 'symbol')
})

test('an invalid KeyPolicy: TypeError/RangeError with the option-error code naming the key and the field; the key is not held', () => {
  const cases = [
    [{ capacity: 'big' }, TypeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.capacity/],
    [{ capacity: -1 }, RangeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.capacity/],
    [{ refillPerSecond: 0 }, RangeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.refillPerSecond/],
    [{ initialTokens: 11 }, RangeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.initialTokens/],
    [{ capcity: 5 }, TypeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.capcity.*capacity/],
    [{ quota: { limit: 1.5, period: UTC_DAY } }, RangeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.quota\.limit/],
    [{ quota: { limit: 1, period: { unit: 'hour', timeZone: 'UTC' } } }, RangeError, 'ERR_SUB_DAY_PERIOD', /policy\("k"\)\.quota\.period\.unit/],
    [{ quota: { limit: 1, period: { unit: 'day', timeZone: 'Mars/Olympus' } } }, RangeError, 'ERR_UNKNOWN_TIME_ZONE', /policy\("k"\)\.quota\.period\.timeZone/],
    [{ quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC', anchorDay: 2 } } }, RangeError, 'ERR_INVALID_OPTION', /policy\("k"\)\.quota\.period\.anchorDay/],
    [42, TypeError, 'ERR_INVALID_OPTION', /policy\("k"\)/],
  ]
  for (const [returned, Class, code, pattern] of cases) {
    const { limiter } = make({ policy: () => returned })
    assert.throws(() => limiter.tryConsume('k'), (e) => e instanceof Class && e.code === code && pattern.test(e.message), JSON.stringify(returned))
    assert.equal(limiter.size, 0)
  }
})

test('order of checks: the key, n ≥ 1, policy for a new key, n against that key\'s capacity, then the clock readings', () => {
  let asked = 0
  let reads = 0
  const inner = manualClock({ wallMs: NOON })
  const clock = { monotonicMs: () => (reads++, inner.monotonicMs()), wallMs: () => inner.wallMs() }
  const { limiter } = make({ clock, policy: () => (asked++, { capacity: 3 }) })
  const base = reads
  assert.throws(() => limiter.tryConsume(5, 0), isCode(TypeError, 'ERR_INVALID_ARG'), 'the key first')
  assert.throws(() => limiter.tryConsume('k', 0), isCode(RangeError, 'ERR_INVALID_ARG'), 'then n ≥ 1')
  assert.equal(asked, 0)
  assert.throws(() => limiter.tryConsume('k', 4), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG' && /3/.test(e.message), "then the key's capacity")
  assert.equal(asked, 1, 'policy was asked before the capacity check')
  assert.equal(reads, base, 'no clock read yet')
  assert.equal(limiter.size, 0)
  assert.equal(limiter.tryConsume('k', 3).allowed, true)
  assert.equal(reads, base + 1)
})

test('policy may call back into the limiter', () => {
  const { limiter } = make({ policy: (key) => { if (key !== 'inner') limiter.tryConsume('inner'); return undefined } })
  assert.equal(limiter.tryConsume('outer').tokens, 9)
  assert.equal(limiter.size, 2)
})

// ---------------------------------------------------------------------------------------------
// Quotas per key, periods per spec

test('keys with equal specs share one open period: period-skip once per spec, with periodId', async () => {
  const seen = []
  const tokyo = { quota: { limit: 5, period: { unit: 'day', timeZone: 'Asia/Tokyo' } } }
  const { clock, limiter } = make({ suspendPolicy: 'credit', quota: { limit: 5, period: UTC_DAY }, policy: (key) => (key.startsWith('jp') ? tokyo : undefined), onAnomaly: (a) => seen.push(a) })
  for (const key of ['a', 'b', 'jp1', 'jp2']) limiter.tryConsume(key, 2)
  clock.stepWall(3 * DAY)
  const a = limiter.tryConsume('a')
  assert.deepEqual(a.anomalies.map((x) => x.kind), ['ambiguous-wall-jump', 'period-skip'])
  assert.equal(a.anomalies[1].skipped, 2)
  assert.equal(a.anomalies[1].periodId, '2024-01-18')
  assert.equal(a.quotaRemaining, 4, 'use of an ended period is gone: the open period starts at zero use')
  assert.deepEqual(limiter.tryConsume('b').anomalies, [], 'once per spec, not per key')
  assert.equal(limiter.status('b').quotaUsed, 1)
  const jp = limiter.tryConsume('jp1')
  assert.deepEqual(jp.anomalies.map((x) => x.kind), ['period-skip'], "Tokyo's period moves when a call for one of its keys reads the clock")
  assert.deepEqual(limiter.tryConsume('jp2').anomalies, [])
  await settle(seen, 3)
  assert.deepEqual(seen.map((x) => x.kind), ['ambiguous-wall-jump', 'period-skip', 'period-skip'])
})

test('a backwards step across a boundary holds the spec\'s period for all its keys; period-regression once per spec', () => {
  const clock = manualClock({ wallMs: Date.UTC(2024, 0, 15, 0, 0, 30) })
  const { limiter } = make({ clock, quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume('a', 2)
  limiter.tryConsume('b', 1)
  clock.stepWall(-3_600_000)
  const a = limiter.tryConsume('a')
  assert.deepEqual(a.anomalies.map((x) => x.kind), ['wall-step-back', 'period-regression'])
  assert.equal(a.anomalies[1].periodId, '2024-01-15')
  assert.equal(a.quotaRemaining, 2, 'held with its consumption')
  const b = limiter.tryConsume('b')
  assert.deepEqual(b.anomalies, [])
  assert.equal(b.quotaRemaining, 3)
})

test('a quota denial waits until the key\'s own period ends', () => {
  const { limiter } = make({ quota: { limit: 1, period: UTC_DAY }, policy: (k) => (k === 'la' ? { quota: { limit: 1, period: { unit: 'day', timeZone: 'America/Los_Angeles' } } } : undefined) })
  limiter.tryConsume('utc')
  limiter.tryConsume('la')
  const utc = limiter.tryConsume('utc')
  const la = limiter.tryConsume('la')
  assert.deepEqual([utc.allowed, utc.retryAfterBasis, utc.retryAfterMs], [false, 'wall-period', Date.UTC(2024, 0, 16) - NOON])
  assert.deepEqual([la.allowed, la.retryAfterBasis, la.retryAfterMs], [false, 'wall-period', Date.UTC(2024, 0, 16, 8) - NOON])
})

// ---------------------------------------------------------------------------------------------
// refund, status, delete, size

test('refund(key, n) reconciles, then gives back n tokens (capped) and n quota units (never below zero)', () => {
  const { clock, limiter } = make({ quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume('a', 3)
  limiter.refund('a', 2)
  assert.deepEqual([limiter.status('a').tokens, limiter.status('a').quotaUsed], [9, 1])
  limiter.refund('a', 40)
  assert.deepEqual([limiter.status('a').tokens, limiter.status('a').quotaUsed], [10, 0])
  limiter.tryConsume('a', 2)
  clock.advance(DAY)
  limiter.refund('a', 2)
  assert.equal(limiter.status('a').quotaUsed, 0, 'use of an ended period is not given back into the open one')
  for (const bad of [0, 1.5, -1, '1', NaN]) assert.throws(() => limiter.refund('a', bad), isCode(RangeError, 'ERR_INVALID_ARG'))
})

test('refund of a key not held: the clocks are reconciled and nothing else happens (no policy call)', async () => {
  const seen = []
  let asked = 0
  const { clock, limiter } = make({ policy: () => (asked++, undefined), onAnomaly: (a) => seen.push(a) })
  clock.stepWall(-10_000)
  assert.equal(limiter.refund('ghost', 3), undefined)
  assert.equal(limiter.size, 0)
  assert.equal(asked, 0)
  await settle(seen)
  assert.deepEqual(seen.map((a) => a.kind), ['wall-step-back'])
  assert.equal(limiter.tryConsume('x').anomalies.length, 0, 'the readings were re-anchored')
})

test('status(key) consumes nothing; for a key not held, what a fresh key would have, without holding it', () => {
  const { clock, limiter } = make({ initialTokens: 2, quota: { limit: 3, period: UTC_DAY }, policy: (k) => (k === 'big' ? { capacity: 50, initialTokens: 40 } : undefined) })
  limiter.tryConsume('a')
  clock.advance(500)
  const s1 = limiter.status('a')
  const s2 = limiter.status('a')
  assert.deepEqual(s1, s2)
  assert.deepEqual(Object.keys(s1).sort(), ['blockedForMs', 'capacity', 'period', 'quotaLimit', 'quotaRemaining', 'quotaUsed', 'refillPerSecond', 'tokens'])
  assert.equal(s1.blockedForMs, 0, 'not blocked')
  assert.deepEqual([s1.tokens, s1.quotaUsed, s1.quotaRemaining], [1.5, 1, 2])
  const fresh = limiter.status('big')
  assert.deepEqual([fresh.tokens, fresh.capacity, fresh.quotaUsed, fresh.period.id], [40, 50, 0, '2024-01-15'])
  assert.equal(limiter.size, 1, 'status does not hold a key')
  assert.equal(limiter.tryConsume('big').tokens, 39)
})

test('delete(key) drops the key and all its state', () => {
  const { limiter } = make({ quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume('a', 4)
  assert.equal(limiter.size, 1)
  assert.equal(limiter.delete('a'), true)
  assert.equal(limiter.delete('a'), false)
  assert.equal(limiter.delete('never'), false)
  assert.equal(limiter.size, 0)
  const back = limiter.tryConsume('a')
  assert.deepEqual([back.tokens, back.quotaRemaining], [9, 4])
})

// ---------------------------------------------------------------------------------------------
// Memory

test('at maxKeys a new key first drops an idle key (full bucket, no use in its open period)', () => {
  const { clock, limiter } = make({ maxKeys: 3 })
  limiter.tryConsume('a', 10)
  limiter.tryConsume('b', 1)
  limiter.tryConsume('c', 10)
  clock.advance(1000) // b is full again; a (the least recently used) is not
  limiter.tryConsume('d')
  assert.equal(limiter.size, 3)
  assert.equal(limiter.status('a').tokens, 1, 'a kept its state')
  assert.equal(limiter.status('b').tokens, 10)
  assert.deepEqual(Object.fromEntries(['a', 'c', 'd'].map((k) => [k, limiter.delete(k)])), { a: true, c: true, d: true })
})

test('else the least recently used key without quota use (its bucket comes back full); tryConsume and refund count as use, status does not', () => {
  const { limiter } = make({ maxKeys: 3 })
  for (const key of ['a', 'b', 'c']) limiter.tryConsume(key, 5)
  limiter.tryConsume('a') // order now: b, c, a
  limiter.refund('b') // order now: c, a, b
  limiter.status('c') // not a use
  limiter.tryConsume('d')
  assert.equal(limiter.status('c').tokens, 10, 'c was dropped: it comes back full')
  assert.equal(limiter.status('a').tokens, 4)
  assert.equal(limiter.status('b').tokens, 6)
  assert.equal(limiter.size, 3)
})

test('quota use is never dropped to make room: ERR_KEY_LIMIT names maxKeys, and nothing changes (readings not re-anchored)', async () => {
  const seen = []
  const { clock, limiter } = make({ maxKeys: 2, quota: { limit: 5, period: UTC_DAY }, onAnomaly: (a) => seen.push(a) })
  limiter.tryConsume('a')
  limiter.tryConsume('b')
  clock.advance(1000)
  clock.stepWall(-10_000)
  assert.throws(() => limiter.tryConsume('c'), (e) => e instanceof QuotaClockError && e.code === 'ERR_KEY_LIMIT' && /maxKeys/.test(e.message))
  assert.equal(limiter.size, 2)
  await settle(seen)
  assert.deepEqual(seen, [], 'the refused call raised nothing')
  const a = limiter.tryConsume('a')
  assert.deepEqual(a.anomalies.map((x) => x.kind), ['wall-step-back'], 'the step is seen by the next call: the readings were not taken in')
  assert.equal(a.tokens, 9, 'the second elapsed since is credited once')
  // A key without quota use makes room again.
  limiter.refund('b')
  assert.equal(limiter.tryConsume('c').allowed, true)
  assert.equal(limiter.status('a').quotaUsed, 2)
})

test('use in a period that has ended is no use: such a key can make room', () => {
  const { clock, limiter } = make({ maxKeys: 2, quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume('a')
  limiter.tryConsume('b')
  assert.throws(() => limiter.tryConsume('c'), isCode(QuotaClockError, 'ERR_KEY_LIMIT'))
  clock.advance(DAY)
  assert.equal(limiter.tryConsume('c').allowed, true)
  assert.equal(limiter.size, 2)
})

test('many keys: size counts them; maxKeys bounds them', () => {
  const { clock, limiter } = make({ maxKeys: 5000, capacity: 3, initialTokens: 0 })
  for (let i = 0; i < 12_000; i++) {
    clock.advance(1)
    limiter.tryConsume(`k${i}`)
  }
  assert.ok(limiter.size <= 5000)
  assert.ok(limiter.size >= 4000, `size ${limiter.size}`)
  assert.equal(limiter.status('k11999').tokens, 0.001 * 0 + 0, 'the newest is held with its state')
})

// ---------------------------------------------------------------------------------------------
// Restarts

test('restoring with bad options refuses them before calling the policy for any saved key', () => {
  const { limiter } = make()
  limiter.tryConsume('a')
  limiter.tryConsume('b')
  const image = limiter.snapshot()
  let calls = 0
  const policy = () => (calls++, undefined)
  assert.throws(() => make({ capacity: -1, policy, restore: image }), isCode(RangeError, 'ERR_INVALID_OPTION'))
  assert.throws(() => make({ quota: { limit: 0.5, period: UTC_DAY }, policy, restore: image }), isCode(RangeError, 'ERR_INVALID_OPTION'))
  assert.equal(calls, 0)
  const { limiter: restored } = make({ policy, restore: image })
  assert.equal(restored.size, 2)
  assert.equal(calls, 2)
})

test('snapshot() reads no clock; restore brings the keys back with tokens as saved and no refill for the downtime', () => {
  let reads = 0
  const inner = manualClock({ wallMs: NOON })
  const clock = { monotonicMs: () => (reads++, inner.monotonicMs()), wallMs: () => inner.wallMs() }
  const { limiter } = make({ clock, quota: { limit: 10, period: UTC_DAY } })
  limiter.tryConsume('a', 3)
  limiter.tryConsume('東京', 1)
  limiter.tryConsume('\ud800')
  const before = reads
  const image = limiter.snapshot()
  assert.equal(reads, before)
  assert.ok(image instanceof Uint8Array)
  const later = manualClock({ monotonicMs: 0, wallMs: NOON + 3_600_000 })
  const { limiter: restored } = make({ clock: later, quota: { limit: 10, period: UTC_DAY }, restore: image })
  assert.equal(restored.size, 3)
  assert.deepEqual([restored.status('a').tokens, restored.status('a').quotaUsed], [7, 3])
  assert.equal(restored.status('東京').quotaUsed, 1)
  assert.equal(restored.status('\ud800').quotaUsed, 1)
  assert.equal(restored.tryConsume('a').quotaRemaining, 6)
})

test('restore keeps quota use only under the same spec and the same open period id; tokens capped at the current capacity', () => {
  const { limiter } = make({ quota: { limit: 10, period: UTC_DAY } })
  limiter.tryConsume('a', 3)
  const image = limiter.snapshot()
  const restoreWith = (options, wallMs = NOON) => make({ clock: manualClock({ wallMs }), restore: image, ...options }).limiter
  assert.equal(restoreWith({ quota: { limit: 10, period: UTC_DAY } }).status('a').quotaUsed, 3)
  assert.equal(restoreWith({ quota: { limit: 10, period: UTC_DAY } }, NOON + DAY).status('a').quotaUsed, 0, 'another period is open now')
  assert.equal(restoreWith({ quota: { limit: 10, period: { unit: 'day', timeZone: 'Europe/Paris' } } }).status('a').quotaUsed, 0, 'another spec')
  assert.equal(restoreWith({ quota: { limit: 99, period: UTC_DAY } }).status('a').quotaUsed, 3, 'another limit, the same spec')
  assert.equal(restoreWith({}).status('a').quotaUsed, null, 'no quota now')
  assert.equal(restoreWith({ capacity: 5 }).status('a').tokens, 5, 'capped at the current capacity')
  assert.equal(restoreWith({ policy: (k) => (k === 'a' ? { capacity: 4 } : undefined) }).status('a').tokens, 4, "the key's own current policy")
})

test('a snapshot that is not one, or holds more keys than maxKeys, is refused naming restore, and no limiter is made', () => {
  const { limiter } = make()
  for (const key of ['a', 'b', 'c']) limiter.tryConsume(key)
  const image = limiter.snapshot()
  const flipped = Uint8Array.from(image)
  flipped[flipped.length - 10] ^= 0xff
  const otherVersion = Uint8Array.from(image)
  otherVersion[4] = 9
  const refused = [
    [new Uint8Array(0), RangeError],
    [image.subarray(0, image.length - 1), RangeError],
    [image.subarray(0, 12), RangeError],
    [flipped, RangeError],
    [otherVersion, RangeError],
    [Buffer.from('definitely not a snapshot of anything'), RangeError],
    ['QCKS', TypeError],
    [new Uint16Array(8), TypeError],
    [image.buffer, TypeError],
  ]
  for (const [restore, Class] of refused) {
    assert.throws(() => make({ restore }), (e) => e instanceof Class && e.code === 'ERR_INVALID_OPTION' && /restore/.test(e.message), `${Object.prototype.toString.call(restore)} ${restore.length}`)
  }
  assert.throws(() => make({ restore: otherVersion }), /format version 9/)
  assert.throws(() => make({ restore: image, maxKeys: 2 }), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_OPTION' && /restore/.test(e.message) && /maxKeys/.test(e.message))
  assert.equal(make({ restore: image, maxKeys: 3 }).limiter.size, 3)
  assert.equal(make({ restore: Buffer.from(image) }).limiter.size, 3, 'a Buffer is a Uint8Array')
})

test('a policy that throws during restore makes the constructor throw: no limiter is made', () => {
  const { limiter } = make()
  limiter.tryConsume('a')
  const image = limiter.snapshot()
  const boom = new Error('no plans')
  assert.throws(() => make({ restore: image, policy: () => { throw boom } }), (e) => e.code === 'ERR_INVALID_OPTION' && e.cause === boom)
})

// ---------------------------------------------------------------------------------------------
// Equivalence with QuotaClock for one key

/** A tiny deterministic generator (xorshift32), so the histories are reproducible. */
function rng(seed) {
  let state = seed >>> 0 || 1
  return (n) => {
    state ^= state << 13
    state >>>= 0
    state ^= state >>> 17
    state ^= state << 5
    state >>>= 0
    return state % n
  }
}

for (const [row, move] of [
  ['agree', (clock, below) => clock.advance(below(3000) / 4)],
  ['step-back', (clock, below) => (below(4) === 0 ? clock.stepWall(-below(3 * DAY)) : clock.advance(below(3000)))],
  ['reader', (clock, below) => (below(10) === 0 ? clock.suspend(below(60_000)) : below(10) === 0 ? clock.stepWall(below(DAY)) : clock.advance(below(600)))],
]) {
  test(`for one key, a KeyedQuotaClock and a QuotaClock on the same manual clock history decide identically (${row} rows)`, () => {
    const outcomes = { allowed: 0, denied: 0, anomalies: 0 }
    for (let seed = 1; seed <= 20; seed++) {
      const below = rng(seed * 7919)
      const init = { monotonicMs: 0, wallMs: NOON }
      if (row === 'reader') init.elapsedRealtimeMs = 0
      const clock = manualClock(init)
      const options = { capacity: 6, refillPerSecond: 2.5, initialTokens: 3, suspendPolicy: 'ignore', clock, quota: { limit: 40, period: UTC_DAY } }
      const single = new QuotaClock(options)
      const keyed = new KeyedQuotaClock(options)
      for (let step = 0; step < 150; step++) {
        if (step > 0) move(clock, below)
        const n = 1 + below(3)
        // The first call holds the key (a refund never does), at the QuotaClock's construction time.
        if (step > 0 && below(8) === 0) {
          single.refund(n)
          keyed.refund('k', n)
          continue
        }
        const a = single.tryConsume(n)
        const b = keyed.tryConsume('k', n)
        assert.deepEqual(b, a, `seed ${seed} step ${step}`)
        outcomes[a.allowed ? 'allowed' : 'denied']++
        outcomes.anomalies += a.anomalies.length
      }
      assert.deepEqual(keyed.status('k'), { ...single.status(), blockedForMs: 0 })
    }
    assert.ok(outcomes.allowed > 100 && outcomes.denied > 50, JSON.stringify(outcomes))
    if (row !== 'agree') assert.ok(outcomes.anomalies > 50, JSON.stringify(outcomes))
  })
}

// ---------------------------------------------------------------------------------------------
// Lifetime (a limiter never keeps itself alive)

test('a KeyedQuotaClock whose onAnomaly and policy refer to it is collected like any other', () => {
  const root = JSON.stringify(path.join(__dirname, '..'))
  const script = `
    const { KeyedQuotaClock, manualClock } = require(${root})
    let collected = 0
    const registry = new FinalizationRegistry(() => collected++)
    for (let i = 0; i < 200; i++) {
      const clock = manualClock()
      const limiter = new KeyedQuotaClock({
        capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock,
        onAnomaly: () => limiter.size,
        policy: () => (limiter.size, undefined),
      })
      for (let k = 0; k < 100; k++) limiter.tryConsume('key-' + k)
      clock.stepWall(-10_000)
      limiter.tryConsume('key-0')
      registry.register(limiter, i)
    }
    const settle = (rounds) => {
      gc()
      if (collected >= 190 || rounds === 0) return console.log(JSON.stringify({ collected }))
      setTimeout(() => settle(rounds - 1), 20)
    }
    setTimeout(() => settle(100), 50)
  `
  const child = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8', timeout: 60_000 })
  assert.equal(child.status, 0, child.stderr)
  const { collected } = JSON.parse(child.stdout.trim())
  assert.ok(collected >= 190, `collected ${collected} of 200`)
})

test('nothing malformed crashes the process: a throwing clock, a re-entrant clock, a hostile policy', () => {
  let broken = false
  const thrower = { monotonicMs: () => { if (broken) throw new Error('no clock today'); return 0 }, wallMs: () => NOON }
  const { limiter } = make({ clock: thrower })
  broken = true
  assert.throws(() => limiter.tryConsume('a'), isCode(QuotaClockError, 'ERR_CLOCK_READING'))
  assert.throws(() => limiter.status('a'), isCode(QuotaClockError, 'ERR_CLOCK_READING'))
  let inner
  const reentrant = { monotonicMs: () => (inner?.tryConsume('other'), 0), wallMs: () => NOON }
  inner = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock: reentrant })
  assert.throws(() => inner.tryConsume('k'), (e) => e.code === 'ERR_CLOCK_READING')
  const hostile = make({ policy: () => ({ get capacity() { throw new Error('getter') } }) }).limiter
  assert.throws(() => hostile.tryConsume('k'), (e) => e instanceof Error)
  assert.equal(hostile.size, 0)
})

test('a JS clock with a JS elapsed-realtime reader: read in JS, settled by the reader, for tryConsume, refund and status alike', () => {
  const inner = manualClock({ wallMs: NOON, elapsedRealtimeMs: 0 })
  let reads = 0
  const clock = {
    monotonicMs: () => inner.monotonicMs(),
    wallMs: () => inner.wallMs(),
    elapsedRealtimeMs: () => (reads++, inner.elapsedRealtimeMs()),
  }
  const { limiter } = make({ clock, capacity: 100, initialTokens: 0, policy: (key) => (key === 'big' ? { capacity: 1000 } : undefined) })
  const baseline = reads
  limiter.tryConsume('a')
  assert.equal(reads, baseline, 'the reader is read only when the wall runs ahead')
  inner.suspend(30_000)
  const d = limiter.tryConsume('big')
  assert.deepEqual(d.anomalies.map((x) => x.kind), ['suspend'])
  assert.equal(reads, baseline + 1)
  assert.equal(limiter.status('a').tokens, 30, 'the suspended 30 s were credited to the timeline')
  inner.suspend(5_000)
  limiter.refund('a', 1)
  assert.equal(limiter.status('a').tokens, 36)
  inner.suspend(1_000)
  assert.equal(limiter.status('zzz').tokens, 0, 'a fresh key, after the reader settled the reading')
  assert.equal(reads, baseline + 3)
})
