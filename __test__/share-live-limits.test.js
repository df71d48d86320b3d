'use strict'
// Limits that change while running with `share` and `share.bucket`, against the
// in-process store that implements the store protocol (__test__/helpers/test-store.js).

const test = require('node:test')
const assert = require('node:assert/strict')
const { manualClock } = require('..')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const plan = (limit) => ({ quota: { limit, period: UTC_DAY } })

/** Two limiters ("processes") sharing 'api' through `t`, their plans in one Map every process loads. */
function fleet(t, plans, share = {}) {
  const policy = (key) => plans.get(key)
  return [0, 1].map(() => sharedLimiter(t, { leaseUnits: 2, ...share }, { clock: manualClock({ monotonicMs: 0, wallMs: NOON }), policy }).limiter)
}

/** Calls taken in turn by every limiter of `limiters`, then a few more each (none left reserved). */
async function drained(limiters, key, calls) {
  let allowed = 0
  for (let i = 0; i < calls; i++) if ((await limiters[i % limiters.length].consume(key)).allowed) allowed++
  for (const limiter of limiters) allowed += await admitted(limiter, key, 3)
  return allowed
}

async function admitted(limiter, key, calls) {
  let allowed = 0
  for (let i = 0; i < calls; i++) if ((await limiter.consume(key)).allowed) allowed++
  return allowed
}

test('share: an upgrade reaches the store with the key\'s next reservation; an exhausted key asks again after the refresh', async () => {
  const t = testStore()
  const plans = new Map([['acme', plan(10)]])
  const [a, b] = fleet(t, plans)
  assert.equal(await drained([a, b], 'acme', 12), 10)
  assert.equal((await a.consume('acme')).allowed, false, 'exhausted: denied here for a while with no store call')
  plans.set('acme', plan(25))
  a.refreshPolicy('acme')
  b.refreshPolicy()
  const reserves = t.calls.reserve.length
  assert.equal((await a.consume('acme')).allowed, true, 'asked the store again at once')
  assert.ok(t.calls.reserve.length > reserves)
  assert.equal(t.calls.reserve.at(-1).limit, 25, 'the new limit went with the reservation')
  const total = 1 + 10 + (await drained([a, b], 'acme', 20))
  assert.equal(total, 25, 'the use carried: 10 of the old plan count against the new one')
  assert.equal(a.status('acme').quotaLimit, 25)
})

test('share: after a downgrade the fleet admits at most the new limit plus what its processes held reserved', async () => {
  const t = testStore()
  const plans = new Map([['acme', plan(100)]])
  const [a, b] = fleet(t, plans, { leaseUnits: 5 })
  assert.equal(await admitted(a, 'acme', 3), 3)
  assert.equal(await admitted(b, 'acme', 3), 3)
  // What the two processes hold reserved and have not admitted, as the store counts it.
  const held = t.records.get(JSON.stringify(['api', 'acme', '2024-01-15'])).count - 6
  assert.ok(held > 0)
  plans.set('acme', plan(8))
  a.refreshPolicy('acme')
  b.refreshPolicy('acme')
  const more = (await admitted(a, 'acme', 20)) + (await admitted(b, 'acme', 20))
  assert.ok(6 + more <= 8 + held, `${6 + more} admitted, the new limit 8 plus ${held} held`)
  assert.ok(6 + more >= 8, 'the new limit is still admitted')
  const status = a.status('acme')
  assert.equal(status.quotaLimit, 8)
})

test('share.bucket: the store takes the new C and R at the key\'s next store call, carried over', async () => {
  const t = testStore()
  const plans = new Map()
  const { limiter, clock } = sharedLimiter(t, { bucket: true, leaseMs: 1_000 }, { capacity: 10, refillPerSecond: 1, quota: undefined, policy: (key) => plans.get(key) })
  assert.equal(await admitted(limiter, 'k', 12), 10)
  plans.set('k', { capacity: 30, refillPerSecond: 1 })
  limiter.refreshPolicy('k')
  assert.equal(limiter.status('k').capacity, 30)
  clock.advance(1_100)
  t.stepClock(1_100)
  const decision = await limiter.consume('k')
  assert.equal(decision.allowed, true)
  const take = t.calls.bucketTake.at(-1)
  assert.deepEqual([take.capacity, take.refillPerSecond], [30, 1])
  // 1.1 s at the old rate, then 20 more: what was used stays used.
  const fleetNow = (await limiter.status('k')).fleetTokens + limiter.status('k').tokens
  assert.ok(fleetNow > 20 && fleetNow < 22.2, `${fleetNow} tokens`)
})

test('share.bucket: a key the store left short asks it again at its next call after a refresh that raised its limits', async () => {
  const t = testStore()
  const plans = new Map()
  const { limiter } = sharedLimiter(t, { bucket: true, leaseMs: 10_000 }, { capacity: 10, refillPerSecond: 1, quota: undefined, policy: (key) => plans.get(key) })
  assert.equal(await admitted(limiter, 'k', 11), 10)
  const takes = t.calls.bucketTake.length
  assert.equal((await limiter.consume('k')).allowed, false, 'short: denied here, no store call')
  assert.equal(t.calls.bucketTake.length, takes)
  plans.set('k', { capacity: 30, refillPerSecond: 1 })
  limiter.refreshPolicy('k')
  const decision = await limiter.consume('k')
  assert.equal(decision.allowed, true, 'the 20 tokens the raise brought')
  assert.deepEqual([t.calls.bucketTake.at(-1).capacity, t.calls.bucketTake.length > takes], [30, true])
})

test("share.bucket: after a capacity cut the key's fleet estimate is at most the new capacity", async () => {
  const t = testStore()
  const plans = new Map()
  const { limiter } = sharedLimiter(t, { bucket: true, leaseMs: 10_000 }, { capacity: 10, refillPerSecond: 1, quota: undefined, policy: (key) => plans.get(key) })
  assert.equal((await limiter.consume('k')).allowed, true)
  assert.ok(limiter.status('k').fleetTokens > 4)
  plans.set('k', { capacity: 4, refillPerSecond: 1 })
  limiter.refreshPolicy('k')
  const status = limiter.status('k')
  assert.equal(status.capacity, 4)
  assert.ok(status.fleetTokens <= 4, `fleetTokens ${status.fleetTokens}`)
})
