'use strict'
// KeyedQuotaClock with `zone`: one limiter for every process of the host that opens the file.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { KeyedQuotaClock, manualClock, systemClock, procUptimeElapsedRealtime } = require('..')
const { zonePath, runWorker, startWorker } = require('./helpers/zone.js')

const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const base = (path, more = {}) => ({ capacity: 1000, refillPerSecond: 1e-9, suspendPolicy: 'ignore', maxKeys: 100, zone: { path }, ...more })
const isCode = (Class, code) => (error) => error instanceof Class && error.code === code

test('four processes draining one key admit exactly the bucket, and exactly the quota', async () => {
  const bucket = base(zonePath())
  const quota = base(zonePath(), { capacity: 1e6, quota: { limit: 700, period: UTC_DAY } })
  for (const [options, expected] of [
    [bucket, 1000],
    [quota, 700],
  ]) {
    const workers = [0, 1, 2, 3].map(() => startWorker(options, 'drain', 'shared', 600))
    const results = await Promise.all(workers.map((worker) => worker.done))
    for (const result of results) assert.equal(result.status, 0, result.stderr)
    const total = results.reduce((sum, result) => sum + result.lines[0].allowed, 0)
    assert.equal(total, expected)
    const limiter = new KeyedQuotaClock(options)
    assert.equal(limiter.tryConsume('shared').allowed, false)
    assert.equal(limiter.size, 1)
  }
})

test('a zone is one limiter: what one process takes another sees, refunds and deletes included', () => {
  const path = zonePath()
  const options = base(path, { capacity: 10, quota: { limit: 5, period: UTC_DAY } })
  const here = new KeyedQuotaClock(options)
  runWorker(options, 'run', "for (let i = 0; i < 3; i++) limiter.tryConsume('tenant')")
  const status = here.status('tenant')
  assert.equal(status.quotaUsed, 3)
  assert.equal(Math.round(status.tokens), 7)
  here.refund('tenant', 2)
  const [seen] = runWorker(options, 'run', "print(limiter.status('tenant'))")
  assert.equal(seen.quotaUsed, 1)
  assert.equal(Math.round(seen.tokens), 9)
  const [deleted] = runWorker(options, 'run', "print({ deleted: limiter.delete('tenant'), size: limiter.size })")
  assert.deepEqual(deleted, { deleted: true, size: 0 })
  assert.equal(here.size, 0)
  assert.equal(here.status('tenant').quotaUsed, 0)
})

test('the file is made at the first open and stays after close(); a closed limiter refuses calls', async () => {
  const path = zonePath()
  assert.equal(fs.existsSync(path), false)
  const limiter = new KeyedQuotaClock(base(path))
  limiter.tryConsume('a', 10)
  assert.ok(fs.statSync(path).size > 0)
  await limiter.close()
  assert.ok(fs.existsSync(path))
  assert.throws(() => limiter.tryConsume('a'), (error) => error.code === 'ERR_INVALID_ARG' && /closed/.test(error.message))
  const again = new KeyedQuotaClock(base(path))
  assert.equal(Math.round(again.status('a').tokens), 990)
})

test('later opens with other options are ERR_ZONE_MISMATCH naming the first option that differs', () => {
  const path = zonePath()
  const options = base(path, { quota: { limit: 50, period: UTC_DAY } })
  new KeyedQuotaClock(options)
  const cases = [
    [{ capacity: 999 }, 'capacity'],
    [{ refillPerSecond: 2 }, 'refillPerSecond'],
    [{ quota: { limit: 51, period: UTC_DAY } }, 'quota'],
    [{ quota: { limit: 50, period: { unit: 'day', timeZone: 'America/Los_Angeles' } } }, 'quota'],
    [{ quota: undefined }, 'quota'],
    [{ suspendPolicy: 'credit' }, 'suspendPolicy'],
    [{ earliestPlausibleWallMs: null }, 'earliestPlausibleWallMs'],
    [{ maxKeys: 101 }, 'maxKeys'],
    [{ capacity: 999, maxKeys: 101 }, 'capacity'],
  ]
  for (const [change, option] of cases) {
    assert.throws(
      () => new KeyedQuotaClock({ ...options, ...change }),
      (error) => error instanceof RangeError && error.code === 'ERR_ZONE_MISMATCH' && error.message.includes(`made with ${option} `) && error.message.includes(`this limiter has ${option} `),
      option,
    )
  }
  // The same options open it.
  new KeyedQuotaClock({ ...options })
})

test('only systemClock() drives a zone; any other clock is ERR_INVALID_OPTION', () => {
  const path = zonePath()
  for (const clock of [manualClock(), { monotonicMs: () => performance.now(), wallMs: () => Date.now() }, systemClock({ elapsedRealtimeMs: () => 0 })]) {
    assert.throws(() => new KeyedQuotaClock(base(path, { clock })), isCode(TypeError, 'ERR_INVALID_OPTION'))
  }
  assert.equal(fs.existsSync(path), false, 'a refused clock makes no file')
  new KeyedQuotaClock(base(path, { clock: systemClock() }))
  const withReader = zonePath()
  new KeyedQuotaClock(base(withReader, { clock: systemClock({ elapsedRealtimeMs: procUptimeElapsedRealtime() }) }))
  assert.throws(() => new KeyedQuotaClock(base(withReader)), (error) => error.code === 'ERR_ZONE_MISMATCH' && /made with clock systemClock\(\) with procUptimeElapsedRealtime\(\); this limiter has clock systemClock\(\) /.test(error.message))
})

test('zone must be { path } with a non-empty path', () => {
  for (const zone of [null, 'x', { path: '' }, { path: 5 }, { file: '/dev/shm/x' }, { path: 'a\0b' }]) {
    assert.throws(() => new KeyedQuotaClock(base('unused', { zone })), (error) => error.code === 'ERR_INVALID_OPTION' && /zone/.test(error.message))
  }
})

test('a garbage, empty, truncated or grown zone file is ERR_INVALID_OPTION naming zone.path, never a crash', () => {
  const good = zonePath()
  new KeyedQuotaClock(base(good)).tryConsume('a')
  const bytes = fs.readFileSync(good)
  const variants = {
    empty: Buffer.alloc(0),
    garbage: Buffer.from('not a zone at all, just some text that is long enough'.repeat(200)),
    random: Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919 + 13) & 0xff)),
    truncated: bytes.subarray(0, bytes.length >> 1),
    headerOnly: bytes.subarray(0, 512),
    grown: Buffer.concat([bytes, Buffer.alloc(4096)]),
    corruptHeader: Buffer.from(bytes).fill(0x5a, 40, 48),
    // A valid header, then random bytes: the body is not a zone's either.
    randomBody: Buffer.concat([bytes.subarray(0, 512), require('node:crypto').randomBytes(bytes.length - 512)]),
  }
  for (const [name, content] of Object.entries(variants)) {
    const path = zonePath(name)
    fs.writeFileSync(path, content)
    assert.throws(() => new KeyedQuotaClock(base(path)).tryConsume('a'), (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION' && error.message.includes(`zone.path ${JSON.stringify(path)} is not a zone file`), name)
    assert.equal(fs.readFileSync(path).length, content.length, `${name}: the file is left as it was`)
  }
  const directory = zonePath('dir')
  fs.mkdirSync(directory)
  assert.throws(() => new KeyedQuotaClock(base(directory)), (error) => error.code === 'ERR_INVALID_OPTION')
})

test('a zone file name of 250 characters (legal) is made: the temporary file beside it has a short name, and none is left', () => {
  const path = zonePath('z').replace(/[^/]*$/, (name) => name + 'x'.repeat(250 - name.length))
  assert.equal(path.split('/').pop().length, 250)
  const limiter = new KeyedQuotaClock(base(path))
  assert.equal(limiter.tryConsume('a').allowed, true)
  limiter.close()
  const dir = path.slice(0, path.lastIndexOf('/'))
  assert.deepEqual(fs.readdirSync(dir).filter((name) => name.endsWith('.tmp') || name.startsWith('.')), [])
})

test('a dangling symbolic link at zone.path is refused saying what it is, and left as it was', () => {
  const path = zonePath('dangling')
  const target = zonePath('nowhere')
  fs.symlinkSync(target, path)
  assert.throws(
    () => new KeyedQuotaClock(base(path)),
    (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION' && error.message.includes(`zone.path ${JSON.stringify(path)} is a symbolic link to ${JSON.stringify(target)}, which does not exist`),
  )
  assert.equal(fs.readlinkSync(path), target)
  assert.equal(fs.existsSync(target), false)
})

test('policy is called by the process that first holds a key; the others use what it chose', () => {
  const path = zonePath()
  const options = base(path, { capacity: 10, policyOf: { tenant: { capacity: 3 }, throwFor: 'nobody' } })
  const [first] = runWorker(options, 'run', "print(limiter.tryConsume('tenant'))")
  assert.equal(first.tokens, 2)
  const [second] = runWorker({ ...options, policyOf: { throwFor: 'tenant' } }, 'run', "print([limiter.tryConsume('tenant'), limiter.status('tenant').capacity])")
  assert.equal(second[0].allowed, true)
  assert.equal(Math.round(second[0].tokens), 1)
  assert.equal(second[1], 3)
})

test('eviction and ERR_KEY_LIMIT hold across processes', () => {
  const path = zonePath()
  const options = base(path, { capacity: 10, maxKeys: 2, quota: { limit: 100, period: UTC_DAY } })
  const here = new KeyedQuotaClock(options)
  here.tryConsume('a')
  runWorker(options, 'run', "limiter.tryConsume('b')")
  const [refused] = runWorker(options, 'run', "try { limiter.tryConsume('c'); print('held') } catch (error) { print([error.code, error.message, limiter.size]) }")
  assert.equal(refused[0], 'ERR_KEY_LIMIT')
  assert.match(refused[1], /maxKeys/)
  assert.equal(refused[2], 2)
  // Without quota use, the least recently used key makes room (its bucket comes back full).
  const bucketOnly = base(zonePath(), { capacity: 10, maxKeys: 2 })
  const limiter = new KeyedQuotaClock(bucketOnly)
  limiter.tryConsume('a', 5)
  runWorker(bucketOnly, 'run', "limiter.tryConsume('b', 5)")
  runWorker(bucketOnly, 'run', "limiter.tryConsume('c', 5)")
  assert.equal(limiter.size, 2)
  assert.equal(Math.round(limiter.status('a').tokens), 10, "'a', least recently used, was dropped")
  assert.equal(Math.round(limiter.status('b').tokens), 5)
})

test('snapshot() reads the zone: every process\'s keys, in the snapshot format restore takes', () => {
  const path = zonePath()
  const options = base(path, { capacity: 10, quota: { limit: 9, period: UTC_DAY } })
  const here = new KeyedQuotaClock(options)
  here.tryConsume('mine', 2)
  runWorker(options, 'run', "limiter.tryConsume('theirs', 3)")
  const restored = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1e-9, suspendPolicy: 'ignore', quota: { limit: 9, period: UTC_DAY }, restore: here.snapshot() })
  assert.equal(restored.size, 2)
  assert.equal(restored.status('theirs').quotaUsed, 3)
  assert.equal(restored.status('mine').quotaUsed, 2)
})

test('restore applies only when the zone file is created', () => {
  const source = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1e-9, suspendPolicy: 'ignore', maxKeys: 100 })
  source.tryConsume('saved', 4)
  const path = zonePath()
  const made = new KeyedQuotaClock(base(path, { capacity: 10, restore: source.snapshot() }))
  assert.equal(made.size, 1)
  assert.equal(Math.round(made.status('saved').tokens), 6)
  source.tryConsume('other')
  const opened = new KeyedQuotaClock(base(path, { capacity: 10, restore: source.snapshot() }))
  assert.equal(opened.size, 1, 'a second restore is not applied')
})

test('keys of every length and encoding are told apart, long ones included', () => {
  const path = zonePath()
  const limiter = new KeyedQuotaClock(base(path, { capacity: 5 }))
  const keys = ['a', 'é', '\u{1f600}', 'x'.repeat(24), 'x'.repeat(25), 'y'.repeat(256), '\ud800', 'ab', 'a\0']
  keys.forEach((key, i) => limiter.tryConsume(key, 1 + (i % 5)))
  const [seen] = runWorker(base(path, { capacity: 5 }), 'run', `print(${JSON.stringify(keys)}.map((key) => Math.round(limiter.status(key).tokens)))`)
  assert.deepEqual(seen, keys.map((_, i) => 5 - (1 + (i % 5))))
})

test('a zone written before the host rebooted (another boot id) is taken over like a restore', async () => {
  const { HEADER } = require('./helpers/zone.js')
  const path = zonePath('reboot')
  const options = base(path, { capacity: 10, refillPerSecond: 0.001, quota: { limit: 9, period: UTC_DAY } })
  const before = new KeyedQuotaClock(options)
  before.tryConsume('a', 4)
  before.tryConsume('b', 2)
  await before.close()
  const bootId = fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  const file = fs.openSync(path, 'r+')
  const stored = Buffer.alloc(HEADER.bootIdBytes)
  fs.readSync(file, stored, 0, stored.length, HEADER.bootId)
  assert.equal(stored.toString('latin1').replace(/\0+$/, ''), bootId, 'the header holds this boot id')
  fs.writeSync(file, Buffer.from('00000000-0000-4000-8000-000000000000'), 0, 36, HEADER.bootId)
  fs.closeSync(file)
  const after = new KeyedQuotaClock(options)
  assert.equal(after.size, 2)
  const a = after.status('a')
  assert.equal(a.quotaUsed, 4, 'quota use in the period still open is kept')
  assert.ok(a.tokens >= 6 && a.tokens < 6.01, `tokens as saved, no refill for the time down (${a.tokens})`)
  assert.equal(after.tryConsume('a', 5).allowed, true)
  assert.equal(after.tryConsume('a').allowed, false, 'the quota (9) counts the use from before the reboot')
  const rewritten = fs.readFileSync(path).subarray(HEADER.bootId, HEADER.bootId + 36).toString('latin1')
  assert.equal(rewritten, bootId)
})

test('a quota alone (no bucket) works in a zone', () => {
  const path = zonePath()
  const options = { suspendPolicy: 'ignore', maxKeys: 10, quota: { limit: 3, period: UTC_DAY }, zone: { path } }
  const here = new KeyedQuotaClock(options)
  assert.equal(here.tryConsume('q', 2).tokens, Infinity)
  const [seen] = runWorker(options, 'run', "print([limiter.tryConsume('q').allowed, limiter.tryConsume('q').allowed])")
  assert.deepEqual(seen, [true, false])
  assert.equal(here.status('q').quotaRemaining, 0)
})

test('behind the HTTP middleware, a zone limiter gets back what a later limit refused (all or nothing)', async () => {
  const { rateLimit } = require('../lib/http.js')
  const { serve } = require('./helpers/http-servers.js')
  const path = zonePath('http')
  const zoned = new KeyedQuotaClock(base(path, { capacity: 10, quota: { limit: 5, period: UTC_DAY } }))
  const closed = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1e-9, suspendPolicy: 'ignore' })
  const server = await serve('Express 5', rateLimit({ key: () => 'client', limits: [{ limiter: zoned, name: 'zone' }, { limiter: closed, name: 'local' }] }))
  try {
    assert.equal((await server.get('/')).status, 200)
    assert.equal((await server.get('/')).status, 429)
    assert.equal((await server.get('/')).status, 429)
  } finally {
    await server.close()
  }
  const [seen] = runWorker(base(path, { capacity: 10, quota: { limit: 5, period: UTC_DAY } }), 'run', "print(limiter.status('client'))")
  assert.equal(seen.quotaUsed, 1, 'the two refused requests took nothing from the zone')
  assert.equal(Math.round(seen.tokens), 9)
})

test('a zone where it is not tested (not Linux) is QuotaClockError ERR_UNSUPPORTED_PLATFORM, and makes no file', () => {
  const { runScript } = require('./helpers/child.js')
  const path = zonePath('platform')
  const { result } = runScript(`
    const { KeyedQuotaClock, QuotaClockError } = require(ROOT)
    // The addon is loaded for this platform; the limiter is then made as on another.
    Object.defineProperty(process, 'platform', { value: 'darwin' })
    try {
      new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', zone: { path: ${JSON.stringify(path)} } })
      console.log(JSON.stringify('made'))
    } catch (error) {
      console.log(JSON.stringify([error instanceof QuotaClockError, error.code, error.message]))
    }
  `)
  assert.equal(result[0], true)
  assert.equal(result[1], 'ERR_UNSUPPORTED_PLATFORM')
  assert.match(result[2], /darwin/)
  assert.equal(fs.existsSync(path), false)
})

test("snapshot() lists a zone's keys least recently used first", () => {
  const path = zonePath()
  const limiter = new KeyedQuotaClock(base(path, { capacity: 10 }))
  for (const key of ['c', 'a', 'b', 'c']) limiter.tryConsume(key)
  // Restored with room for just these keys, a new key drops the least recently used one.
  const full = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1e-9, suspendPolicy: 'ignore', maxKeys: 3, restore: limiter.snapshot() })
  full.tryConsume('d')
  assert.equal(Math.round(full.status('a').tokens), 10, "'a', used least recently, was dropped")
  assert.equal(Math.round(full.status('b').tokens), 9)
  assert.equal(Math.round(full.status('c').tokens), 8)
})

test('zone and share together are refused (ERR_INVALID_OPTION), and no zone file is made', async () => {
  const Redis = require('ioredis')
  const { redisStore } = require('../lib/shared.js')
  const client = new Redis({ lazyConnect: true })
  try {
    const path = zonePath('share')
    const options = base(path, { quota: { limit: 10, period: UTC_DAY }, share: { store: redisStore(client), name: 'api' } })
    assert.throws(() => new KeyedQuotaClock(options), (error) => error instanceof TypeError && error.code === 'ERR_INVALID_OPTION' && /zone and share/.test(error.message))
    assert.equal(fs.existsSync(path), false)
  } finally {
    client.disconnect()
  }
})

test("stats() of a zone limiter counts its own calls; keys is the zone's", () => {
  const path = zonePath('stats')
  const options = base(path, { capacity: 2, maxKeys: 2, quota: { limit: 1, period: UTC_DAY } })
  const here = new KeyedQuotaClock(options)
  here.tryConsume('a')
  here.tryConsume('a')
  runWorker(options, 'run', "limiter.tryConsume('b'); try { limiter.tryConsume('c') } catch {}")
  assert.throws(() => here.tryConsume('c'), (error) => error.code === 'ERR_KEY_LIMIT')
  const stats = here.stats()
  assert.equal(stats.allowed, 1)
  assert.equal(stats.denied, 1)
  assert.equal(stats.keyLimitRefusals, 1)
  assert.equal(stats.keys, 2, 'the keys held in the zone, by every process')
  assert.equal(stats.evicted, 0)
  // Without quota use, making room is an eviction of this limiter's.
  const bucket = new KeyedQuotaClock(base(zonePath('stats-bucket'), { capacity: 2, maxKeys: 1 }))
  bucket.tryConsume('x')
  bucket.tryConsume('y')
  assert.equal(bucket.stats().evicted, 1)
})
