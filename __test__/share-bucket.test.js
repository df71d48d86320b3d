'use strict'
// The fleet bucket (`share.bucket`) against the in-process store that implements the
// store protocol (__test__/helpers/test-store.js): what consume decides from the cells it holds,
// when it calls the store, what the tick renews and gives back, and what a failing, hanging or
// nonsensical store or a stepped store clock does. (Real servers and several processes:
// shared-cells-stores.test.js and shared-fleet-bucket.test.js.)

const test = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, manualClock } = require('..')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const LEASE_MS = 1_000

const isCode = (Class, code) => (error) => error instanceof Class && error.code === code
const named = (field) => (error) => error.code === 'ERR_INVALID_OPTION' && error.message.includes(field)

/** A limiter sharing its bucket through `t` under 'api': capacity 10, 1 token a second, leaseMs 1,000, no quota. */
function bucketLimiter(t, share = {}, options = {}) {
  return sharedLimiter(t, { bucket: true, leaseMs: LEASE_MS, ...share }, { capacity: 10, quota: undefined, ...options })
}

/** Waits (on the event loop, not a fixed sleep) until `condition()` holds, for at most `ms`. */
async function until(condition, what, ms = 10_000) {
  const deadline = performance.now() + ms
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Moves a limiter's clock and the store's together. */
function advance(t, clocks, ms) {
  for (const clock of clocks) clock.advance(ms)
  t.stepClock(ms)
}

test('share.bucket and share.leaseMs are checked, naming the field', () => {
  const t = testStore()
  const make = (share, options = {}) => () => bucketLimiter(t, share, options)
  assert.throws(make({ bucket: 'yes' }), named('share.bucket'))
  for (const leaseMs of [999, 600_001, 1_500.5, Number.NaN, Infinity]) assert.throws(make({ leaseMs }), named('share.leaseMs'), String(leaseMs))
  assert.throws(make({ leaseMs: '10000' }), isCode(TypeError, 'ERR_INVALID_OPTION'))
  for (const leaseMs of [1_000, 600_000]) assert.ok(make({ leaseMs })().limiter)
  // A shared bucket is whole cells: capacity an integer from 1 to 2**31.
  for (const capacity of [1.5, 2 ** 31 + 1]) assert.throws(make({}, { capacity }), named('capacity'), String(capacity))
  assert.ok(make({}, { capacity: 2 ** 31 })().limiter)
  // Without bucket the same capacity is fine.
  assert.ok(bucketLimiter(t, { bucket: false }, { capacity: 1.5, quota: { limit: 10, period: UTC_DAY } }).limiter)
  assert.equal(t.calls.cellsAcquire.length, 0)
})

test("a KeyPolicy's capacity must be whole cells too, and the error names capacity", async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t, {}, { policy: (key) => (key === 'odd' ? { capacity: 2.5, refillPerSecond: 1 } : undefined) })
  await assert.rejects(limiter.consume('odd'), named('capacity'))
  assert.equal((await limiter.consume('even')).allowed, true)
})

test('one process alone takes every cell with one store call and decides exactly as an unshared bucket', async () => {
  const t = testStore()
  const { clock, limiter } = bucketLimiter(t)
  const aloneClock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const unshared = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock: aloneClock })
  const steps = [0, 0, 0, 50, 0, 120, 0, 0, 0, 0, 0, 0, 0, 300, 0, 0, 30, 0, 0, 0, 0, 10]
  for (const [i, ms] of steps.entries()) {
    clock.advance(ms)
    aloneClock.advance(ms)
    const n = 1 + (i % 3)
    const got = await limiter.consume('k', n)
    const want = unshared.tryConsume('k', n)
    assert.equal(got.allowed, want.allowed, `step ${i}`)
    assert.ok(Math.abs(got.tokens - want.tokens) < 1e-9, `step ${i}: ${got.tokens} vs ${want.tokens}`)
    assert.equal(got.retryAfterMs, want.retryAfterMs, `step ${i}`)
  }
  assert.equal(t.calls.cellsAcquire.length, 1)
  assert.equal(limiter.status('k').cells, 10)
  await limiter.close()
})

test('a second process finds no cell free: denied locally with its own wait, no store call per request; the holder learns and gives back', async () => {
  const t = testStore()
  const a = bucketLimiter(t)
  const b = bucketLimiter(t)
  const clocks = [a.clock, b.clock]
  assert.equal((await a.limiter.consume('k')).allowed, true)
  assert.equal(a.limiter.status('k').cells, 10)
  const denied = await b.limiter.consume('k')
  assert.equal(denied.allowed, false)
  assert.equal(denied.retryAfterBasis, 'monotonic-refill')
  assert.ok(denied.retryAfterMs > 0 && denied.retryAfterMs <= LEASE_MS / 4, String(denied.retryAfterMs))
  assert.equal(t.calls.cellsAcquire.length, 2)
  // Within leaseMs / 4, no store call per request (b's ticks may ask twice in the background).
  for (let i = 0; i < 20; i++) assert.equal((await b.limiter.consume('k')).allowed, false)
  assert.ok(t.calls.cellsAcquire.length <= 4, String(t.calls.cellsAcquire.length))
  // The holder's tick (every leaseMs / 8) hears that b waits and gives back beyond its fair share.
  await until(() => t.calls.cellsRenew.some((call) => call.instance !== undefined && call.keys.some((one) => one.key === 'k' && one.held < 10)), 'a give-back')
  assert.ok(a.limiter.status('k').cells <= 5)
  // b takes them at a background ask, or at its first call after leaseMs / 4.
  advance(t, clocks, LEASE_MS / 4 + 1)
  const after = await b.limiter.consume('k')
  assert.ok(b.limiter.status('k').cells >= 5, `b holds ${b.limiter.status('k').cells}`)
  assert.equal(after.allowed, true)
  // Cells are conserved.
  assert.ok(a.limiter.status('k').cells + b.limiter.status('k').cells <= 10)
  await Promise.all([a.limiter.close(), b.limiter.close()])
})

test('close() gives every cell back, with the tokens left', async () => {
  const t = testStore()
  const a = bucketLimiter(t)
  await a.limiter.consume('k', 4)
  await a.limiter.close()
  const last = t.calls.cellsRenew.at(-1)
  assert.deepEqual(
    last.keys.map(({ key, held }) => ({ key, held })),
    [{ key: 'k', held: 0 }],
  )
  assert.ok(Math.abs(last.keys[0].tokens - 6) < 1e-9)
  // Another process now takes them all, with those tokens.
  const b = bucketLimiter(t)
  assert.equal((await b.limiter.consume('k', 6)).allowed, true)
  assert.equal((await b.limiter.consume('k')).allowed, false)
  await b.limiter.close()
})

test('the store unavailable: decided from the cells while the lease holds, then ERR_STORE_UNAVAILABLE, or a local bucket with failOpen', async () => {
  for (const failOpen of [false, true]) {
    const t = testStore()
    const { clock, limiter } = bucketLimiter(t, { failOpen })
    assert.equal((await limiter.consume('k')).allowed, true)
    t.control.mode = 'fail'
    // The lease holds: covered calls are decided with no store call.
    assert.equal((await limiter.consume('k', 3)).allowed, true)
    // Past the lease, the cells are not this process's to use.
    clock.advance(LEASE_MS + 1)
    if (failOpen) {
      const decision = await limiter.consume('k', 10)
      assert.equal(decision.allowed, true, 'failOpen: a local bucket of capacity C and refill R')
      assert.equal((await limiter.consume('k')).allowed, false)
    } else {
      await assert.rejects(limiter.consume('k'), isCode(Error, 'ERR_STORE_UNAVAILABLE'))
    }
    t.control.mode = 'ok'
  }
})

test('a store answer that makes no sense is ERR_STORE_RESPONSE, and nothing is admitted on it', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t)
  t.control.answer = { granted: 11, tokens: 11, held: 11, fair: 10, waiting: 0, recordId: 1, storeNowMs: NOON }
  await assert.rejects(limiter.consume('k'), isCode(Error, 'ERR_STORE_RESPONSE'))
  t.control.answer = undefined
  assert.equal(limiter.status('k').cells ?? 0, 0)
})

test('a key with a quota keeps both limits', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t, {}, { quota: { limit: 3, period: UTC_DAY } })
  for (let i = 0; i < 3; i++) assert.equal((await limiter.consume('k')).allowed, true)
  const denied = await limiter.consume('k')
  assert.equal(denied.allowed, false)
  assert.equal(denied.retryAfterBasis, 'wall-period')
  // The bucket gave nothing for the denied call.
  assert.ok(Math.abs(denied.tokens - 7) < 1e-9, String(denied.tokens))
  await limiter.close()
})

test('an idle key gives its cells back after idleMs', async () => {
  const t = testStore()
  const { clock, limiter } = bucketLimiter(t, { idleMs: 200 })
  await limiter.consume('k')
  clock.advance(250)
  await until(() => t.calls.cellsRenew.some((call) => call.keys.some((one) => one.key === 'k' && one.held === 0)), 'the idle give-back')
  await until(() => (limiter.status('k').cells ?? 0) === 0, 'the cells to go')
})

test('the store clock stepped between two calls is a store-clock-step anomaly; nothing refills from it', async () => {
  const t = testStore()
  const seen = []
  const { limiter } = bucketLimiter(t, {}, { onAnomaly: (anomaly) => seen.push(anomaly) })
  await limiter.consume('k', 10)
  t.stepClock(60_000)
  await until(() => t.calls.cellsRenew.length > 0, 'a renewal')
  await until(() => seen.some((anomaly) => anomaly.kind === 'store-clock-step'), 'the anomaly')
  const anomaly = seen.find((one) => one.kind === 'store-clock-step')
  assert.equal(typeof anomaly.detail, 'string')
  assert.ok(anomaly.wallDeltaMs >= 60_000)
  // The stepped store clock credited nothing: the bucket is still empty.
  assert.equal((await limiter.consume('k')).allowed, false)
  await limiter.close()
})

test('a deleted key gives its cells back', async () => {
  const t = testStore()
  const { limiter } = bucketLimiter(t)
  await limiter.consume('k')
  assert.equal(limiter.delete('k'), true)
  await until(() => t.calls.cellsRenew.some((call) => call.keys.some((one) => one.key === 'k' && one.held === 0)), 'the give-back')
})
