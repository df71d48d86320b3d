'use strict'
// `npm run bench:fleet`: one bucket for the fleet (`share: { bucket: true }`) on one
// local redis-server started here (not run by `npm test`). In one run:
// (a) three processes (child processes, __test__/helpers/fleet-worker.js, each its own ioredis
//     connection) receive one key's requests round-robin at 2·R for 10 s (C = R, leaseMs 4,000):
//     what the fleet admits against what one unshared bucket admits on the same arrivals (simulated
//     over the logged arrival times), store calls per process per second (each limiter's
//     stats().store.calls, and Redis's INFO commandstats for all three), and the C + R·Δ·1.001
//     check over the merged logs. Targets: at least 90% of one bucket, at most 2 store calls per
//     process per second.
// (b) a key's traffic moving wholly from one process to another: how long until the new one
//     admits at least 90% of R over a second (target: within leaseMs / 2 + 1 s).
// (c) a covered shared `consume` against the same limiter without `share`, and against
//     rate-limiter-flexible's RateLimiterRedis on the same ioredis connection: ns per awaited
//     call, medians over interleaved repetitions, ratios paired within a repetition. Targets: at
//     most 1.5x local, at least 100x faster than RateLimiterRedis.
// (d) a saturated key: three processes each asking at 2·R (six times what the bucket refills)
//     for 10 s: store calls per process per second (target at most 2) and what the fleet admits
//     against R (target at least 90%).
// (e) the docs' recipe, "100 per 15 minutes per IP" on three real Express servers sharing Redis:
//     a burst of 100 requests round-robin (sent one after another, then all at once) on a fresh
//     address, against express-rate-limit + rate-limit-redis and RateLimiterRedis on the same
//     three servers. Target: at least 90 admitted.
// (f) a long tail of keys (60,000 client addresses, each a request about every 10 s to any of three
//     processes), side by side with both peers, each on a redis-server of its own: store round
//     trips, Redis commands, Redis CPU and the processes' CPU per request, Redis memory per key;
//     benchmark/fleet-longtail.js (it says how). Targets: at most one round trip a request, Redis
//     CPU at most the best peer's, Redis memory per key at most 1.5x the best peer's.
// Defaults: C = R = 100/s, leaseMs 4,000. BENCH_QUICK=1 runs a smaller version.

const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { RateLimiterRedis } = require('rate-limiter-flexible')
const { KeyedQuotaClock } = require('..')
const { redisStore } = require('../lib/shared.js')
const { startRedisServer } = require('../__test__/helpers/redis-server.js')
const { startFleet, roundRobin, nowMs, sleep } = require('../__test__/helpers/fleet-procs.js')
const { killInstances } = require('../__test__/helpers/shared-fleet.js')
const { checkBucket, describeWorst, unsharedAdmits } = require('../__test__/helpers/fleet-check.js')
const { compareCovered } = require('./covered.js')
const { longTail } = require('./fleet-longtail.js')

const QUICK = process.env.BENCH_QUICK === '1'
const C = 100
const R = 100
const LIMITS = { capacity: C, refillPerSecond: R }
const LEASE_MS = 4_000 // as the fleet bucket's cost targets are stated
const RUN_MS = QUICK ? 4_000 : 10_000
const REPETITIONS = Number(process.env.BENCH_REPETITIONS || (QUICK ? 3 : 9))
const LOCAL_CALLS = QUICK ? 100_000 : 400_000
const PEER_CALLS = QUICK ? 2_000 : 10_000

const fmt = (x, digits = 0) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
const met = (ok) => (ok ? 'met' : 'NOT met')

/** Commands Redis has run, by name (INFO commandstats), without INFO itself; `usec` the µs Redis spent in scripts. */
async function commandCounts(client) {
  const text = await client.info('commandstats')
  const counts = {}
  let usec = 0
  for (const [, name, calls, spent] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (name !== 'info') counts[name] = Number(calls)
    if (/^(eval|evalsha|fcall)(_ro)?$/.test(name)) usec += Number(spent)
  }
  Object.defineProperty(counts, 'usec', { value: usec }) // not a command: left out of the listings
  return counts
}

function commandDelta(before, after) {
  const delta = {}
  for (const [name, calls] of Object.entries(after)) if (calls - (before[name] ?? 0) > 0) delta[name] = calls - (before[name] ?? 0)
  return delta
}
// A round trip is one script (commandstats also counts the commands a script runs inside Redis).
const roundTrips = (counts) => Object.entries(counts).filter(([name]) => /^(eval|evalsha|fcall)(_ro)?$/.test(name)).reduce((a, [, calls]) => a + calls, 0)

async function main() {
  const redis = await startRedisServer()
  const client = new Redis({ host: redis.host, port: redis.port, lazyConnect: true, enableAutoPipelining: false })
  await client.connect()
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-bench-fleet-'))
  const say = (line) => console.log(line)
  try {
    say(`bench:fleet on Node ${process.version}, redis-server on 127.0.0.1:${redis.port}; C ${C}, R ${R}/s, leaseMs ${fmt(LEASE_MS)}; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`)
    const fleetOf = (label, count) =>
      startFleet({ count, store: { client: 'ioredis', url: redis.url }, limiter: LIMITS, share: { name: `bench-${label}-${process.pid}`, leaseMs: LEASE_MS, idleMs: 60_000, timeoutMs: 2_000 }, dir: work, label })
    // BENCH_CASES=a,d runs only those cases.
    const only = new Set((process.env.BENCH_CASES || 'a,b,c,d,e,f').split(','))
    if (only.has('a')) await roundRobinCase(client, fleetOf, say)
    if (only.has('b')) await movingCase(fleetOf, say)
    if (only.has('c')) await coveredCase(client, say)
    if (only.has('d')) await saturatedCase(client, fleetOf, say)
    if (only.has('e')) await recipeCase(redis, say)
    if (only.has('f')) await longTail(say) // its own redis-server for each library
  } finally {
    killInstances()
    client.disconnect()
    await redis.stop()
    fs.rmSync(work, { recursive: true, force: true })
  }
}

// (a) -------------------------------------------------------------------------------------------
async function roundRobinCase(client, fleetOf, say) {
  const fleet = await fleetOf('round-robin', 3)
  const before = await Promise.all(fleet.workers.map((worker) => worker.call('stats')))
  const commandsBefore = await commandCounts(client)
  await roundRobin(fleet.workers, 'ip', 2 * R, { delayMs: 500 })
  await sleep(500 + RUN_MS + 200)
  const counts = await fleet.stopAll()
  const after = await Promise.all(fleet.workers.map((worker) => worker.call('stats')))
  const commands = commandDelta(commandsBefore, await commandCounts(client))
  const calls = fleet.calls()
  const span = (Math.max(...calls.map((c) => c.hi)) - Math.min(...calls.map((c) => c.lo))) / 1000
  const admitted = calls.filter((c) => c.outcome === 'A').length
  const yardstick = unsharedAdmits(calls.map((c) => c.lo), LIMITS)
  const perProcess = after.map((a, i) => (a.stats.store.calls - before[i].stats.store.calls) / span)
  const errors = counts.map((perKey) => perKey.ip.errors)
  const bound = checkBucket(fleet.units('ip'), LIMITS)
  say('')
  say(`(a) three processes, one key round-robin at 2·R = ${2 * R}/s for ${fmt(span, 1)} s (${fmt(calls.length)} arrivals)`)
  say('')
  say('| | admitted | vs one unshared bucket on the same arrivals |')
  say('|---|---:|---:|')
  say(`| one unshared bucket (simulated) | ${fmt(yardstick)} | 1.00 |`)
  say(`| the fleet, three processes | ${fmt(admitted)} | ${(admitted / yardstick).toFixed(3)} |`)
  for (const [i, perKey] of counts.entries()) say(`| ... process ${i} | ${fmt(perKey.ip.admitted)} of ${fmt(perKey.ip.calls)} | |`)
  say('')
  say(`fleet / one bucket ${(admitted / yardstick).toFixed(3)} (target >= 0.90: ${met(admitted >= 0.9 * yardstick)}); errors ${JSON.stringify(errors)}`)
  say(`store calls per process per second (stats().store.calls): ${perProcess.map((x) => x.toFixed(2)).join(', ')} (target <= 2: ${met(Math.max(...perProcess) <= 2)})`)
  say(`Redis round trips (scripts) in the run, all three processes: ${roundTrips(commands)} = ${(roundTrips(commands) / span / 3).toFixed(2)} per process per second (commands, the scripts' own included: ${JSON.stringify(commands)})`)
  say(`C + R·Δ·1.001 over the merged log: ${bound.ok ? `held (worst window ${fmt(bound.worst.count)} units, bound ${bound.worst.bound.toFixed(2)})` : `BROKEN: ${describeWorst(bound, LIMITS)}`}`)
  await fleet.killAll()
}

// (b) -------------------------------------------------------------------------------------------
async function movingCase(fleetOf, say) {
  const fleet = await fleetOf('moving', 2)
  const [from, to] = fleet.workers
  await from.call('traffic', { key: 'ip', perSecond: 2 * R })
  await sleep(3_000)
  await from.call('stop')
  const moved = nowMs()
  await to.call('traffic', { key: 'ip', perSecond: 2 * R })
  const target = LEASE_MS / 2 + 1_000
  await sleep(target + 2_500)
  await fleet.stopAll()
  const times = fleet.calls().filter((c) => c.file === fleet.logs[1] && c.outcome === 'A').map((c) => c.hi).sort((a, b) => a - b)
  const inSecond = (start) => times.filter((t) => t >= start && t < start + 1_000).length
  let reached
  for (let t = moved; t + 1_000 <= times[times.length - 1]; t += 10) {
    if (inSecond(t) >= 0.9 * R) {
      reached = t - moved
      break
    }
  }
  const bound = checkBucket(fleet.units('ip'), LIMITS)
  say('')
  say(`(b) traffic moving wholly from one process to another (2·R, after 3 s on the first)`)
  say(`the new one admits >= 90% of R over a second from ${reached === undefined ? 'never (in the run)' : `+${fmt(reached)} ms`} after the move (target <= leaseMs / 2 + 1 s = ${fmt(target)} ms: ${met(reached !== undefined && reached <= target)})`)
  say(`its admissions in the second after leaseMs / 2 + 1 s: ${inSecond(moved + target)} (R = ${R}); in the first second after the move: ${inSecond(moved)}`)
  say(`C + R·Δ·1.001 over the merged log: ${bound.ok ? 'held' : `BROKEN: ${describeWorst(bound, LIMITS)}`}`)
  await fleet.killAll()
}

// (c) -------------------------------------------------------------------------------------------
async function coveredCase(client, say) {
  const big = { capacity: 2 ** 31, refillPerSecond: 1e9, suspendPolicy: 'ignore' } // every call allowed: the same work in each case
  const local = new KeyedQuotaClock(big)
  const shared = new KeyedQuotaClock({ ...big, share: { store: redisStore(client, { prefix: 'bench:' }), name: `bench-covered-${process.pid}`, bucket: true } })
  const peer = new RateLimiterRedis({ storeClient: client, keyPrefix: 'bench-rlf', points: 1e9, duration: 3_600 })
  assert.equal((await local.consume('tenant')).allowed, true)
  assert.equal((await shared.consume('tenant')).allowed, true)
  assert.equal((await shared.consume('tenant')).allowed, true)
  // (Its second call is a busy key's: a quarter of a fair share, C / 2 / 4 = 2**28.)
  assert.ok(shared.status('tenant').tokens > 2 ** 27, 'alone, the process holds a large slice')
  assert.equal((await peer.consume('tenant')).consumedPoints, 1)
  const callsBefore = shared.stats().store.calls
  say('')
  say(`(c) awaited consume, one key, ${REPETITIONS} repetitions`)
  await compareCovered({
    local,
    shared,
    peer,
    repetitions: REPETITIONS,
    localCalls: LOCAL_CALLS,
    peerCalls: PEER_CALLS,
    sharedLabel: 'KeyedQuotaClock, share.bucket, covered (by its slice)',
    peerLabel: 'rate-limiter-flexible RateLimiterRedis, same connection',
    say,
  })
  say(`store calls while timed (background fetches): ${shared.stats().store.calls - callsBefore}`)
  await shared.close()
}

// (d) -------------------------------------------------------------------------------------------
async function saturatedCase(client, fleetOf, say) {
  const fleet = await fleetOf('saturated', 3)
  const before = await Promise.all(fleet.workers.map((worker) => worker.call('stats')))
  await roundRobin(fleet.workers, 'hot', 6 * R, { delayMs: 500 })
  await sleep(500 + RUN_MS + 200)
  const counts = await fleet.stopAll()
  const after = await Promise.all(fleet.workers.map((worker) => worker.call('stats')))
  const calls = fleet.calls()
  const span = (Math.max(...calls.map((c) => c.hi)) - Math.min(...calls.map((c) => c.lo))) / 1000
  const admitted = calls.filter((c) => c.outcome === 'A').length
  const perProcess = after.map((a, i) => (a.stats.store.calls - before[i].stats.store.calls) / span)
  // What one bucket admits over the span: C at the start, then R a second.
  const oneBucket = C + R * span
  const bound = checkBucket(fleet.units('hot'), LIMITS)
  say('')
  say(`(d) a saturated key: three processes at 2·R each (${6 * R}/s in all) for ${fmt(span, 1)} s`)
  say(`admitted ${fmt(admitted)} of ${fmt(calls.length)}: ${(admitted / oneBucket).toFixed(3)} of C + R·Δ = ${fmt(oneBucket)} (target >= 0.90: ${met(admitted >= 0.9 * oneBucket)}); errors ${JSON.stringify(counts.map((perKey) => perKey.hot.errors))}`)
  say(`store calls per process per second: ${perProcess.map((x) => x.toFixed(2)).join(', ')} (target <= 2: ${met(Math.max(...perProcess) <= 2)})`)
  say(`C + R·Δ·1.001 over the merged log: ${bound.ok ? 'held' : `BROKEN: ${describeWorst(bound, LIMITS)}`}`)
  await fleet.killAll()
}

// (e) -------------------------------------------------------------------------------------------
async function recipeCase(redis, say) {
  const express = require('express')
  const { rateLimit: expressRateLimit } = require('express-rate-limit')
  const { RedisStore } = require('rate-limit-redis')
  const { rateLimit } = require('../lib/http.js')
  const BURST = 100
  const servers = []
  const clients = []
  /** Three Express servers, each with its own client and limiter from `make(client, i)`. */
  async function three(make) {
    const urls = []
    for (let i = 0; i < 3; i++) {
      const client = new Redis({ host: redis.host, port: redis.port })
      clients.push(client)
      const app = express()
      app.set('trust proxy', 'loopback')
      app.use(make(client, i))
      app.get('/', (req, res) => res.send('ok'))
      const server = await new Promise((resolve) => {
        const s = app.listen(0, '127.0.0.1', () => resolve(s))
      })
      servers.push(server)
      urls.push(`http://127.0.0.1:${server.address().port}/`)
    }
    return urls
  }
  const peers = {
    'quota-clock-source (share.bucket)': (client) => {
      const perIp = new KeyedQuotaClock({ capacity: 100, refillPerSecond: 100 / 900, suspendPolicy: 'ignore', share: { store: redisStore(client, { prefix: 'recipe:' }), name: `recipe-${process.pid}`, bucket: true } })
      return rateLimit({ key: (req) => req.ip, limits: [{ limiter: perIp, name: 'per-ip' }] })
    },
    'express-rate-limit + rate-limit-redis': (client) =>
      expressRateLimit({ windowMs: 15 * 60_000, limit: 100, standardHeaders: 'draft-8', legacyHeaders: false, store: new RedisStore({ sendCommand: (...args) => client.call(...args), prefix: `erl-${process.pid}:` }) }),
    'rate-limiter-flexible RateLimiterRedis': (client) => {
      const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: `rlf-recipe-${process.pid}`, points: 100, duration: 900 })
      return (req, res, next) => limiter.consume(req.ip).then(() => next(), () => res.status(429).send('too many'))
    },
  }
  say('')
  say(`(e) the recipe, 100 per 15 minutes per IP on three Express servers sharing one Redis: a burst of ${BURST} requests round-robin on a fresh address`)
  say('')
  say('| limiter | admitted, one after another | admitted, all at once |')
  say('|---|---:|---:|')
  let ours
  try {
    for (const [label, make] of Object.entries(peers)) {
      const urls = await three(make)
      const send = (i, ip) => fetch(urls[i % 3], { headers: { 'x-forwarded-for': ip } }).then((response) => response.status)
      let inOrder = 0
      for (let i = 0; i < BURST; i++) if ((await send(i, '203.0.113.7')) === 200) inOrder++
      const statuses = await Promise.all(Array.from({ length: BURST }, (_, i) => send(i, '203.0.113.8')))
      const atOnce = statuses.filter((status) => status === 200).length
      if (ours === undefined) ours = Math.min(inOrder, atOnce)
      say(`| ${label} | ${inOrder} | ${atOnce} |`)
    }
  } finally {
    for (const server of servers) server.close()
    for (const client of clients) client.disconnect()
  }
  say('')
  say(`quota-clock-source admits at least 90 of ${BURST}: ${met(ours >= 90)}`)
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
