'use strict'
// The shared limiter (`share`) against an in-process store that implements the store protocol:
// what consume decides, when it calls the store, and what happens when the store fails, hangs or
// answers late. (The Redis and MongoDB stores and several real processes have tests of their own.)

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')
const { KeyedQuotaClock, QuotaClockError, manualClock, systemClock } = require('..')
const { testStore, sharedLimiter: shared } = require('./helpers/test-store.js')
const { storeStatsOf } = require('../lib/share/driver.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const DAY = 86_400_000
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const TODAY = '2024-01-15'

const isCode = (Class, code) => (error) => error instanceof Class && error.code === code
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A ref'd timer for tests that await a hung store (the limiter's own timers are unref'd). */
function keepAlive(t) {
  const timer = setInterval(() => {}, 1_000)
  t.after(() => clearInterval(timer))
}

/** Whether a promise has settled by the next macrotask turn (a covered consume has). */
async function settledAtOnce(promise) {
  let settled = false
  promise.then(() => (settled = true), () => (settled = true))
  await new Promise((resolve) => setImmediate(resolve))
  return settled
}

// ---------------------------------------------------------------------------------------------
// Without share

test('consume on a limiter without share answers what tryConsume would, as a promise', async () => {
  const options = { capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 5, period: UTC_DAY } }
  const a = new KeyedQuotaClock({ ...options, clock: manualClock({ wallMs: NOON }) })
  const b = new KeyedQuotaClock({ ...options, clock: manualClock({ wallMs: NOON }) })
  for (let i = 0; i < 3; i++) assert.deepEqual(await a.consume('k'), b.tryConsume('k'))
  await assert.rejects(a.consume(''), isCode(RangeError, 'ERR_INVALID_ARG'))
  await assert.rejects(a.consume('k', 3), isCode(RangeError, 'ERR_INVALID_ARG'))
  // A thrown error becomes a rejection, never a synchronous throw.
  const rejected = a.consume(42)
  assert.ok(rejected instanceof Promise)
  await assert.rejects(rejected, isCode(TypeError, 'ERR_INVALID_ARG'))
  assert.equal(await a.close(), undefined)
})

// ---------------------------------------------------------------------------------------------
// Options

test('share options are checked, each error naming share.<field>, and nothing is made', () => {
  const t = testStore()
  const base = { capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 10, period: UTC_DAY } }
  const make = (share) => () => new KeyedQuotaClock({ ...base, share })
  const named = (Class, field) => (error) => error instanceof Class && error.code === 'ERR_INVALID_OPTION' && error.message.includes(`share.${field}`)
  assert.throws(make('redis'), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_OPTION' && /share/.test(e.message))
  assert.throws(make({ name: 'api' }), named(TypeError, 'store'))
  assert.throws(make({ store: { kind: 'redis' }, name: 'api' }), named(TypeError, 'store'))
  assert.throws(make({ store: Object.create(t.store), name: 'api' }), named(TypeError, 'store'))
  assert.throws(make({ store: t.store }), named(TypeError, 'name'))
  assert.throws(make({ store: t.store, name: '' }), named(RangeError, 'name'))
  assert.throws(make({ store: t.store, name: 'x'.repeat(129) }), named(RangeError, 'name'))
  new KeyedQuotaClock({ ...base, share: { store: t.store, name: 'x'.repeat(128) } })
  for (const leaseUnits of [0, -1, 1.5, Number.MAX_SAFE_INTEGER + 1, NaN]) assert.throws(make({ store: t.store, name: 'a', leaseUnits }), named(RangeError, 'leaseUnits'))
  assert.throws(make({ store: t.store, name: 'a', leaseUnits: '10' }), named(TypeError, 'leaseUnits'))
  for (const field of ['idleMs', 'timeoutMs']) {
    for (const value of [0, -5, NaN, Infinity, 2 ** 31]) assert.throws(make({ store: t.store, name: 'a', [field]: value }), named(RangeError, field))
    new KeyedQuotaClock({ ...base, share: { store: t.store, name: 'a', [field]: 2.5 } })
    assert.throws(make({ store: t.store, name: 'a', [field]: '300' }), named(TypeError, field))
  }
  assert.throws(make({ store: t.store, name: 'a', failOpen: 'yes' }), named(TypeError, 'failOpen'))
  assert.throws(make({ store: t.store, name: 'a', leaseunits: 5 }), named(TypeError, 'leaseunits'))
  // leaseMs is the fleet bucket's: without bucket: true it is refused, not silently unused; the
  // message says what it is in the glossary's word (a slice's lease).
  for (const bucket of [undefined, false]) {
    const message = /^share\.leaseMs needs share\.bucket: true \(it is how long a fleet bucket's slice may be spent\); received share\.leaseMs 10000 and share\.bucket /
    assert.throws(make({ store: t.store, name: 'a', leaseMs: 10_000, bucket }), (error) => named(TypeError, 'leaseMs')(error) && message.test(error.message))
  }
  // A key whose value is undefined counts as absent.
  new KeyedQuotaClock({ ...base, share: { store: t.store, name: 'a', leaseUnits: undefined } })
  assert.equal(t.calls.reserve.length, 0)
})

test('tryConsume on a shared limiter throws ERR_SHARED_ASYNC; refund, status, delete and snapshot stay synchronous', () => {
  const t = testStore()
  const { limiter } = shared(t)
  assert.throws(() => limiter.tryConsume('k'), isCode(TypeError, 'ERR_SHARED_ASYNC'))
  assert.throws(() => limiter.tryConsume('k'), /consume/)
  assert.equal(limiter.refund('k'), undefined)
  assert.equal(limiter.status('k').quotaRemaining, 100)
  assert.equal(limiter.delete('k'), false)
  assert.ok(limiter.snapshot() instanceof Uint8Array)
  assert.equal(t.calls.reserve.length, 0)
})

// ---------------------------------------------------------------------------------------------
// Exact, and decided locally

test('limiters sharing one store and name admit exactly the limit between them, whatever they ask', async () => {
  const t = testStore()
  const limiters = [shared(t, { leaseUnits: 7 }), shared(t, { leaseUnits: 3 }), shared(t)].map(({ limiter }) => limiter)
  let admitted = 0
  const calls = []
  for (let i = 0; i < 400; i++) {
    const n = 1 + (i % 3)
    calls.push(limiters[i % 3].consume('tenant', n).then((d) => (admitted += d.allowed ? n : 0)))
    if (i % 17 === 0) await Promise.all(calls.splice(0))
  }
  await Promise.all(calls)
  assert.ok(admitted <= 100 && admitted >= 98, `admitted ${admitted}`)
  assert.ok(t.count('api', 'tenant', TODAY) <= 100)
  await Promise.all(limiters.map((limiter) => limiter.close()))
  assert.equal(t.count('api', 'tenant', TODAY), admitted, 'after close the store counts what was admitted')
})

test('units split between limiters are not lost: limiters draining 2 at a time admit exactly the limit', async () => {
  for (const leaseUnits of [3, 5, 7]) {
    const t = testStore()
    const limiters = [1, 2, 3].map(() => shared(t, { leaseUnits }, { quota: { limit: 300, period: UTC_DAY } }).limiter)
    let admitted = 0
    await Promise.all(
      limiters.map(async (limiter) => {
        while ((await limiter.consume('k', 2)).allowed) admitted += 2
      }),
    )
    assert.equal(admitted, 300, `leaseUnits ${leaseUnits}`)
    assert.equal(t.count('api', 'k', TODAY), 300)
  }
})

test('a consume the reservation covers makes no store call and is decided at once', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10 })
  await limiter.consume('k')
  assert.equal(t.calls.reserve.length, 1)
  const { instance, ...first } = t.calls.reserve[0]
  assert.match(instance, /^[0-9a-f]{12}$/)
  const expected = { name: 'api', key: 'k', periodId: TODAY, limit: 100, leaseUnits: 10, lacking: 1, charge: 0, expiresAtMs: Date.UTC(2024, 0, 16) }
  assert.deepEqual(first, { ...expected, held: 0, owned: 0, recordId: 0 })
  t.control.mode = 'hang'
  for (let i = 0; i < 5; i++) assert.ok(await settledAtOnce(limiter.consume('k')), 'covered, never waits')
  // 4 left of 10: below half a lease, the next slice was asked for in the background.
  assert.equal(t.calls.reserve.length, 2)
  assert.equal(t.calls.reserve[1].lacking, 0)
  for (let i = 0; i < 4; i++) assert.ok(await settledAtOnce(limiter.consume('k')))
  assert.equal(t.calls.reserve.length, 2, 'one store call in flight per key')
})

test('steady traffic never waits: the next slice is fetched before the current one runs out', async () => {
  const t = testStore()
  t.control.delayMs = 10
  const { limiter } = shared(t, { leaseUnits: 10 }, { quota: { limit: 10_000, period: UTC_DAY } })
  await limiter.consume('k')
  let waited = 0
  for (let i = 0; i < 60; i++) {
    if (!(await settledAtOnce(limiter.consume('k')))) waited++
    await sleep(4)
  }
  assert.equal(waited, 0)
  assert.ok(t.calls.reserve.length >= 6, `${t.calls.reserve.length} store calls`)
})

test('a process never holds more than leaseUnits unadmitted units of a key (what it strands if it dies)', async () => {
  const t = testStore()
  t.control.delayMs = 1
  const { limiter } = shared(t, { leaseUnits: 10 }, { quota: { limit: 10_000, period: UTC_DAY } })
  let admitted = 0
  let most = 0
  for (let i = 0; i < 300; i++) {
    if ((await limiter.consume('k', 1 + (i % 3))).allowed) admitted += 1 + (i % 3)
    if (i % 4 === 0) await sleep(2)
    most = Math.max(most, t.count('api', 'k', TODAY) - admitted)
  }
  assert.ok(most <= 10, `held ${most} unadmitted units`)
})

test('concurrent calls for one key share one store call', async () => {
  const t = testStore()
  t.control.delayMs = 5
  const { limiter } = shared(t, { leaseUnits: 20 }, { quota: { limit: 1_000, period: UTC_DAY } })
  const decisions = await Promise.all(Array.from({ length: 15 }, () => limiter.consume('k')))
  assert.ok(decisions.every((d) => d.allowed))
  const waitedFor = () => t.calls.reserve.filter((call) => call.lacking > 0).map((call) => call.key)
  assert.deepEqual(waitedFor(), ['k'], 'one store call for the 15')
  await Promise.all([limiter.consume('a'), limiter.consume('a', 2), limiter.consume('b')])
  assert.deepEqual(waitedFor(), ['k', 'a', 'b'], 'one per key')
})

test('a burst of concurrent calls on a new key costs a store call or two, not one per call, and admits exactly the limit', async () => {
  const t = testStore()
  t.control.delayMs = 2
  // (A timeoutMs no loaded machine reaches: 1,500 calls on a starved CPU can take longer than the default 300 ms.)
  const { limiter } = shared(t, { leaseUnits: 7, timeoutMs: 30_000 }, { quota: { limit: 1_000, period: UTC_DAY } })
  let admitted = 0
  const outcomes = await Promise.allSettled(Array.from({ length: 1_500 }, (_, i) => limiter.consume('k', 1 + (i % 2)).then((d) => (admitted += d.allowed ? 1 + (i % 2) : 0))))
  assert.deepEqual(outcomes.filter((o) => o.status === 'rejected'), [])
  assert.equal(admitted, 1_000)
  const waitedFor = t.calls.reserve.filter((call) => call.lacking > 0)
  assert.ok(waitedFor.length <= 3, `${waitedFor.length} store calls waited for`)
  assert.equal(t.count('api', 'k', TODAY), 1_000)
})

test('a store call reserves at most leaseUnits and an eighth of what is unreserved, at least what the call lacks; the default lease is 1% of the limit', async () => {
  const t = testStore()
  const { limiter } = shared(t, {}, { quota: { limit: 1_000, period: UTC_DAY } })
  await limiter.consume('k')
  assert.equal(t.calls.reserve[0].leaseUnits, 10)
  assert.equal(limiter.status('k').quotaRemaining, 999)
  const small = shared(t, {}, { quota: { limit: 50, period: UTC_DAY } }).limiter
  await small.consume('s', 5)
  assert.equal(t.calls.reserve[1].leaseUnits, 1, 'at least 1')
  assert.equal(t.calls.reserve[1].lacking, 5)
  await sleep(5)
  // 5 for the call, then 1 in the background (nothing left: below half a lease).
  assert.equal(t.count('api', 's', TODAY), 6)
  assert.equal(t.calls.reserve[2].lacking, 0)
})

test('denied with the quota wait when the reservation and the store together have fewer than n; nothing is consumed', async () => {
  const t = testStore()
  const a = shared(t, { leaseUnits: 50 }).limiter
  const b = shared(t, { leaseUnits: 50 }).limiter
  await a.consume('k', 60) // a reserves 60, admits them, then 5 more in the background
  await sleep(5)
  assert.equal(t.count('api', 'k', TODAY), 65)
  const d = await b.consume('k', 36)
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterBasis, 'wall-period')
  assert.equal(d.retryAfterMs, DAY / 2)
  assert.equal(d.quotaRemaining, 35)
  assert.equal(d.tokens, 1_000, 'nothing consumed')
  assert.equal(t.count('api', 'k', TODAY), 65)
  const e = await b.consume('k', 35)
  assert.equal(e.allowed, true)
  assert.equal(e.quotaRemaining, 0)
  // More than the limit: denied without asking the store.
  const calls = t.calls.reserve.length
  assert.equal((await b.consume('k', 101)).allowed, false)
  assert.equal(t.calls.reserve.length, calls)
})

test('a key the store left nothing is denied here, with no store call, for a second of the limiter clock; then the store is asked again', async () => {
  const t = testStore()
  const { limiter, clock } = shared(t, { leaseUnits: 10 })
  let admitted = 0
  while ((await limiter.consume('k')).allowed) admitted++
  assert.equal(admitted, 100)
  // The denial came from a store answer that left nothing: the key is short.
  const calls = t.calls.reserve.length
  for (let i = 0; i < 50; i++) {
    const denied = await limiter.consume('k')
    assert.equal(denied.allowed, false)
    assert.equal(denied.retryAfterBasis, 'wall-period')
  }
  clock.advance(999)
  assert.equal((await limiter.consume('k')).allowed, false)
  assert.equal(t.calls.reserve.length, calls, 'no store call while the key is short, whatever the process time')
  // A second of the limiter's clock later, a call asks the store once, and is short again.
  clock.advance(1)
  assert.equal((await limiter.consume('k')).allowed, false)
  assert.equal((await limiter.consume('k')).allowed, false)
  assert.equal(t.calls.reserve.length, calls + 1)
  // A grant (units freed in the store) is seen once the mark ends; close() clears it at once.
  t.records.get(JSON.stringify(['api', 'k', TODAY])).count -= 5
  assert.equal((await limiter.consume('k')).allowed, false, 'still short')
  await limiter.close()
  assert.equal((await limiter.consume('k')).allowed, true, 'asked the store at once after close()')
})

test('quotaRemaining is what the store had unreserved at the last call plus the local reservation left', async () => {
  const t = testStore()
  const a = shared(t, { leaseUnits: 10 }).limiter
  const b = shared(t, { leaseUnits: 10 }).limiter
  assert.equal((await a.consume('k')).quotaRemaining, 99)
  await b.consume('k', 30)
  // a has not heard from the store since: 90 unreserved then + 9 left.
  assert.equal((await a.consume('k')).quotaRemaining, 98)
  assert.equal(a.status('k').quotaRemaining, 98)
  assert.equal(a.status('k').quotaUsed, 2)
  assert.equal(b.status('k').quotaRemaining, 100 - 30 - 10 - 0)
})

test('refund returns units to the local reservation', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10 })
  await limiter.consume('k', 10)
  await sleep(5) // the next 10, reserved in the background
  assert.equal(limiter.status('k').quotaRemaining, 90)
  limiter.refund('k', 4)
  assert.equal(limiter.status('k').quotaRemaining, 94)
  const calls = t.calls.reserve.length
  assert.ok(await settledAtOnce(limiter.consume('k', 14)))
  assert.equal(t.calls.reserve.length, calls + 1, 'covered; only the next background refill')
})

test('a key without a quota (policy) is decided locally; per-key limits from policy are the ones the store is asked with', async () => {
  const t = testStore()
  const { limiter } = shared(t, {}, { policy: (key) => (key === 'free' ? { quota: null } : key === 'pro' ? { quota: { limit: 5_000, period: UTC_DAY } } : undefined) })
  assert.equal((await limiter.consume('free')).quotaRemaining, null)
  assert.equal(t.calls.reserve.length, 0)
  await limiter.consume('pro')
  assert.equal(t.calls.reserve[0].limit, 5_000)
  assert.equal(t.calls.reserve[0].leaseUnits, 50)
})

test('a new period reserves in the new period id', async () => {
  const t = testStore()
  const { limiter, clock } = shared(t)
  await limiter.consume('k')
  clock.advance(DAY)
  const d = await limiter.consume('k')
  assert.equal(d.quotaRemaining, 99)
  assert.equal(t.calls.reserve.at(-1).periodId, '2024-01-16')
})

// ---------------------------------------------------------------------------------------------
// The store unavailable

test('the store failing: an uncovered call rejects ERR_STORE_UNAVAILABLE naming share.name, the store error as cause, nothing consumed', async () => {
  const t = testStore()
  const { limiter } = shared(t, { name: 'billing' })
  const down = new Error('ECONNREFUSED')
  t.control.mode = 'fail'
  t.control.failWith = down
  await assert.rejects(limiter.consume('k'), (error) => {
    assert.ok(error instanceof QuotaClockError)
    assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
    assert.match(error.message, /"billing"/)
    assert.equal(error.cause, down)
    return true
  })
  assert.equal(limiter.status('k').tokens, 1_000)
  t.control.mode = 'ok'
  assert.equal((await limiter.consume('k')).allowed, true)
  assert.equal(storeStatsOf(limiter).errors, 1)
})

test('a store that throws a non-Error is still a coded rejection with the value kept', async () => {
  const t = testStore()
  const { limiter } = shared(t)
  t.control.mode = 'fail'
  t.control.failWith = 'nope'
  await assert.rejects(limiter.consume('k'), (error) => error.code === 'ERR_STORE_UNAVAILABLE' && error.cause instanceof Error && error.cause.cause === 'nope')
})

test('the store hanging: an uncovered call waits at most timeoutMs, later ones fail at once, and the late answer is kept', async (context) => {
  keepAlive(context)
  const t = testStore()
  // A timeoutMs long enough that "at once" (under half of it) holds on a loaded machine.
  const { limiter } = shared(t, { timeoutMs: 1_000, leaseUnits: 10 })
  t.control.mode = 'hang'
  const started = performance.now()
  await assert.rejects(limiter.consume('k'), (error) => error.code === 'ERR_STORE_UNAVAILABLE' && /1000 ms/.test(error.message))
  const waited = performance.now() - started
  // At least timeoutMs; the upper bound only says it did not hang (a loaded machine runs timers late).
  assert.ok(waited >= 995 && waited < 10_000, `waited ${waited} ms`)
  const again = performance.now()
  await assert.rejects(limiter.consume('k'), isCode(QuotaClockError, 'ERR_STORE_UNAVAILABLE'))
  assert.ok(performance.now() - again < 500, 'nothing queues while the store is away')
  assert.equal(t.calls.reserve.length, 1)
  assert.equal(storeStatsOf(limiter).timeouts, 1)
  t.control.mode = 'ok'
  t.release()
  await sleep(5)
  // The 10 units reserved late are the key's: the next calls are covered.
  const calls = t.calls.reserve.length
  const d = await limiter.consume('k')
  assert.equal(d.allowed, true)
  assert.equal(d.quotaRemaining, 99)
  assert.equal(t.calls.reserve.length, calls)
  assert.equal(t.count('api', 'k', TODAY), 10)
})

test('a covered call is decided as usual while the store is away', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10 })
  await limiter.consume('k')
  t.control.mode = 'fail'
  for (let i = 0; i < 9; i++) assert.equal((await limiter.consume('k')).allowed, true)
  await assert.rejects(limiter.consume('k'), isCode(QuotaClockError, 'ERR_STORE_UNAVAILABLE'))
})

test('failOpen: decided as if the quota had room, and the units are charged at the next store call that succeeds', async () => {
  const t = testStore()
  const { limiter } = shared(t, { failOpen: true, leaseUnits: 10 })
  t.control.mode = 'fail'
  const d = await limiter.consume('k', 3)
  assert.equal(d.allowed, true)
  assert.equal(limiter.status('k').tokens, 997)
  await sleep(5) // the background call (with the charge) fails too
  t.control.mode = 'ok'
  assert.equal((await limiter.consume('k', 5)).allowed, true)
  const charged = t.calls.reserve.filter((call) => call.charge > 0)
  assert.equal(charged.at(-1).charge, 3)
  assert.equal(t.count('api', 'k', TODAY), 3 + 10)
  await limiter.close()
  assert.equal(t.count('api', 'k', TODAY), 8)
})

test('failOpen units still owed when the limiter closes are charged then', async () => {
  const t = testStore()
  const { limiter } = shared(t, { failOpen: true })
  t.control.mode = 'fail'
  assert.equal((await limiter.consume('k', 4)).allowed, true)
  await sleep(5)
  t.control.mode = 'ok'
  await limiter.close()
  assert.equal(t.count('api', 'k', TODAY), 4)
})

test('a store answer that makes no sense is ERR_STORE_RESPONSE', async () => {
  const t = testStore()
  const { limiter } = shared(t)
  t.control.answer = { granted: -1, unreserved: 'lots' }
  await assert.rejects(limiter.consume('k'), isCode(QuotaClockError, 'ERR_STORE_RESPONSE'))
  t.control.answer = undefined
  assert.equal((await limiter.consume('k')).allowed, true)
})

// ---------------------------------------------------------------------------------------------
// Given back

test('unused units go back after idleMs', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10, idleMs: 40 }, { clock: systemClock() })
  await limiter.consume('k', 2)
  assert.equal(t.count('api', 'k', periodToday()), 10)
  await sleep(120)
  assert.equal(t.count('api', 'k', periodToday()), 2)
  assert.equal(storeStatsOf(limiter).returned, 8)
  assert.deepEqual(t.calls.giveBack.map(({ name, key, units }) => ({ name, key, units })), [{ name: 'api', key: 'k', units: 8 }])
})

function periodToday() {
  return new Date().toISOString().slice(0, 10)
}

test('idle give-back follows the limiter clock: a manual clock moved past idleMs', async () => {
  const t = testStore()
  const { limiter, clock } = shared(t, { leaseUnits: 10, idleMs: 1_000 })
  await limiter.consume('k')
  await sleep(300)
  assert.equal(t.calls.giveBack.length, 0)
  clock.advance(1_000)
  await sleep(300)
  assert.equal(t.count('api', 'k', TODAY), 1)
})

test('delete gives the key\'s unused units back; close gives back everything and resolves once the store has it', async () => {
  const t = testStore()
  t.control.delayMs = 20
  const { limiter } = shared(t, { leaseUnits: 10 })
  await Promise.all([limiter.consume('a', 3), limiter.consume('b', 1), limiter.consume('c', 10)])
  assert.equal(limiter.delete('a'), true)
  await sleep(40)
  assert.equal(t.count('api', 'a', TODAY), 3)
  const closing = limiter.close()
  assert.equal(t.count('api', 'b', TODAY), 10, 'not yet')
  await closing
  assert.equal(t.count('api', 'b', TODAY), 1)
  assert.equal(t.count('api', 'c', TODAY), 10)
})

test('close rejects ERR_STORE_UNAVAILABLE when the store does not take the units back', async (context) => {
  keepAlive(context)
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10, timeoutMs: 30 })
  await limiter.consume('a')
  t.control.mode = 'hang'
  await assert.rejects(limiter.close(), isCode(QuotaClockError, 'ERR_STORE_UNAVAILABLE'))
})

test('keys dropped to make room give their units back', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10 }, { maxKeys: 2 })
  await limiter.consume('a')
  limiter.refund('a') // no use left: 'a' may be dropped, 10 units unadmitted
  await limiter.consume('b')
  limiter.refund('b')
  await limiter.consume('c')
  await sleep(10)
  assert.ok(limiter.size <= 2)
  const back = t.calls.giveBack.map((call) => call.key).sort()
  assert.ok(back.length >= 1 && back.every((key) => key === 'a' || key === 'b'), JSON.stringify(back))
  for (const key of back) assert.equal(t.count('api', key, TODAY), 0)
})

test('a snapshot of a shared limiter holds the buckets only', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10 })
  await limiter.consume('k', 7)
  const plain = new KeyedQuotaClock({ capacity: 1_000, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), quota: { limit: 100, period: UTC_DAY }, restore: limiter.snapshot() })
  assert.equal(plain.status('k').tokens, 993)
  assert.equal(plain.status('k').quotaRemaining, 100)
})

test('timers of a shared limiter never keep the process alive', () => {
  const script = `
    const { KeyedQuotaClock } = require(${JSON.stringify(path.join(__dirname, '..'))})
    const { testStore } = require(${JSON.stringify(path.join(__dirname, 'helpers', 'test-store.js'))})
    const t = testStore()
    const limiter = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore',
      quota: { limit: 100, period: { unit: 'day', timeZone: 'UTC' } },
      share: { store: t.store, name: 'api', idleMs: 600000, timeoutMs: 600000 } })
    limiter.consume('a').then(() => { t.control.mode = 'hang'; limiter.consume('b', 5).catch(() => {}); console.log('done') })
  `
  const started = Date.now()
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(child.status, 0, child.stderr)
  assert.equal(child.stdout.trim(), 'done')
  assert.ok(Date.now() - started < 10_000)
})

test('failOpen units of a key left idle are charged by the idle timer once the store is back', async () => {
  const t = testStore()
  const { limiter, clock } = shared(t, { failOpen: true, idleMs: 20 })
  t.control.mode = 'fail'
  assert.equal((await limiter.consume('k', 2)).allowed, true)
  await sleep(5)
  t.control.mode = 'ok'
  clock.advance(50)
  await sleep(60)
  assert.equal(t.count('api', 'k', TODAY), 2)
})

test('a shared limiter on a JS clock object decides the same way', async () => {
  const t = testStore()
  let wall = NOON
  let monotonic = 0
  const clock = { monotonicMs: () => monotonic, wallMs: () => wall }
  const { limiter } = shared(t, { leaseUnits: 5 }, { clock, quota: { limit: 6, period: UTC_DAY } })
  const allowed = []
  for (let i = 0; i < 8; i++) {
    monotonic += 1
    wall += 1
    allowed.push((await limiter.consume('k')).allowed)
  }
  assert.deepEqual(allowed, [true, true, true, true, true, true, false, false])
  assert.equal(t.count('api', 'k', TODAY), 6)
})

test('the store counters: calls, errors, timeouts, units reserved and given back', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 10 })
  await limiter.consume('k', 3)
  await sleep(5)
  t.control.mode = 'fail'
  await assert.rejects(limiter.consume('j'))
  t.control.mode = 'ok'
  await limiter.close()
  const stats = storeStatsOf(limiter)
  assert.equal(stats.calls, t.calls.reserve.length + t.calls.giveBack.length, 'every store call counts, give-backs too')
  assert.deepEqual(stats, { calls: 3, errors: 1, timeouts: 0, reserved: 10, returned: 7 })
  assert.equal(storeStatsOf(new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })), undefined)
})

test('a covered consume is one native call: no other native entry point is called', async () => {
  const native = require('../lib/native/native.js')
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 50 }, { quota: { limit: 10_000, period: UTC_DAY } })
  await limiter.consume('k')
  const calls = []
  const originals = {}
  for (const name of Object.keys(native)) {
    if (typeof native[name] !== 'function') continue
    originals[name] = native[name]
    native[name] = (...args) => {
      calls.push(name)
      return originals[name](...args)
    }
  }
  try {
    for (let i = 0; i < 20; i++) assert.equal((await limiter.consume('k')).allowed, true)
  } finally {
    Object.assign(native, originals)
  }
  assert.deepEqual(calls, [])
  // 29 of 50 left: the next few calls ask for the next slice, once.
  for (let i = 0; i < 10; i++) await limiter.consume('k')
  assert.equal(t.calls.reserve.length, 2)
})

test('a lease larger than an eighth of what is left does not make every call a store call', async () => {
  const t = testStore()
  const { limiter } = shared(t, { leaseUnits: 50 })
  for (let i = 0; i < 60; i++) assert.equal((await limiter.consume('k')).allowed, true)
  // (13 when a refill was asked for below half a lease: on every call once the eighth rule bound.)
  assert.ok(t.calls.reserve.length <= 8, `${t.calls.reserve.length} store calls for 60 units of 100`)
})

// A key dropped to make room (maxKeys) while a call for it waits on the store: the call ends in a
// decision or ERR_KEY_LIMIT, never an internal error, never ERR_STORE_UNAVAILABLE from a store
// that answers.
for (const [label, maxKeys, keys, delayMs] of [
  ['two keys taking turns at maxKeys 1', 1, ['a', 'b'], 30],
  ['five keys at maxKeys 2', 2, ['a', 'b', 'c', 'd', 'e'], 30],
  ['five keys at maxKeys 2, a store answering in 0-30 ms', 2, ['a', 'b', 'c', 'd', 'e'], 'random'],
]) {
  test(`a key dropped while its call waits on the store: a decision or ERR_KEY_LIMIT (${label})`, async () => {
    const t = testStore()
    const { limiter } = shared(t, {}, { maxKeys, clock: systemClock() })
    const outcomes = {}
    const calls = []
    for (let i = 0; i < 200; i++) {
      t.control.delayMs = delayMs === 'random' ? Math.floor(Math.random() * 30) : delayMs
      calls.push(limiter.consume(keys[i % keys.length]).then(
        (decision) => (decision.allowed ? 'allowed' : `denied ${decision.retryAfterBasis}`),
        (error) => error.code,
      ))
      if (i % 3 === 2) await sleep(Math.floor(Math.random() * 10))
    }
    for (const outcome of await Promise.all(calls)) outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
    for (const outcome of Object.keys(outcomes)) assert.ok(['allowed', 'ERR_KEY_LIMIT'].includes(outcome) || outcome.startsWith('denied'), JSON.stringify(outcomes))
    assert.ok(outcomes.allowed > 0, JSON.stringify(outcomes))
    await limiter.close()
    // Every unit reserved and not admitted went back: the store counts exactly what was admitted.
    let counted = 0
    for (const key of keys) counted += t.count('api', key, new Date().toISOString().slice(0, 10))
    assert.equal(counted, outcomes.allowed)
  })
}

test('a store outage is one process warning per limiter (QUOTA_CLOCK_STORE_UNAVAILABLE), again only after the store answered', async () => {
  const { warningsDuring } = require('./helpers/warnings.js')
  const t = testStore()
  const { limiter } = shared(t)
  const { limiter: open } = shared(t, { name: 'open', failOpen: true })
  let key = 0
  const warnings = await warningsDuring('QUOTA_CLOCK_STORE_UNAVAILABLE', async () => {
    t.control.mode = 'fail'
    for (let i = 0; i < 3; i++) {
      await assert.rejects(limiter.consume(`k${++key}`), isCode(QuotaClockError, 'ERR_STORE_UNAVAILABLE'))
      assert.equal((await open.consume(`k${++key}`)).allowed, true)
    }
    t.control.mode = 'ok'
    assert.equal((await limiter.consume(`k${++key}`)).allowed, true)
    t.control.mode = 'fail'
    await assert.rejects(limiter.consume(`k${++key}`), isCode(QuotaClockError, 'ERR_STORE_UNAVAILABLE'))
  })
  t.control.mode = 'ok'
  assert.equal(warnings.length, 3, warnings.map((warning) => warning.message).join('\n'))
  assert.match(warnings[0].message, /share "api" unavailable \(the store failed: store down\).*refused with ERR_STORE_UNAVAILABLE until it answers again/)
  assert.match(warnings[1].message, /share "open".*allowed \(failOpen\)/)
  assert.match(warnings[2].message, /share "api"/)
  await Promise.allSettled([limiter.close(), open.close()])
})
