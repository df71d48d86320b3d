'use strict'
// The fleet bucket (`share.bucket`) against the in-process store that implements the
// store protocol (__test__/helpers/test-store.js): slices taken from the store's bucket, decided
// locally, refilled by the fleet clock; the "no budget stranded" bounds; short answers denied
// locally with the fleet's wait; give-backs; failOpen; a failing, hanging or nonsensical store.
// (Real servers and several processes: stores-bucket.test.js, share-fleet-bucket.test.js.)

const test = require('node:test')
const assert = require('node:assert/strict')
const { manualClock } = require('..')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

const isCode = (Class, code) => (error) => error instanceof Class && error.code === code
const named = (field) => (error) => error.code === 'ERR_INVALID_OPTION' && error.message.includes(field)

/** A limiter sharing its bucket through `t` under 'api': capacity 10, 1 token a second, leaseMs 1,000, no quota. */
function bucketLimiter(t, share = {}, options = {}) {
  return sharedLimiter(t, { bucket: true, leaseMs: 1_000, ...share }, { capacity: 10, quota: undefined, ...options })
}

/** `count` limiters of the same fleet bucket, each on its own manual clock. */
function fleetOf(t, count, share = {}, options = {}) {
  return Array.from({ length: count }, () => bucketLimiter(t, share, { clock: manualClock({ monotonicMs: 0, wallMs: NOON }), ...options }))
}

/** Moves every limiter's clock and the store's together. */
function advance(t, fleet, ms) {
  for (const { clock } of fleet) clock.advance(ms)
  t.stepClock(ms)
}

/** Waits (on the event loop, not a fixed sleep) until `condition()` holds, for at most `ms`. */
async function until(condition, what, ms = 10_000) {
  const deadline = performance.now() + ms
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

test('share.bucket and share.leaseMs are checked, naming the field; capacities are whole tokens', async () => {
  const t = testStore()
  const make = (share, options = {}) => () => bucketLimiter(t, share, options)
  assert.throws(make({ bucket: 'yes' }), named('share.bucket'))
  for (const leaseMs of [999, 600_001, 1_500.5, Number.NaN, Infinity]) assert.throws(make({ leaseMs }), named('share.leaseMs'), String(leaseMs))
  assert.throws(make({ leaseMs: '10000' }), isCode(TypeError, 'ERR_INVALID_OPTION'))
  for (const leaseMs of [1_000, 600_000]) assert.ok(make({ leaseMs })().limiter)
  for (const capacity of [1.5, 2 ** 31 + 1]) assert.throws(make({}, { capacity }), named('capacity'), String(capacity))
  assert.ok(make({}, { capacity: 2 ** 31 })().limiter)
  const { limiter } = bucketLimiter(t, {}, { policy: (key) => (key === 'odd' ? { capacity: 2.5, refillPerSecond: 1 } : undefined) })
  await assert.rejects(limiter.consume('odd'), named('capacity'))
  assert.equal((await limiter.consume('even')).allowed, true)
  assert.equal(t.calls.bucketTake.length, 1)
})

test('a key first seen costs one store call, which takes only what the call lacks; the next call takes a fair share', async () => {
  const t = testStore()
  const { limiter, clock } = bucketLimiter(t, { leaseMs: 10_000 }, { capacity: 40 })
  const first = await limiter.consume('ip', 2)
  assert.equal(first.allowed, true)
  assert.equal(first.tokens, 0)
  assert.equal(t.calls.bucketTake.length, 1)
  assert.deepEqual(
    { want: t.calls.bucketTake[0].want, more: t.calls.bucketTake[0].more, held: t.calls.bucketTake[0].held, fleetMs: t.calls.bucketTake[0].fleetMs, recordId: t.calls.bucketTake[0].recordId },
    { want: 2, more: 0, held: 0, fleetMs: -1, recordId: 0 },
  )
  assert.equal(t.bucket('api', 'ip').tk, 38)
  const second = await limiter.consume('ip')
  assert.equal(second.allowed, true)
  assert.equal(t.calls.bucketTake.length, 2)
  // 1 + floor(min(fair, max(fair / 4, R * 250 ms))), fair = min((38 - 1) / 1, 40 / 2) = 20: the
  // slice keeps 5 after the call; the store keeps 32.
  assert.equal(second.tokens, 5)
  assert.equal(t.bucket('api', 'ip').tk, 32)
  // Covered calls make no store call.
  for (let i = 0; i < 4; i++) assert.equal((await limiter.consume('ip')).allowed, true)
  assert.equal(t.calls.bucketTake.length, 2)
  const status = limiter.status('ip')
  assert.equal(status.tokens, 1)
  assert.equal(status.fleetTokens, 32)
  // Below half of the last slice, leaseMs / 16 after the last store call, the store holding half
  // the bucket (32 then, refilled 1 a second): the next slice is fetched in the background.
  clock.advance(3_000)
  t.stepClock(3_000)
  assert.equal((await limiter.consume('ip')).allowed, true)
  await until(() => t.calls.bucketTake.length === 3 && limiter.status('ip').tokens >= 5, 'the background fetch')
  assert.equal(t.calls.bucketTake[2].want, 0)
  assert.equal(t.calls.bucketTake[2].held, 0)
})

test('no budget stranded: the first consume at each of n <= C processes is admitted', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 10)
  for (const { limiter } of fleet) assert.equal((await limiter.consume('ip')).allowed, true)
  assert.equal(t.bucket('api', 'ip').tk, 0)
  // And an eleventh is denied with the fleet's wait: 1 token at 1 a second.
  const [{ limiter: late }] = fleetOf(t, 1)
  const denied = await late.consume('ip')
  assert.equal(denied.allowed, false)
  assert.equal(denied.retryAfterBasis, 'monotonic-refill')
  assert.ok(denied.retryAfterMs >= 900 && denied.retryAfterMs <= 1000, String(denied.retryAfterMs))
})

test('no budget stranded: a burst of 2C round-robin over three processes on a full bucket admits at least 0.9 C', async () => {
  for (const capacity of [10, 100]) {
    const t = testStore()
    const fleet = fleetOf(t, 3, {}, { capacity, refillPerSecond: capacity / 900 })
    let admitted = 0
    for (let i = 0; i < 2 * capacity; i++) if ((await fleet[i % 3].limiter.consume('ip')).allowed) admitted++
    assert.ok(admitted >= 0.9 * capacity && admitted <= capacity, `capacity ${capacity}: admitted ${admitted}`)
  }
})

test('no budget stranded: a key emptied and idle for T admits about min(C, R T) at any process', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 2)
  const [a, b] = fleet
  while ((await a.limiter.consume('ip')).allowed);
  // 8 s idle (past min(idleMs, leaseMs / 2): what a kept goes back), then a burst at b, then at a.
  for (let s = 0; s < 8; s++) advance(t, fleet, 1_000)
  await until(() => !a.limiter.status('ip').tokens, 'the idle give-back')
  let atB = 0
  for (let i = 0; i < 20; i++) if ((await b.limiter.consume('ip')).allowed) atB++
  assert.ok(atB >= 0.9 * 8 - 1 && atB <= 8, `after 8 s idle b admitted ${atB}`)
  for (let s = 0; s < 4; s++) advance(t, fleet, 1_000)
  let atA = 0
  for (let i = 0; i < 20; i++) if ((await a.limiter.consume('ip')).allowed) atA++
  assert.ok(atA >= 0.9 * 4 - 1 && atA <= 4, `after 4 s more a admitted ${atA}`)
})

test('no budget stranded: a key emptied by first consumes of n > 1 (spent whole, recorded by no store) and idle for T admits about min(C, R T)', async () => {
  const t = testStore()
  // leaseMs 10,000: the store would write the slices off only after 12 s.
  const fleet = fleetOf(t, 2, { leaseMs: 10_000 })
  const [a, b] = fleet
  // Each process's first call takes what it lacks (7, then the 3 left) and spends it at once: the
  // store records neither slice (spend), so nothing caps the refill of the idle time, and no
  // report or give-back follows.
  assert.equal((await a.limiter.consume('ip', 7)).allowed, true)
  assert.equal((await b.limiter.consume('ip', 3)).allowed, true)
  const takes = t.calls.bucketTake.length
  assert.equal(takes, 2)
  assert.deepEqual(t.calls.bucketTake.map((take) => take.spend), [true, true])
  assert.equal(t.bucket('api', 'ip').holders.size, 0)
  for (let s = 0; s < 8; s++) advance(t, fleet, 1_000)
  // (The give-back timer finds nothing to report: neither process's slice is one the store counts.)
  assert.equal(a.limiter.status('ip').tokens + b.limiter.status('ip').tokens, 0)
  let atB = 0
  for (let i = 0; i < 20; i++) if ((await b.limiter.consume('ip')).allowed) atB++
  assert.ok(atB >= 0.9 * 8 - 1 && atB <= 8, `after 8 s idle b admitted ${atB}`)
})

// The local denial lasts 1.3 times the floor min(leaseMs / 8, 1 s, C / (2R)): here leaseMs / 8
// (500 ms) with C 200, R 100/s, and C / (2R) (50 ms) with C 10, R 100/s: a bucket that refills in
// less than a second is not capped at C while its processes wait.
for (const [capacity, waitMs] of [[200, 650], [10, 65]]) {
  test(`a saturated key (C ${capacity}, R 100/s, leaseMs 4,000) is denied locally, with no store call, for 1.3 times min(leaseMs / 8, 1 s, C / (2R)): ${waitMs} ms`, async () => {
    const t = testStore()
    const fleet = fleetOf(t, 1, { leaseMs: 4_000 }, { capacity, refillPerSecond: 100 })
    const [{ limiter }] = fleet
    assert.equal((await limiter.consume('ip', capacity)).allowed, true)
    const denied = await limiter.consume('ip')
    assert.equal(denied.allowed, false)
    const calls = t.calls.bucketTake.length
    const step = waitMs / 50
    for (let i = 0; i < 49; i++) {
      advance(t, fleet, step)
      const again = await limiter.consume('ip')
      assert.equal(again.allowed, false, `call ${i}`)
      assert.equal(again.retryAfterBasis, 'monotonic-refill')
    }
    assert.equal(t.calls.bucketTake.length, calls, `no store call before ${waitMs} ms`)
    // Past the wait, the store is asked again, and this process takes everything.
    advance(t, fleet, step + 1)
    assert.equal((await limiter.consume('ip')).allowed, true)
    assert.equal(t.calls.bucketTake.at(-1).more, 2)
  })
}

test('fill: a key denied locally as saturated is admitted again within one second', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 1, { leaseMs: 60_000 }, { capacity: 5, refillPerSecond: 5 / 3600 })
  const [{ limiter }] = fleet
  assert.equal((await limiter.consume('ip', 5)).allowed, true)
  assert.equal((await limiter.consume('ip')).allowed, false)
  const { quotaAdmin } = require('../lib/shared.js')
  const usage = await quotaAdmin(t.store, { name: 'api' }).fill('ip')
  assert.equal(usage.tokens, 5 - usage.out)
  advance(t, fleet, 1_000)
  assert.equal((await limiter.consume('ip')).allowed, true)
})

test('a lapsed lease spends nothing; the unspent tokens go back at the next store call', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 1, { leaseMs: 1_000 }, { capacity: 100, refillPerSecond: 0.001 })
  const [{ limiter }] = fleet
  await limiter.consume('ip')
  await limiter.consume('ip')
  const kept = limiter.status('ip').tokens
  assert.ok(kept > 10)
  advance(t, fleet, 1_000)
  assert.equal(limiter.status('ip').tokens, 0)
  const before = t.bucket('api', 'ip').tk
  assert.equal((await limiter.consume('ip')).allowed, true)
  const request = t.calls.bucketTake.at(-1)
  assert.equal(request.give, kept)
  assert.ok(t.bucket('api', 'ip').tk + limiter.status('ip').tokens >= before + kept - 2)
})

test('a store outage loses a live process nothing: its tokens go back and the bucket refills once the fleet clock saw the outage', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 1, { leaseMs: 1_000, timeoutMs: 50 }, { capacity: 10, refillPerSecond: 1 })
  const [{ limiter }] = fleet
  await limiter.consume('ip')
  await limiter.consume('ip')
  assert.ok(limiter.status('ip').tokens > 0)
  t.control.mode = 'fail'
  advance(t, fleet, 12_000)
  await assert.rejects(limiter.consume('ip'), isCode(Error, 'ERR_STORE_UNAVAILABLE'))
  t.control.mode = 'ok'
  let admitted = 0
  for (let i = 0; i < 20; i++) if ((await limiter.consume('ip')).allowed) admitted++
  assert.ok(admitted >= 9, `admitted ${admitted} after the outage`)
})

test('a record the store lost comes back empty, never full', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 1, {}, { capacity: 10, refillPerSecond: 0.001 })
  const [{ limiter }] = fleet
  await limiter.consume('ip')
  t.records.clear()
  advance(t, fleet, 2_000)
  assert.equal((await limiter.consume('ip')).allowed, false)
  assert.equal(t.bucket('api', 'ip').tk, 0)
})

test('failOpen: with the store away a local bucket decides, and what it admitted is taken from the store later', async () => {
  const t = testStore()
  const fleet = fleetOf(t, 1, { failOpen: true, timeoutMs: 50 }, { capacity: 10, refillPerSecond: 0.001 })
  const [{ limiter }] = fleet
  t.control.mode = 'fail'
  let admitted = 0
  for (let i = 0; i < 12; i++) if ((await limiter.consume('ip')).allowed) admitted++
  assert.equal(admitted, 10)
  t.control.mode = 'ok'
  await limiter.close()
  const record = t.bucket('api', 'ip')
  assert.ok(record.tk <= 0.01, `the store's bucket was charged: ${record.tk}`)
})

test('a store answer that makes no sense is ERR_STORE_RESPONSE, and nothing is admitted on it', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t)
  t.control.answer = { granted: 5, held: 1, tokens: 0, fleetMs: 0, storeNowMs: 0, recordId: 1, others: 0 }
  await assert.rejects(limiter.consume('ip'), isCode(Error, 'ERR_STORE_RESPONSE'))
  assert.equal(limiter.status('ip').tokens, 0)
})

test('no call waits longer than timeoutMs: a call whose tokens others took is decided within it', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t, { timeoutMs: 200 }, { capacity: 100, refillPerSecond: 1 })
  t.control.mode = 'delay'
  t.control.delayMs = 160
  const started = performance.now()
  const calls = Array.from({ length: 20 }, () => limiter.consume('ip').then((d) => ({ d, ms: performance.now() - started })))
  const outcomes = await Promise.allSettled(calls)
  for (const outcome of outcomes) {
    assert.equal(outcome.status, 'fulfilled')
    assert.ok(outcome.value.ms < 200 + 60, `a call took ${outcome.value.ms} ms`)
  }
  assert.ok(outcomes.filter((o) => o.value.d.allowed).length >= 1)
})

test('close() gives every slice back and resolves once the store has them; stats count each round trip', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t)
  await limiter.consume('a')
  await limiter.consume('a')
  await limiter.consume('b')
  await limiter.close()
  assert.equal(t.bucket('api', 'a').holders.size, 0)
  const store = limiter.stats().store
  assert.equal(store.calls, t.calls.bucketTake.length)
})

test('the HTTP RateLimit remaining of a shared bucket is floor(tokens + fleetTokens)', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t, {}, { capacity: 100, refillPerSecond: 1 })
  await limiter.consume('ip')
  await limiter.consume('ip')
  const status = limiter.status('ip')
  assert.ok(status.fleetTokens > 0 && status.tokens > 0)
  assert.ok(status.tokens + status.fleetTokens <= 100)
})

test('a quota and a shared bucket: both limits hold', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t, {}, { capacity: 10, refillPerSecond: 0.001, quota: { limit: 3, period: UTC_DAY } })
  const decisions = []
  for (let i = 0; i < 5; i++) decisions.push(await limiter.consume('ip'))
  assert.deepEqual(decisions.map((d) => d.allowed), [true, true, true, false, false])
  assert.equal(decisions[3].retryAfterBasis, 'wall-period')
})

test("a store-clock-step is on the decision of the call whose take showed it, as well as onAnomaly's and stats'", async () => {
  const t = testStore()
  const seen = []
  const { limiter, clock } = bucketLimiter(t, {}, { capacity: 100, refillPerSecond: 1, onAnomaly: (anomaly) => seen.push(anomaly.kind) })
  assert.equal((await limiter.consume('k', 100)).allowed, true)
  t.stepClock(60_000) // the store's clock a minute on, this process's two seconds
  clock.advance(2_000)
  const decision = await limiter.consume('k')
  assert.deepEqual(decision.anomalies.map((anomaly) => [anomaly.kind, anomaly.stepMs]), [['store-clock-step', 58_000]])
  assert.deepEqual((await limiter.consume('k')).anomalies, [], 'once')
  assert.equal(limiter.stats().anomalies['store-clock-step'], 1)
  await new Promise((resolve) => setTimeout(resolve, 20))
  assert.deepEqual(seen, ['store-clock-step'])
  await limiter.close()
})

test('close() on a store that hangs rejects after timeoutMs, not after twice it (the give-back that timed out is not waited for again)', async () => {
  const t = testStore()
  const { limiter } = sharedLimiter(t, { bucket: true, leaseMs: 10_000, timeoutMs: 1_000 }, { capacity: 1000, refillPerSecond: 1, quota: undefined })
  for (let i = 0; i < 5; i++) {
    assert.equal((await limiter.consume('k')).allowed, true)
    await new Promise(setImmediate)
  }
  t.control.mode = 'hang'
  const keep = setInterval(() => {}, 1_000) // (the store's deadlines do not keep the process up)
  const started = performance.now()
  try {
    await assert.rejects(limiter.close(), isCode(Error, 'ERR_STORE_UNAVAILABLE'))
  } finally {
    clearInterval(keep)
  }
  const tookMs = performance.now() - started
  assert.ok(tookMs >= 990 && tookMs < 1_800, `rejected after ${Math.round(tookMs)} ms`)
})
