'use strict'
// A KeyedQuotaClock's methods through each of its backends (lib/keyed/keyed-backend.js): the
// in-process table, a zone, and a shared table (on the in-process test store). Where the backends
// should behave alike, the same calls get the same answers; where they differ (tryConsume on a
// shared limiter, a zone's close), the difference is the documented one.

const test = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, systemClock } = require('..')
const { consumeKeyedTaken, takenKeyedPeriod } = require('../lib/keyed/keyed.js')
const { isClosed } = require('../lib/limiter/limiter-facts.js')
const { testStore } = require('./helpers/test-store.js')
const { zonePath } = require('./helpers/zone.js')

const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const OPTIONS = { capacity: 10, refillPerSecond: 1e-9, suspendPolicy: 'ignore', quota: { limit: 5, period: UTC_DAY }, clock: systemClock() }
const isCode = (Class, code) => (error) => error instanceof Class && error.code === code

const BACKENDS = {
  'in-process': () => ({ limiter: new KeyedQuotaClock(OPTIONS) }),
  zone: () => ({ limiter: new KeyedQuotaClock({ ...OPTIONS, maxKeys: 100, zone: { path: zonePath('stores') } }) }),
  shared: () => {
    const t = testStore()
    return { limiter: new KeyedQuotaClock({ ...OPTIONS, share: { store: t.store, name: 'stores', leaseUnits: 1 } }), t }
  },
}

for (const [kind, make] of Object.entries(BACKENDS)) {
  test(`${kind}: consume, status, refund, the taken period, delete, size and stats answer alike`, async () => {
    const { limiter } = make()
    const first = await limiter.consume('a', 3)
    assert.equal(first.allowed, true)
    assert.equal(first.tokens, 7)
    assert.equal(first.quotaRemaining, 2)
    assert.deepEqual(first.anomalies, [])
    assert.equal(limiter.status('a').quotaUsed, 3)
    assert.equal(limiter.refund('a', 1), undefined)
    assert.equal(limiter.status('a').quotaUsed, 2)

    const taken = await consumeKeyedTaken(limiter, 'a', 1)
    assert.equal(taken.decision.allowed, true)
    assert.equal(taken.decision.quotaRemaining, 2)
    assert.ok(Number.isInteger(taken.period))
    assert.equal(taken.period, takenKeyedPeriod(limiter))
    const denied = await limiter.consume('a', 3)
    assert.equal(denied.allowed, false)
    assert.equal(denied.retryAfterBasis, 'wall-period')

    await limiter.consume('b')
    assert.equal(limiter.size, 2)
    assert.equal(limiter.delete('a'), true)
    assert.equal(limiter.delete('a'), false)
    assert.equal(limiter.size, 1)
    assert.equal(limiter.status('a').quotaUsed, 0)
    assert.ok(limiter.snapshot() instanceof Uint8Array)

    const stats = limiter.stats()
    assert.equal(stats.allowed, 3)
    assert.equal(stats.denied, 1)
    assert.equal(stats.keys, 1)
    assert.equal('store' in stats, kind === 'shared')
    if (kind === 'shared') assert.ok(stats.store.calls >= 2)
    await limiter.close()
  })

  test(`${kind}: bad arguments reject consume's promise; tryConsume throws (on a shared limiter ERR_SHARED_ASYNC whatever the arguments)`, async () => {
    const { limiter } = make()
    await assert.rejects(limiter.consume(''), isCode(RangeError, 'ERR_INVALID_ARG'))
    await assert.rejects(limiter.consume(42), isCode(TypeError, 'ERR_INVALID_ARG'))
    await assert.rejects(limiter.consume('a', 0), isCode(RangeError, 'ERR_INVALID_ARG'))
    await assert.rejects(consumeKeyedTaken(limiter, 'a', 1.5), isCode(RangeError, 'ERR_INVALID_ARG'))
    assert.throws(() => limiter.delete(''), isCode(RangeError, 'ERR_INVALID_ARG'))
    if (kind === 'shared') {
      for (const args of [['a'], [''], [42], ['a', 0], []]) assert.throws(() => limiter.tryConsume(...args), isCode(TypeError, 'ERR_SHARED_ASYNC'))
      assert.equal(limiter.status('a').quotaUsed, 0, 'a refused tryConsume takes nothing')
    } else {
      assert.throws(() => limiter.tryConsume(''), isCode(RangeError, 'ERR_INVALID_ARG'))
      assert.throws(() => limiter.tryConsume('a', 0), isCode(RangeError, 'ERR_INVALID_ARG'))
      assert.equal(limiter.tryConsume('a', 2).quotaRemaining, 3)
    }
    assert.equal(limiter.stats().allowed, kind === 'shared' ? 0 : 1)
    await limiter.close()
  })

  test(`${kind}: close() resolves; only a zone limiter is closed for good`, async () => {
    const { limiter } = make()
    await limiter.consume('a')
    const closing = limiter.close()
    assert.ok(closing instanceof Promise)
    assert.equal(await closing, undefined)
    assert.equal(isClosed(limiter), kind === 'zone')
    if (kind === 'zone') {
      await assert.rejects(limiter.consume('a'), (error) => error.code === 'ERR_INVALID_ARG' && /closed/.test(error.message))
      assert.equal(limiter.stats().allowed, 1, 'a closed zone answers the counters it had')
    } else {
      assert.equal((await limiter.consume('a')).allowed, true, 'the limiter stays usable')
      await limiter.close()
    }
  })
}
