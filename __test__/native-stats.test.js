'use strict'
// stats() on QuotaClock and KeyedQuotaClock: counters since construction, read without a clock,
// after real decisions on manual clocks (and on a plain JS clock).

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, KeyedQuotaClock, manualClock } = require('..')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')

const DAY = 86_400_000
const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const KINDS = ['wall-step-back', 'wall-step-forward', 'suspend', 'ambiguous-wall-jump', 'period-regression', 'period-skip', 'store-clock-step']

/** Every anomaly kind at 0, with `counts` on top. */
const anomalies = (counts = {}) => ({ ...Object.fromEntries(KINDS.map((kind) => [kind, 0])), ...counts })

function quotaClock(options = {}) {
  const clock = options.clock ?? manualClock({ monotonicMs: 0, wallMs: NOON })
  return { clock, limiter: new QuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock, ...options }) }
}

function keyed(options = {}) {
  const clock = options.clock ?? manualClock({ monotonicMs: 0, wallMs: NOON })
  return { clock, limiter: new KeyedQuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock, ...options }) }
}

test('a new QuotaClock has counted nothing, holds one key, and has every anomaly kind at zero', () => {
  const { limiter } = quotaClock()
  assert.deepEqual(limiter.stats(), { allowed: 0, denied: 0, anomalies: anomalies(), keys: 1, evicted: 0, keyLimitRefusals: 0 })
})

test('QuotaClock counts its allowed and denied decisions', () => {
  const { limiter, clock } = quotaClock()
  const outcomes = []
  for (let i = 0; i < 5; i++) outcomes.push(limiter.tryConsume().allowed)
  clock.advance(1000)
  outcomes.push(limiter.tryConsume().allowed)
  assert.deepEqual(outcomes, [true, true, false, false, false, true])
  const stats = limiter.stats()
  assert.equal(stats.allowed, 3)
  assert.equal(stats.denied, 3)
})

test('a denial by the quota alone is a denial', () => {
  const { limiter } = quotaClock({ capacity: 10, quota: { limit: 1, period: UTC_DAY } })
  assert.equal(limiter.tryConsume().allowed, true)
  const denied = limiter.tryConsume()
  assert.equal(denied.retryAfterBasis, 'wall-period')
  assert.deepEqual([limiter.stats().allowed, limiter.stats().denied], [1, 1])
})

test('QuotaClock counts anomalies by kind, each kind on its own', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON, elapsedRealtimeMs: 0 })
  const { limiter } = quotaClock({ clock, capacity: 10, quota: { limit: 100, period: UTC_DAY } })
  const raised = []
  const consume = () => raised.push(...limiter.tryConsume().anomalies.map((anomaly) => anomaly.kind))
  clock.suspend(60_000) // the reader explains it: suspend
  consume()
  clock.advance(1000)
  clock.stepWall(30_000) // the reader does not: wall-step-forward
  consume()
  clock.advance(1000)
  clock.stepWall(-DAY) // back across midnight: wall-step-back and period-regression
  consume()
  clock.advance(1000)
  clock.stepWall(4 * DAY) // forward over whole days: wall-step-forward and period-skip
  consume()
  const expected = {}
  for (const kind of raised) expected[kind] = (expected[kind] ?? 0) + 1
  assert.deepEqual(expected, { suspend: 1, 'wall-step-forward': 2, 'wall-step-back': 1, 'period-regression': 1, 'period-skip': 1 })
  assert.deepEqual(limiter.stats().anomalies, anomalies(expected))
})

test('an ambiguous wall jump (no elapsed-realtime reader) is counted as its kind', () => {
  const { limiter, clock } = quotaClock({ suspendPolicy: 'credit' })
  clock.suspend(3_600_000)
  assert.deepEqual(limiter.tryConsume().anomalies.map((anomaly) => anomaly.kind), ['ambiguous-wall-jump'])
  assert.deepEqual(limiter.stats().anomalies, anomalies({ 'ambiguous-wall-jump': 1 }))
})

test('status() and refund() are not decisions, but the anomalies they raise are counted', () => {
  const { limiter, clock } = quotaClock()
  limiter.tryConsume()
  clock.advance(100)
  clock.stepWall(-10_000)
  limiter.status()
  clock.advance(100)
  clock.stepWall(-10_000)
  limiter.refund()
  const stats = limiter.stats()
  assert.deepEqual([stats.allowed, stats.denied], [1, 0])
  assert.deepEqual(stats.anomalies, anomalies({ 'wall-step-back': 2 }))
})

test('a call that throws counts nothing', () => {
  const { limiter, clock } = quotaClock({ suspendPolicy: 'refuse' })
  assert.throws(() => limiter.tryConsume(3), { code: 'ERR_INVALID_ARG' })
  clock.suspend(3_600_000)
  assert.throws(() => limiter.tryConsume(), { code: 'ERR_AMBIGUOUS_WALL_JUMP' })
  clock.set({ monotonicMs: -5 })
  assert.throws(() => limiter.tryConsume(), { code: 'ERR_MONOTONIC_REGRESSION' })
  assert.throws(() => limiter.status(), { code: 'ERR_MONOTONIC_REGRESSION' })
  assert.deepEqual(limiter.stats(), { allowed: 0, denied: 0, anomalies: anomalies(), keys: 1, evicted: 0, keyLimitRefusals: 0 }, 'and stats() still answers after a latched regression')
})

test('stats() reads no clock', () => {
  let reads = 0
  const clock = {
    monotonicMs: () => (reads++, 0),
    wallMs: () => (reads++, NOON),
  }
  const { limiter } = quotaClock({ clock })
  assert.equal(limiter.tryConsume().allowed, true)
  const before = reads
  for (let i = 0; i < 3; i++) limiter.stats()
  assert.equal(reads, before)
  assert.equal(limiter.stats().allowed, 1, 'decisions on a JS clock are counted too')

  const keyedReads = reads
  const { limiter: many } = keyed({ clock })
  many.tryConsume('a')
  const after = reads
  many.stats()
  assert.equal(reads, after)
  assert.ok(after > keyedReads)
})

test('limiters sharing a result buffer keep their own counts, and stats() between decisions changes none of them', () => {
  const { limiter: a } = quotaClock({ capacity: 1 })
  const { limiter: b } = quotaClock({ capacity: 3 })
  const decisions = []
  for (let i = 0; i < 3; i++) {
    decisions.push(a.tryConsume().allowed, b.tryConsume().allowed)
    a.stats()
  }
  assert.deepEqual(decisions, [true, true, false, true, false, true])
  assert.deepEqual([a.stats().allowed, a.stats().denied], [1, 2])
  assert.deepEqual([b.stats().allowed, b.stats().denied], [3, 0])
  const decision = b.tryConsume()
  b.stats()
  assert.equal(decision.allowed, false, 'a decision read before stats() is not overwritten by it')
  assert.equal(decision.retryAfterBasis, 'monotonic-refill')
})

test('each stats() call returns a fresh object', () => {
  const { limiter } = quotaClock()
  const first = limiter.stats()
  first.allowed = 99
  first.anomalies.suspend = 99
  assert.equal(limiter.stats().allowed, 0)
  assert.equal(limiter.stats().anomalies.suspend, 0)
  assert.notEqual(limiter.stats(), limiter.stats())
})

test('a new KeyedQuotaClock has counted nothing and holds no key', () => {
  const { limiter } = keyed()
  assert.deepEqual(limiter.stats(), { allowed: 0, denied: 0, anomalies: anomalies(), keys: 0, evicted: 0, keyLimitRefusals: 0, blocked: 0, blocks: 0 })
})

test('KeyedQuotaClock counts decisions over every key, and keys is the size now', () => {
  const { limiter } = keyed()
  const outcomes = ['a', 'b', 'a', 'a', 'c', 'b', 'b'].map((key) => limiter.tryConsume(key).allowed)
  assert.deepEqual(outcomes, [true, true, true, false, true, true, false])
  let stats = limiter.stats()
  assert.deepEqual([stats.allowed, stats.denied, stats.keys], [5, 2, 3])
  limiter.delete('c')
  stats = limiter.stats()
  assert.equal(stats.keys, 2)
  assert.equal(stats.keys, limiter.size)
  assert.equal(stats.evicted, 0, 'delete() is not an eviction')
})

test('a clock anomaly is counted once for the whole keyed limiter, not once per key', () => {
  const { limiter, clock } = keyed({ quota: { limit: 10, period: UTC_DAY } })
  for (const key of ['a', 'b', 'c']) limiter.tryConsume(key)
  clock.advance(1000)
  clock.stepWall(-DAY)
  for (const key of ['a', 'b', 'c']) limiter.tryConsume(key)
  assert.deepEqual(limiter.stats().anomalies, anomalies({ 'wall-step-back': 1, 'period-regression': 1 }))
})

test('keyed status() and refund() are not decisions, but their anomalies are counted', () => {
  const { limiter, clock } = keyed()
  limiter.tryConsume('a')
  clock.advance(100)
  clock.stepWall(-10_000)
  limiter.status('a')
  clock.advance(100)
  clock.stepWall(-10_000)
  limiter.refund('a')
  limiter.refund('not-held')
  const stats = limiter.stats()
  assert.deepEqual([stats.allowed, stats.denied], [1, 0])
  assert.deepEqual(stats.anomalies, anomalies({ 'wall-step-back': 2 }))
})

test('a key dropped to make room at maxKeys is counted as evicted', () => {
  const { limiter, clock } = keyed({ maxKeys: 2 })
  limiter.tryConsume('a')
  limiter.tryConsume('b')
  clock.advance(5000) // both buckets full again: idle
  limiter.tryConsume('c')
  limiter.tryConsume('d')
  const stats = limiter.stats()
  assert.equal(stats.keys, 2)
  assert.equal(stats.evicted, 2)
  assert.equal(stats.allowed, 4)
})

test('idle keys the limiter sweeps on its own are counted as evicted', () => {
  const { limiter, clock } = keyed({ capacity: 1, maxKeys: 100 })
  for (let i = 0; i < 80; i++) limiter.tryConsume(`key-${i}`)
  clock.advance(5000) // every bucket full again: every key idle
  for (let i = 80; i < 90; i++) limiter.tryConsume(`key-${i}`)
  const stats = limiter.stats()
  assert.ok(stats.evicted > 0, 'some idle keys were swept')
  assert.equal(stats.evicted, 90 - stats.keys, 'every key held and gone was evicted')
})

test('a new key refused at maxKeys is counted in keyLimitRefusals, and is neither a decision nor an eviction', () => {
  const { limiter, clock } = keyed({ maxKeys: 1, quota: { limit: 5, period: UTC_DAY } })
  limiter.tryConsume('a')
  clock.advance(100)
  clock.stepWall(-10_000)
  for (let i = 0; i < 3; i++) assert.throws(() => limiter.tryConsume('b'), { code: 'ERR_KEY_LIMIT' })
  const stats = limiter.stats()
  assert.equal(stats.keyLimitRefusals, 3)
  assert.deepEqual([stats.allowed, stats.denied, stats.evicted, stats.keys], [1, 0, 0, 1])
  assert.deepEqual(stats.anomalies, anomalies(), 'a refused call raises no anomaly')
  assert.deepEqual(limiter.tryConsume('a').anomalies.map((anomaly) => anomaly.kind), ['wall-step-back'])
  assert.deepEqual(limiter.stats().anomalies, anomalies({ 'wall-step-back': 1 }))
})

test('a limiter restored from a snapshot starts counting from zero', () => {
  const { limiter, clock } = keyed()
  limiter.tryConsume('a')
  limiter.tryConsume('b')
  const restored = new KeyedQuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock, restore: limiter.snapshot() })
  assert.deepEqual(restored.stats(), { allowed: 0, denied: 0, anomalies: anomalies(), keys: 2, evicted: 0, keyLimitRefusals: 0, blocked: 0, blocks: 0 })
})

test('a limiter that is not shared has no store counters', () => {
  assert.equal(Object.hasOwn(keyed().limiter.stats(), 'store'), false)
  assert.equal(Object.hasOwn(quotaClock().limiter.stats(), 'store'), false)
})

test("a shared limiter's stats() carries its store counters, and its consume decisions are counted", async () => {
  const t = testStore()
  const { limiter } = sharedLimiter(t, { leaseUnits: 2, timeoutMs: 50 }, { capacity: 100, quota: { limit: 3, period: UTC_DAY } })
  const outcomes = []
  for (let i = 0; i < 5; i++) outcomes.push((await limiter.consume('a')).allowed)
  assert.deepEqual(outcomes, [true, true, true, false, false])
  let stats = limiter.stats()
  assert.deepEqual([stats.allowed, stats.denied], [3, 2], 'decisions from the reservation, after a store call, and denials are all counted')
  assert.equal(stats.store.reserved, 3, 'the store granted the whole limit, in slices')
  assert.equal(stats.store.calls, t.calls.reserve.length)
  assert.deepEqual([stats.store.errors, stats.store.timeouts, stats.store.returned], [0, 0, 0])
  t.control.mode = 'fail'
  await assert.rejects(limiter.consume('b'), { code: 'ERR_STORE_UNAVAILABLE' })
  stats = limiter.stats()
  assert.equal(stats.store.errors, 1)
  assert.deepEqual([stats.allowed, stats.denied], [3, 2], 'a call that rejects is no decision')
  t.control.mode = 'ok'
  await limiter.close()
  assert.deepEqual(Object.keys(limiter.stats().store), ['calls', 'errors', 'timeouts', 'reserved', 'returned'])
})

test('stats() called from inside a call (a JS clock, a policy) leaves that call to decide as it would', () => {
  let limiter
  let keyedLimiter
  let now = 0
  const clock = {
    monotonicMs: () => {
      limiter?.stats()
      keyedLimiter?.stats()
      return now
    },
    wallMs: () => NOON + now,
  }
  ;({ limiter } = quotaClock({ clock, capacity: 3 }))
  const outcomes = []
  for (let i = 0; i < 4; i++) outcomes.push(limiter.tryConsume().allowed)
  assert.deepEqual(outcomes, [true, true, true, false])
  assert.deepEqual([limiter.stats().allowed, limiter.stats().denied], [3, 1])

  ;({ limiter: keyedLimiter } = keyed({ clock, policy: (key) => (keyedLimiter.stats(), key === 'big' ? { capacity: 5 } : undefined) }))
  const decisions = ['big', 'big', 'small', 'small', 'small'].map((key) => keyedLimiter.tryConsume(key, 2))
  assert.deepEqual(decisions.map((decision) => decision.allowed), [true, true, true, false, false])
  assert.deepEqual(decisions.map((decision) => decision.tokens), [3, 1, 0, 0, 0])
  now += 1000
  assert.equal(keyedLimiter.tryConsume('small').allowed, true)
  const stats = keyedLimiter.stats()
  assert.deepEqual([stats.allowed, stats.denied, stats.keys], [4, 2, 2])
})
