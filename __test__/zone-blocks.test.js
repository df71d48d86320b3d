'use strict'
// Blocks in a zone (docs/blocking.md, "Where it holds"): a block made in any process of the host
// holds in every process on the zone; an unblock too; an automatic block's level is the zone's.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock } = require('..')
const { zonePath, runWorker } = require('./helpers/zone.js')

const OPTIONS = { capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', maxKeys: 64 }
const turn = () => new Promise((resolve) => setImmediate(resolve))

/** Until `check()` holds, a turn of the event loop at a time, at most `withinMs`. */
async function until(check, withinMs, what) {
  const started = Date.now()
  while (!check()) {
    assert.ok(Date.now() - started < withinMs, `${what} within ${withinMs} ms`)
    await turn()
  }
}

test('a block made in another process of the zone denies here; an unblock there admits here', { skip: process.platform !== 'linux' && 'zones are Linux only' }, async () => {
  const path = zonePath('blocks')
  const options = { ...OPTIONS, zone: { path } }
  const here = new KeyedQuotaClock(options)
  try {
    assert.equal(here.tryConsume('k').allowed, true)
    const [blocked] = runWorker(options, 'run', "limiter.block('k', 60000); print(limiter.tryConsume('k'))")
    assert.deepEqual([blocked.allowed, blocked.retryAfterBasis], [false, 'block'], 'denied in the process that blocked')
    await until(() => here.status('k').blockedForMs > 0, 5_000, 'the block seen here')
    const d = here.tryConsume('k')
    assert.deepEqual([d.allowed, d.retryAfterBasis], [false, 'block'])
    assert.ok(d.retryAfterMs > 50_000 && d.retryAfterMs <= 60_000, String(d.retryAfterMs))
    const [lifted] = runWorker(options, 'run', "print(limiter.unblock('k'))")
    assert.equal(lifted, true, 'the other process saw the block')
    await until(() => here.status('k').blockedForMs === 0, 5_000, 'the unblock seen here')
    assert.equal(here.tryConsume('k').allowed, true)
    // And the other way: a block made here holds in a new process at once.
    here.block('m', 30_000)
    const [there] = runWorker(options, 'run', "print(limiter.tryConsume('m'))")
    assert.equal(there.retryAfterBasis, 'block')
  } finally {
    await here.close()
  }
})

test('an automatic block in a zone: the level is the zone\'s, whichever process starts the block', { skip: process.platform !== 'linux' && 'zones are Linux only' }, async () => {
  const path = zonePath('levels')
  const options = { ...OPTIONS, capacity: 1, refillPerSecond: 0.001, zone: { path }, block: { after: 1, withinMs: 60_000, forMs: [1, 3_600_000] } }
  const here = new KeyedQuotaClock(options)
  try {
    assert.equal(here.tryConsume('k').allowed, true)
    assert.equal(here.tryConsume('k').retryAfterBasis, 'monotonic-refill', 'its own wait is longer than the 1 ms block of level 0')
    await until(() => here.status('k').blockedForMs === 0, 5_000, 'the 1 ms block over')
    const [there] = runWorker(options, 'run', "print(limiter.tryConsume('k'))")
    assert.deepEqual([there.retryAfterBasis, there.retryAfterMs], ['block', 3_600_000], 'level 1, as the zone has it')
    await until(() => here.status('k').blockedForMs > 0, 5_000, 'the block seen here')
  } finally {
    await here.close()
  }
})
