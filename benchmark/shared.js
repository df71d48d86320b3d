'use strict'
// `npm run bench:shared`: the shared limiter (`share`) on one local redis-server, started here.
// In one run, on one ioredis connection:
// - a covered shared `consume` (the key's reservation holds the units) against the same
//   limiter's local `consume` without `share` (target: at most 1.5x), and against
//   rate-limiter-flexible's RateLimiterRedis, one Redis call per request (target: 100x faster);
// - store calls per 1,000 admitted requests at leaseUnits 1, 10, 100 and 1,000;
// - the p50 / p99 / max of `consume` while slices are being refilled in the background.
// ns per call are medians over interleaved repetitions, each awaited in a sequential loop (what a
// request handler does). Every case's answer is asserted before it is timed. BENCH_QUICK=1 runs a
// smaller, faster version.
// - as a user calls it: leaseUnits 1,000 (refilled in the background as it runs), one key and 100
//   keys, and through rateLimit, shared against local (target: at most 1.5x).

const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const net = require('node:net')
const os = require('node:os')
const Redis = require('ioredis')
const { RateLimiterRedis } = require('rate-limiter-flexible')
const { KeyedQuotaClock } = require('..')
const { redisStore } = require('../lib/shared.js')
const { storeStatsOf } = require('../lib/share/driver.js')
const { makeQuotaStore, storeOperations } = require('../lib/share/protocol.js')
const { median, compareCovered } = require('./covered.js')

const QUICK = process.env.BENCH_QUICK === '1'
// BENCH_USER_ONLY=1: only the "as a user calls it" cases.
const USER_ONLY = process.env.BENCH_USER_ONLY === '1'
const REPETITIONS = Number(process.env.BENCH_REPETITIONS || (QUICK ? 3 : 9))
const LOCAL_CALLS = Number(process.env.BENCH_CALLS || (QUICK ? 100_000 : 400_000))
const PEER_CALLS = Number(process.env.BENCH_PEER_CALLS || (QUICK ? 2_000 : 10_000))
const BIG = 1e12 // every call is allowed: the same work in every case
const LEASE_SIZES = [1, 10, 100, 1_000]
const ADMITTED = 1_000

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address()
      server.close(() => resolve(port))
    })
  })
}

async function startRedis() {
  const port = await freePort()
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    let seen = ''
    child.once('error', (error) => reject(new Error(`redis-server could not be started (install it: apt-get install -y redis-server): ${error.message}`)))
    child.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`)))
    child.stdout.on('data', (chunk) => {
      seen += chunk
      if (seen.includes('Ready to accept connections')) resolve()
    })
  })
  child.stdout.resume()
  return { port, stop: () => child.kill('SIGKILL') }
}

function limiterOptions(extra) {
  return { capacity: BIG, refillPerSecond: BIG, suspendPolicy: 'ignore', quota: { limit: BIG, period: { unit: 'month', timeZone: 'UTC' } }, ...extra }
}

async function main() {
  const redis = await startRedis()
  const client = new Redis({ port: redis.port, host: '127.0.0.1', lazyConnect: true, enableAutoPipelining: false })
  await client.connect()
  try {
    const store = redisStore(client, { prefix: 'bench:' })
    const lines = []
    const say = (line) => {
      lines.push(line)
      console.log(line)
    }
    say(`bench:shared on Node ${process.version}, redis-server on 127.0.0.1:${redis.port}; ${REPETITIONS} repetitions; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`)
    if (USER_ONLY) {
      await userSide(store, say)
      return
    }

    // -- Covered shared consume vs the same limiter's local consume vs RateLimiterRedis --------
    const local = new KeyedQuotaClock(limiterOptions())
    // A lease far above what one repetition takes: every timed call is covered (the eighth-of-
    // what-is-left rule still lets the first reservation be the whole lease).
    const shared = new KeyedQuotaClock(limiterOptions({ share: { store, name: 'bench-covered', leaseUnits: 10_000_000 } }))
    const peer = new RateLimiterRedis({ storeClient: client, keyPrefix: 'bench-rlf', points: 1e9, duration: 3_600 })
    // Answers first.
    assert.equal((await local.consume('tenant')).allowed, true)
    const first = await shared.consume('tenant')
    assert.equal(first.allowed, true)
    // One reservation: one round trip, two on a server that has not loaded the script yet (EVALSHA, then EVAL).
    assert.ok([1, 2].includes(storeStatsOf(shared).calls), `${storeStatsOf(shared).calls} store calls for one reservation`)
    const peerAnswer = await peer.consume('tenant')
    assert.equal(peerAnswer.consumedPoints, 1)
    await compareCovered({
      local,
      shared,
      peer,
      repetitions: REPETITIONS,
      localCalls: LOCAL_CALLS,
      peerCalls: PEER_CALLS,
      sharedLabel: 'KeyedQuotaClock with share, covered',
      peerLabel: 'rate-limiter-flexible RateLimiterRedis',
      say,
    })
    const callsDuringTiming = storeStatsOf(shared).calls
    assert.ok(callsDuringTiming <= 2, `the timed shared calls were covered (${callsDuringTiming} store calls)`)
    assert.equal(shared.status('tenant').quotaRemaining <= BIG, true)

    await userSide(store, say)

    // -- Store calls per 1,000 admitted requests ----------------------------------------------
    say('')
    say(`| leaseUnits | store calls per ${ADMITTED.toLocaleString('en-US')} admitted | of them waited for |`)
    say('|---:|---:|---:|')
    for (const leaseUnits of LEASE_SIZES) {
      // The Redis store, with the reservations that a call waited for (lacking > 0) counted.
      const ops = storeOperations(store)
      let waited = 0
      const counting = makeQuotaStore('redis', {
        reserve(request) {
          if (request.lacking > 0) waited++
          return ops.reserve(request)
        },
        giveBack: (request) => ops.giveBack(request),
      })
      const limiter = new KeyedQuotaClock(limiterOptions({ share: { store: counting, name: `bench-lease-${leaseUnits}`, leaseUnits } }))
      for (let i = 0; i < ADMITTED; i++) assert.equal((await limiter.consume('tenant')).allowed, true)
      const { calls } = storeStatsOf(limiter)
      await limiter.close()
      say(`| ${leaseUnits.toLocaleString('en-US')} | ${calls} | ${waited} |`)
    }

    // -- p99 while slices are being refilled ----------------------------------------------------
    const refilling = new KeyedQuotaClock(limiterOptions({ share: { store, name: 'bench-refill', leaseUnits: 100 } }))
    assert.equal((await refilling.consume('tenant')).allowed, true)
    const samples = QUICK ? 20_000 : 100_000
    const durations = new Float64Array(samples)
    for (let i = 0; i < samples; i++) {
      const started = process.hrtime.bigint()
      const decision = await refilling.consume('tenant')
      durations[i] = Number(process.hrtime.bigint() - started)
      if (!decision.allowed) throw new Error('a refilled consume was denied')
    }
    const refills = storeStatsOf(refilling).calls
    durations.sort()
    say('')
    say(`consume while refilling (leaseUnits 100, ${samples.toLocaleString('en-US')} calls, ${refills} store calls): p50 ${(quantile(durations, 0.5) / 1e3).toFixed(2)} µs, p99 ${(quantile(durations, 0.99) / 1e3).toFixed(2)} µs, p99.9 ${(quantile(durations, 0.999) / 1e3).toFixed(2)} µs, max ${(durations[samples - 1] / 1e3).toFixed(0)} µs`)
    await Promise.all([shared.close(), refilling.close()])
  } finally {
    client.disconnect()
    redis.stop()
  }
}

/**
 * How a user calls it: `leaseUnits: 1000` (the reservation is refilled in the background every
 * ~500 calls, so the timed loop includes those store calls and the calls that wait for them),
 * each consume awaited in a loop as a request handler does, on one key and round robin over 100
 * keys; and through `rateLimit` (fake request and response objects, the key from the client
 * address), a shared limiter against the same limiter without `share`. Ratios paired within a
 * repetition; the repetitions alternate the order of the two cases.
 */
async function userSide(store, say) {
  const { rateLimit } = require('../lib/http.js')
  const leaseUnits = 1_000
  const calls = Math.max(20_000, Math.floor(LOCAL_CALLS / 2))
  const keys100 = Array.from({ length: 100 }, (_, i) => `10.0.0.${i}`)
  const cases = []
  for (const keys of [['tenant'], keys100]) {
    const local = new KeyedQuotaClock(limiterOptions())
    const shared = new KeyedQuotaClock(limiterOptions({ share: { store, name: `bench-user-${keys.length}`, leaseUnits } }))
    cases.push({ name: `await consume, ${keys.length === 1 ? 'one key' : `${keys.length} keys round robin`}`, local, shared, run: (limiter) => consumeLoop(limiter, keys, calls) })
  }
  const httpLocal = rateLimit({ limiter: new KeyedQuotaClock(limiterOptions()) })
  const httpSharedLimiter = new KeyedQuotaClock(limiterOptions({ share: { store, name: 'bench-user-http', leaseUnits } }))
  const httpShared = rateLimit({ limiter: httpSharedLimiter })
  cases.push({ name: 'rateLimit (draft-11 headers), 100 client addresses', local: httpLocal, shared: httpShared, run: (middleware) => requestLoop(middleware, keys100, calls) })
  for (const c of cases) {
    await c.run(c.local) // warm-up, and every answer asserted (the loops throw on a denial)
    await c.run(c.shared)
    c.localNs = []
    c.sharedNs = []
  }
  for (let r = 0; r < REPETITIONS; r++) {
    for (const c of cases) {
      const order = r % 2 === 0 ? ['local', 'shared'] : ['shared', 'local']
      for (const which of order) c[`${which}Ns`].push(await c.run(c[which]))
    }
  }
  say('')
  say(`| as a user calls it (leaseUnits ${leaseUnits.toLocaleString('en-US')}, ${calls.toLocaleString('en-US')} calls a repetition) | local ns | shared ns | shared / local, paired (per repetition) |`)
  say('|---|---:|---:|---:|')
  for (const c of cases) {
    const ratios = c.sharedNs.map((ns, r) => ns / c.localNs[r])
    c.ratio = median(ratios)
    say(`| ${c.name} | ${median(c.localNs).toFixed(0)} | ${median(c.sharedNs).toFixed(0)} | ${c.ratio.toFixed(2)}x (${ratios.map((x) => x.toFixed(2)).join(', ')}) |`)
  }
  const worst = Math.max(...cases.map((c) => c.ratio))
  say(`as a user calls it, shared / local at most ${worst.toFixed(2)}x (target <= 1.5x: ${worst <= 1.5 ? 'met' : 'NOT met'})`)
  await Promise.all(cases.filter((c) => c.shared instanceof KeyedQuotaClock).map((c) => c.shared.close()).concat(httpSharedLimiter.close()))
}

/** ns per awaited consume, `calls` calls round robin over `keys`. */
async function consumeLoop(limiter, keys, calls) {
  const started = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) {
    if (!(await limiter.consume(keys[i % keys.length])).allowed) throw new Error('a timed consume was denied')
  }
  return Number(process.hrtime.bigint() - started) / calls
}

/** ns per request through a middleware, each awaited until it calls next. */
async function requestLoop(middleware, addresses, calls) {
  const requests = addresses.map((ip) => ({ ip, method: 'GET', url: '/', headers: { host: 'localhost' }, socket: { remoteAddress: ip } }))
  let passed = 0
  const started = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) {
    const headers = new Map()
    const res = { statusCode: 200, setHeader: (name, value) => headers.set(name, value), end() {} }
    await new Promise((resolve, reject) => {
      const returned = middleware(requests[i % requests.length], res, (err) => (err ? reject(err) : resolve(passed++)))
      if (returned !== undefined) returned.then(() => res.statusCode === 200 || reject(new Error(`answered ${res.statusCode}`)))
    })
  }
  const ns = Number(process.hrtime.bigint() - started) / calls
  if (passed !== calls) throw new Error(`${calls - passed} requests did not pass`)
  return ns
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}

module.exports = { startRedis }
