'use strict'
// `npm run bench`: ns per call of QuotaClock.tryConsume against the floor (one native call that
// reads the two clocks), the naive Date.now() bucket, `limiter` and `rate-limiter-flexible`;
// then bytes per idle limiter. One process, warm-up, several repetitions, medians; every case's
// answer is asserted before it is timed.
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const os = require('node:os')
const { QuotaClock } = require('..')
const native = require('../binding.js')
const { TokenBucket } = require('limiter')
const { RateLimiterMemory } = require('rate-limiter-flexible')

const REPETITIONS = Number(process.env.BENCH_REPETITIONS || 15)
const SYNC_ITERATIONS = Number(process.env.BENCH_ITERATIONS || 1_000_000)
const ASYNC_ITERATIONS = Math.max(1, Math.floor(SYNC_ITERATIONS / 10))

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

// Each case gets a loop of its own (fresh code, so its call site stays monomorphic and the
// engine can inline the case into it, as it would in an application).
const SYNC_LOOP_SOURCE = `
  let sink = 0
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) sink += op() ? 1 : 0
  const ns = Number(process.hrtime.bigint() - start) / iterations
  if (sink < 0) throw new Error('unreachable')
  return ns`

function syncTimer(op) {
  const loop = new Function('process', 'op', 'iterations', SYNC_LOOP_SOURCE)
  return (iterations) => loop(process, op, iterations)
}

async function timeAsync(op, iterations) {
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) await op()
  return Number(process.hrtime.bigint() - start) / iterations
}

function naiveBucket(capacity, refillPerSecond, initial) {
  let tokens = initial
  let last = Date.now()
  return () => {
    const now = Date.now()
    tokens = Math.min(capacity, tokens + ((now - last) * refillPerSecond) / 1000)
    last = now
    if (tokens < 1) return false
    tokens -= 1
    return true
  }
}

const LA_MONTH = { limit: Number.MAX_SAFE_INTEGER, period: { unit: 'month', timeZone: 'America/Los_Angeles' } }
const open = { capacity: 1e12, refillPerSecond: 1e12, suspendPolicy: 'ignore' }
const shut = { capacity: 1, refillPerSecond: 1e-9, initialTokens: 0, suspendPolicy: 'ignore' }

function quotaClockCase(options, expectAllowed) {
  const limiter = new QuotaClock(options)
  const decision = limiter.tryConsume(1)
  assert.equal(decision.allowed, expectAllowed)
  if (!expectAllowed) assert.equal(decision.retryAfterBasis, 'monotonic-refill')
  return () => limiter.tryConsume(1).allowed
}

function floorCase() {
  const buffer = new Float64Array(2)
  const read = native.clockFloor(buffer)
  read()
  assert.ok(buffer[0] > 0 && Math.abs(buffer[1] - Date.now()) < 1000, 'the floor reads the two clocks')
  return () => {
    read()
    return buffer[0] > 0
  }
}

function probeMethodCase() {
  const probe = new native.ClockProbe()
  assert.ok(probe.read() > Date.now())
  return () => probe.read() > 0
}

function probeHandleCase() {
  assert.ok(native.readClocksWithHandle(7) > Date.now())
  return () => native.readClocksWithHandle(7) > 0
}

function limiterCase() {
  const bucket = new TokenBucket({ bucketSize: 1e12, tokensPerInterval: 1e12, interval: 'second' })
  assert.equal(bucket.tryRemoveTokens(1), true)
  return () => bucket.tryRemoveTokens(1)
}

async function flexibleCases() {
  const allow = new RateLimiterMemory({ points: 1e12, duration: 1000 })
  const reject = new RateLimiterMemory({ points: 1, duration: 1000 })
  await allow.consume('k')
  await reject.consume('k')
  await assert.rejects(reject.consume('k'), (res) => res.remainingPoints === 0)
  return {
    allow: () => allow.consume('k'),
    reject: () => reject.consume('k').then(
      () => assert.fail('expected a rejection'),
      () => false,
    ),
  }
}

function idleBytes() {
  const script = `
    const { QuotaClock } = require(${JSON.stringify(require.resolve('..'))})
    const make = (i) => new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore' })
    const keep = []
    for (let i = 0; i < 1000; i++) keep.push(make(i)); keep.length = 0
    global.gc(); global.gc()
    const before = process.memoryUsage()
    for (let i = 0; i < 100000; i++) keep.push(make(i))
    global.gc(); global.gc()
    const after = process.memoryUsage()
    if (keep[99999].tryConsume().allowed !== true) throw new Error('limiter broken')
    console.log(JSON.stringify({ rss: (after.rss - before.rss) / 1e5, heap: (after.heapUsed - before.heapUsed) / 1e5, external: (after.external - before.external) / 1e5 }))
  `
  return JSON.parse(execFileSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' }))
}

async function main() {
  const syncCases = [
    ['floor: one native call reading the two clocks', floorCase()],
    ['tryConsume(1) allowed, systemClock', quotaClockCase(open, true)],
    ['tryConsume(1) denied, systemClock', quotaClockCase(shut, false)],
    ['tryConsume(1) allowed, monthly quota (Los Angeles)', quotaClockCase({ ...open, quota: LA_MONTH }, true)],
    ['tryConsume(1) denied, monthly quota (Los Angeles)', quotaClockCase({ ...shut, quota: LA_MONTH }, false)],
    ['call pattern: #[napi] class method reading the two clocks', probeMethodCase()],
    ['call pattern: #[napi] free function with a handle argument', probeHandleCase()],
    ['naive four-line Date.now() bucket', naiveBucket(1e12, 1e12, 1e12)],
    ['limiter TokenBucket.tryRemoveTokens(1)', limiterCase()],
  ]
  const flexible = await flexibleCases()
  const asyncCases = [
    ['rate-limiter-flexible Memory.consume, allow (awaited)', flexible.allow],
    ['rate-limiter-flexible Memory.consume, reject (awaited)', flexible.reject],
  ]

  const samples = new Map([...syncCases, ...asyncCases].map(([name]) => [name, []]))
  const timers = new Map(syncCases.map(([name, op]) => [name, syncTimer(op)]))
  // Warm-up, then interleaved repetitions so a noisy moment hits every case alike.
  for (const [name] of syncCases) timers.get(name)(SYNC_ITERATIONS / 4)
  for (const [, op] of asyncCases) await timeAsync(op, ASYNC_ITERATIONS / 4)
  for (let r = 0; r < REPETITIONS; r++) {
    for (const [name] of syncCases) samples.get(name).push(timers.get(name)(SYNC_ITERATIONS))
    for (const [name, op] of asyncCases) samples.get(name).push(await timeAsync(op, ASYNC_ITERATIONS))
  }
  const ns = new Map([...samples].map(([name, values]) => [name, median(values)]))
  // A ratio is the median, over the repetitions, of the two cases' times in the same repetition:
  // they ran within a second of each other, so a slow spell of this shared machine hits both.
  const ratio = (a, b) => median(samples.get(a).map((value, r) => value / samples.get(b)[r]))
  const ALLOWED = 'tryConsume(1) allowed, systemClock'

  console.log(`node ${process.version}, ${os.cpus()[0].model.trim()}, ${os.cpus().length} cores; ${REPETITIONS} repetitions, medians\n`)
  console.log(`| case | ns/op | × tryConsume(1) |`)
  console.log(`|---|---:|---:|`)
  for (const [name, value] of ns) console.log(`| ${name} | ${value.toFixed(1)} | ${ratio(name, ALLOWED).toFixed(2)} |`)
  const memory = idleBytes()
  console.log(`| bytes per idle limiter (100,000 instances): RSS | ${memory.rss.toFixed(0)} B | |`)
  console.log(`| bytes per idle limiter (100,000 instances): JS heap | ${memory.heap.toFixed(0)} B | |`)

  const FLOOR = 'floor: one native call reading the two clocks'
  const DENIED = 'tryConsume(1) denied, systemClock'
  const BUCKET = 'limiter TokenBucket.tryRemoveTokens(1)'
  const ALLOW = 'rate-limiter-flexible Memory.consume, allow (awaited)'
  const REJECT = 'rate-limiter-flexible Memory.consume, reject (awaited)'
  const QUOTA = 'tryConsume(1) allowed, monthly quota (Los Angeles)'
  const times = (value) => `${value.toFixed(2)}×`
  // Like against like: our allowed call against its allow, our denial against its rejection.
  // The last column puts each target next to the floor: the fastest tryConsume it allows, as a
  // multiple of a call that does nothing but read the two clocks.
  const floorRatio = (name) => ratio(name, FLOOR)
  const targets = [
    ['tryConsume(1) ≤ 1.3 × floor', ratio(ALLOWED, FLOOR), (r) => r <= 1.3, '1.30× floor'],
    ['tryConsume(1) ≤ 1.3 × limiter TokenBucket', ratio(ALLOWED, BUCKET), (r) => r <= 1.3, times(1.3 * floorRatio(BUCKET)) + ' floor'],
    ['≥ 2.5× faster than rate-limiter-flexible allow (allowed call)', ratio(ALLOW, ALLOWED), (r) => r >= 2.5, times(floorRatio(ALLOW) / 2.5) + ' floor'],
    ['≥ 15× faster than rate-limiter-flexible reject (denied call)', ratio(REJECT, DENIED), (r) => r >= 15, times(floorRatio(REJECT) / 15) + ' floor'],
    ['monthly quota ≤ 1.15 × without', ratio(QUOTA, ALLOWED), (r) => r <= 1.15, ''],
  ]
  console.log('\n| target | holds | measured | tryConsume at most |\n|---|---|---|---|')
  for (const [name, measured, holds, asks] of targets) console.log(`| ${name} | ${holds(measured) ? 'yes' : 'NO'} | ${times(measured)} | ${asks} |`)
  console.log(`| bytes per idle limiter < 1 KiB (aim) | ${memory.rss < 1024 ? 'yes' : 'NO'} | ${memory.rss.toFixed(0)} B | |`)
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
