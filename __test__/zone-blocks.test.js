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

const linuxOnly = { skip: process.platform !== 'linux' && 'zones are Linux only' }

test('a block made in another process of the zone denies here at once, with no turn of the event loop', linuxOnly, async () => {
  const options = { ...OPTIONS, zone: { path: zonePath('at-once') } }
  const here = new KeyedQuotaClock(options)
  try {
    assert.equal(here.tryConsume('k').allowed, true)
    // spawnSync: this process's event loop does not turn until the other process has ended.
    runWorker(options, 'run', "limiter.block('k', 60000)")
    const d = here.tryConsume('k')
    assert.deepEqual([d.allowed, d.retryAfterBasis], [false, 'block'])
    assert.ok(d.retryAfterMs > 50_000 && d.retryAfterMs <= 60_000, String(d.retryAfterMs))
    assert.deepEqual([(await here.consume('k')).retryAfterBasis, here.status('k').blockedForMs > 50_000], ['block', true])
    runWorker(options, 'run', "limiter.unblock('k')")
    assert.equal(here.tryConsume('k').allowed, true, 'the unblock holds at once too')
  } finally {
    await here.close()
  }
})

test('in a zone, denials are counted in one run for every process of the host', linuxOnly, async () => {
  const options = { ...OPTIONS, capacity: 1, refillPerSecond: 0.001, zone: { path: zonePath('runs') }, block: { after: 4, withinMs: 60_000, forMs: 30_000 } }
  const here = new KeyedQuotaClock(options)
  try {
    assert.equal(here.tryConsume('k').allowed, true)
    for (let i = 0; i < 2; i++) assert.equal(here.tryConsume('k').retryAfterBasis, 'monotonic-refill')
    const [third, fourth] = runWorker(options, 'run', "print(limiter.tryConsume('k')); print(limiter.tryConsume('k'))")
    assert.equal(third.retryAfterBasis, 'monotonic-refill')
    assert.equal(fourth.retryAfterBasis, 'monotonic-refill', 'its own wait (about 1000 s) is longer than the block')
    assert.ok(here.status('k').blockedForMs > 25_000, 'the fourth denial of the host blocked the key')
    assert.equal(here.tryConsume('k').retryAfterBasis, 'block', 'blocked: denied with the block\'s time left')
    const stats = here.stats()
    assert.equal(stats.blocked, 1, 'this process\'s call the block denied')
    assert.equal(stats.blocks, 0, 'the block was started in the other process')
  } finally {
    await here.close()
  }
})

test('block on a key a zone does not hold holds it (size counts it), and a blocked key is never dropped to make room', linuxOnly, async () => {
  const options = { ...OPTIONS, maxKeys: 2, zone: { path: zonePath('hold') } }
  const here = new KeyedQuotaClock(options)
  try {
    here.block('new', 60_000)
    assert.equal(here.size, 1)
    for (let i = 0; i < 40; i++) here.tryConsume(`other${i}`)
    assert.equal(here.size, 2)
    assert.ok(here.status('new').blockedForMs > 50_000)
    const [there] = runWorker(options, 'run', "print(limiter.tryConsume('new'))")
    assert.equal(there.retryAfterBasis, 'block', 'held, with its block, in the zone')
    assert.equal(here.delete('new'), true, 'delete ends the block with the key')
    const [after] = runWorker(options, 'run', "print(limiter.tryConsume('new'))")
    assert.equal(after.allowed, true, 'in every process')
  } finally {
    await here.close()
  }
})

test('a zone made from a snapshot restores its blocks and levels for every process', linuxOnly, async () => {
  const { manualClock } = require('..')
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15, 12) })
  const block = { after: 1, withinMs: 60_000, forMs: [30_000, 120_000] }
  const source = new KeyedQuotaClock({ ...OPTIONS, capacity: 1, clock, block })
  source.tryConsume('auto')
  assert.equal(source.tryConsume('auto').retryAfterBasis, 'block', 'level 0 block, level 1 now')
  source.block('manual', 600_000)
  const options = { ...OPTIONS, capacity: 1, zone: { path: zonePath('restore') }, block }
  const here = new KeyedQuotaClock({ ...options, restore: source.snapshot() })
  try {
    assert.ok(here.status('manual').blockedForMs > 590_000)
    assert.ok(here.status('auto').blockedForMs > 25_000)
    const [manual, auto] = runWorker(options, 'run', "print(limiter.tryConsume('manual')); print(limiter.status('auto'))")
    assert.equal(manual.retryAfterBasis, 'block', 'the restored block holds in another process')
    assert.ok(auto.blockedForMs > 25_000)
    const image = Buffer.from(here.snapshot())
    assert.equal(image.readUInt16LE(4), 2, 'the zone\'s snapshot carries its blocks')
  } finally {
    await here.close()
  }
})

test('in a zone: a blocked key consumes nothing; refund, status and delete work as usual; block asks policy for a key not held, unblock asks none; bad arguments change nothing', linuxOnly, async () => {
  const asked = []
  const options = { ...OPTIONS, zone: { path: zonePath('sentences') } }
  const here = new KeyedQuotaClock({ ...options, policy: (key) => (asked.push(key), undefined) })
  try {
    here.block('new', 30_000)
    assert.deepEqual(asked, ['new'], 'policy asked once, for the key block holds')
    assert.equal(here.unblock('absent'), false)
    assert.deepEqual(asked, ['new'], 'unblock of a key not held asks no policy')
    assert.equal(here.status('new').tokens, 5)
    const d = here.tryConsume('new', 2)
    assert.deepEqual([d.allowed, d.retryAfterBasis, d.tokens], [false, 'block', 5])
    assert.ok(Number.isInteger(d.retryAfterMs) && d.retryAfterMs <= 30_000 && d.retryAfterMs > 25_000, 'whole ms, rounded up')
    assert.equal(here.status('new').tokens, 5, 'nothing consumed')
    here.refund('new')
    assert.equal(here.status('new').blockedForMs > 0, true)
    here.block('new', 1_000)
    assert.ok(here.status('new').blockedForMs > 25_000, 'a shorter block never replaces a longer one')
    assert.throws(() => here.block('new', 0), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG')
    assert.throws(() => here.block('', 1000), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG')
    assert.ok(here.status('new').blockedForMs > 25_000, 'unchanged')
    const stats = here.stats()
    assert.deepEqual([stats.blocked, stats.blocks, stats.denied], [1, 1, 1])
    assert.equal(here.unblock('new'), true)
    assert.equal(here.tryConsume('new').allowed, true)
  } finally {
    await here.close()
  }
})

test("two processes changing a zone's levels at once lose neither change (the levels file is changed under a lock)", async () => {
  const { spawn } = require('node:child_process')
  const file = zonePath('levels')
  const module = require.resolve('../lib/keyed/zone-blocks.js')
  // Each writer waits for a shared start file, then writes 300 levels of its own keys.
  const start = `${file}.go`
  const writer = (id) =>
    new Promise((resolve, reject) => {
      const source = `
        const fs = require('node:fs')
        const { ZoneLevelFile } = require(${JSON.stringify(module)})
        const levels = new ZoneLevelFile(${JSON.stringify(file)}, () => {})
        while (!fs.existsSync(${JSON.stringify(start)})) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1)
        for (let i = 0; i < 300; i++) levels.update((rows) => rows.set('${id}-' + i, ['${id}-' + i, 1, i]))
        levels.close()
      `
      const child = spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'ignore', 'pipe'] })
      let stderr = ''
      child.stderr.on('data', (chunk) => (stderr += chunk))
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`writer ${id}: ${code} ${stderr}`))))
    })
  const done = Promise.all([writer('a'), writer('b')])
  require('node:fs').writeFileSync(start, '')
  await done
  const { ZoneLevelFile } = require('../lib/keyed/zone-blocks.js')
  const levels = new ZoneLevelFile(file, () => {})
  const keys = new Set(levels.read().map((row) => row[0]))
  levels.close()
  assert.equal(keys.size, 600, `${600 - keys.size} changes lost`)
  assert.equal(require('node:fs').existsSync(`${file}.blocks.lock`), false, 'the lock released')
})
