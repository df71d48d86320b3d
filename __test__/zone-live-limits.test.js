'use strict'
// refreshPolicy and policyTtlMs in a zone: the key's limits are in the zone, so a
// refresh made in one process applies in every process of the host.

const test = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock } = require('..')
const { zonePath, runWorker } = require('./helpers/zone.js')

const UTC_MONTH = { unit: 'month', timeZone: 'UTC' }
const base = (path, more = {}) => ({ capacity: 1000, refillPerSecond: 1e-9, suspendPolicy: 'ignore', maxKeys: 100, zone: { path }, quota: { limit: 10, period: UTC_MONTH }, ...more })

/** A zone limiter here whose plans are a Map; `asked` counts its policy calls. */
function here(path, plans) {
  const asked = { count: 0 }
  const limiter = new KeyedQuotaClock(base(path, { policy: (key) => (asked.count++, plans.get(key)) }))
  return { limiter, asked }
}

test('a refresh marked here is applied by another process\'s next call, with its policy, and kept the count', () => {
  const path = zonePath()
  const plans = new Map([['tenant', { quota: { limit: 10, period: UTC_MONTH } }]])
  const { limiter, asked } = here(path, plans)
  for (let i = 0; i < 10; i++) assert.equal(limiter.tryConsume('tenant').allowed, true)
  assert.equal(limiter.tryConsume('tenant').allowed, false)
  limiter.refreshPolicy('tenant')
  // Every process loads the new plan; the other one meets the key first.
  const upgraded = { tenant: { quota: { limit: 50, period: UTC_MONTH } } }
  const [seen] = runWorker(base(path, { policyOf: upgraded }), 'run', "const d = limiter.tryConsume('tenant'); print({ allowed: d.allowed, remaining: d.quotaRemaining })")
  assert.deepEqual(seen, { allowed: true, remaining: 39 }, 'the use carried: 10 + 1 of 50')
  const asks = asked.count
  const status = limiter.status('tenant')
  assert.deepEqual([status.quotaLimit, status.quotaUsed, status.quotaRemaining], [50, 11, 39], 'the limits in force are the zone\'s')
  assert.equal(asked.count, asks, 'no process asks again once the refresh was applied')
})

test('a refresh marked in another process is applied by this process\'s next call (refreshPolicy() marks every key)', () => {
  const path = zonePath()
  const plans = new Map([['a', { quota: null }]])
  const { limiter, asked } = here(path, plans)
  assert.equal(limiter.tryConsume('a', 600).allowed, true)
  limiter.tryConsume('b', 1)
  const asks = asked.count
  runWorker(base(path), 'run', 'limiter.refreshPolicy()')
  plans.set('a', { capacity: 500, quota: null })
  const status = limiter.status('a')
  assert.deepEqual([status.capacity, status.quotaLimit, status.quotaUsed], [500, null, null])
  assert.equal(Math.round(status.tokens), 0, 'bucket to bucket: 400 + 500 - 1000, clamped at 0')
  limiter.status('b')
  assert.equal(asked.count, asks + 2)
  limiter.status('a')
  limiter.status('b')
  assert.equal(asked.count, asks + 2, 'the marks are cleared in the zone')
})

test('a zone key\'s bad answer changes nothing and stays marked for every process', () => {
  const path = zonePath()
  const plans = new Map()
  const { limiter } = here(path, plans)
  assert.equal(limiter.tryConsume('a', 3).allowed, true)
  limiter.refreshPolicy('a')
  plans.set('a', { capacity: -1 })
  assert.throws(() => limiter.tryConsume('a'), (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION')
  const [seen] = runWorker(base(path, { policyOf: { a: { capacity: 2000 } } }), 'run', "print(limiter.status('a'))")
  assert.equal(seen.capacity, 2000, 'still marked: the other process asked and applied its answer')
  assert.equal(seen.quotaUsed, 3)
  assert.equal(Math.round(seen.tokens), 1997 + 0)
})

test('policyTtlMs in a zone: a key\'s policy is asked again once that long has passed', async () => {
  const path = zonePath()
  let asked = 0
  const limiter = new KeyedQuotaClock(base(path, { policyTtlMs: 1, policy: () => (asked++, undefined) }))
  limiter.tryConsume('a')
  const start = performance.now()
  while (performance.now() - start < 5) await new Promise((resolve) => setImmediate(resolve))
  limiter.tryConsume('a')
  assert.equal(asked, 2)
  const without = new KeyedQuotaClock(base(path, { policy: () => (asked++, undefined) }))
  without.tryConsume('a')
  assert.equal(asked, 2, 'a process without policyTtlMs asks only marked keys')
})
