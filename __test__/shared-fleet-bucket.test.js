'use strict'

// One bucket for the whole fleet (`share: { bucket: true }`), measured the way a user
// would: several child processes (helpers/fleet-worker.js), each with its own client and limiter
// on one real store started here (redis-server through ioredis and node-redis, a three-node Redis Cluster
// through both clients' cluster classes, the MongoDB wire server), log every call with
// process.hrtime.bigint(); over the merged logs, no interval of real time of length Δ may hold more
// admitted units than C + R·Δ·1.001 (helpers/fleet-check.js; its own tests are fleet-check.test.js).
// Every scenario checks that bound, then what it is about: round-robin traffic, traffic moving
// from one process to another, a holder killed, the store stopped (SIGSTOP) and restarted empty,
// failOpen, per-key limits from `policy`, a key with a quota too.
//
// Small buckets (C 10, R 20/s) and a short lease (leaseMs 1,000) keep each scenario to a few
// seconds; the timings asserted are generous (a loaded 2-core machine), the bound is not.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedisServer, startRedisCluster } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { KeyedQuotaClock, manualClock } = require('..')
const { redisStore } = require('../lib/shared.js')
const { stopFleet } = require('./helpers/shared-fleet.js')
const { assertBucket, checkBucket, describeWorst, unsharedAdmits } = require('./helpers/fleet-check.js')
const { startFleet, roundRobin, waitUntil, nowMs, sleep } = require('./helpers/fleet-procs.js')

const C = 10
const R = 20
const LEASE_MS = 1_000
const LIMITS = { capacity: C, refillPerSecond: R }
const MONTH = { unit: 'month', timeZone: 'UTC' }
// A healthy store is never slow enough for this (a loaded machine and the Python MongoDB server
// included), so any ERR_STORE_UNAVAILABLE in a healthy scenario is a defect.
const HEALTHY_TIMEOUT_MS = 3_000
// The store's margin before it gives a lapsed holder's cells to others.
const MARGIN_MS = LEASE_MS * 1.1 + 1_000

let unique = 0
const freshName = (label) => `fleet-${label}-${process.pid}-${++unique}`

describe('one bucket for the fleet: child processes on real stores', () => {
  let redis
  let cluster
  let mongo
  let admin // reads bucket records behind the workers' backs
  let work
  const dbName = `fleet_bucket_${process.pid}`

  before(async () => {
    ;[redis, cluster, mongo] = await Promise.all([startRedisServer(), startRedisCluster(), startMongoServer()])
    admin = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    admin.on('error', () => {})
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-fleet-bucket-'))
  })

  after(() => stopFleet({ redis, mongo, servers: [cluster], admin, work }))

  const STORES = {
    ioredis: () => ({ client: 'ioredis', url: redis.url }),
    'node-redis': () => ({ client: 'node-redis', url: redis.url }),
    'ioredis-cluster': () => ({ client: 'ioredis-cluster', nodes: cluster.rootNodes }),
    'node-redis-cluster': () => ({ client: 'node-redis-cluster', nodes: cluster.rootNodes }),
    mongo: () => ({ client: 'mongo', url: mongo.uri, dbName }),
  }
  const stopStore = { ioredis: () => redis.pause(), mongo: () => process.kill(mongo.serverPid(), 'SIGSTOP') }
  const continueStore = { ioredis: () => redis.resume(), mongo: () => process.kill(mongo.serverPid(), 'SIGCONT') }

  function fleetOf(storeKind, label, { count, share = {}, limiter = LIMITS, policy } = {}) {
    const name = freshName(label)
    return startFleet({
      count,
      store: STORES[storeKind](),
      limiter,
      policy,
      share: { name, leaseMs: LEASE_MS, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS, ...share },
      dir: work,
      label: name,
    })
  }

  /** Each worker's counts for key; asserts that none saw an error (a healthy store). */
  function assertNoErrors(counts, key) {
    for (const [i, perKey] of counts.entries()) assert.deepEqual(perKey?.[key]?.errors ?? {}, {}, `worker ${i}: ${JSON.stringify(perKey?.[key])}`)
  }

  /** Units admitted of key by the calls made between from and to (ms of the logs' clock). */
  const admittedBetween = (calls, key, from, to) => calls.filter((c) => c.key === key && c.outcome === 'A' && c.lo >= from && c.hi <= to).reduce((n, c) => n + c.n, 0)

  async function cellsOf(workers, key) {
    return Promise.all(workers.map(async (worker) => (await worker.call('status', { key })).status.cells))
  }

  test('the harness can fail: three processes with buckets of their own break the bound', { timeout: 60_000 }, async () => {
    const fleet = await startFleet({ count: 3, store: { client: 'none' }, limiter: LIMITS, share: null, dir: work, label: freshName('unshared') })
    await roundRobin(fleet.workers, 'ip:0', 2 * R)
    await sleep(1_000)
    await fleet.stopAll()
    const result = checkBucket(fleet.units('ip:0'), LIMITS)
    assert.equal(result.ok, false, `three unshared buckets passed: ${JSON.stringify(result.worst)}`)
    assert.ok(result.worst.count >= 2 * C, `the worst window holds the three bursts: ${describeWorst(result, LIMITS)}`)
    await fleet.killAll()
  })

  test('one process alone holds every cell and decides as one unshared bucket would on the same arrivals (ioredis)', { timeout: 60_000 }, async () => {
    const fleet = await fleetOf('ioredis', 'alone', { count: 1 })
    await fleet.workers[0].call('traffic', { key: 'ip:0', perSecond: 2 * R })
    await sleep(2_500)
    const counts = await fleet.stopAll()
    assertNoErrors(counts, 'ip:0')
    assert.deepEqual(await cellsOf(fleet.workers, 'ip:0'), [C])
    const calls = fleet.calls()
    assertBucket(fleet.units('ip:0'), LIMITS)
    // (the first call waits for the store call that brings the cells: its arrival is a little late)
    const yardstick = unsharedAdmits(calls.map((c) => c.lo), LIMITS)
    const admitted = fleet.units('ip:0').length
    assert.ok(Math.abs(admitted - yardstick) <= 2, `alone, the process admitted ${admitted}; one unshared bucket would admit ${yardstick} of the same ${calls.length} arrivals`)
    await fleet.killAll()
  })

  for (const storeKind of ['ioredis', 'node-redis', 'ioredis-cluster', 'node-redis-cluster', 'mongo']) {
    test(`three processes, one key's requests round-robin at 2·R: never over C + R·Δ, and close to one bucket (${storeKind})`, { timeout: 60_000 }, async () => {
      const fleet = await fleetOf(storeKind, 'round-robin', { count: 3 })
      await roundRobin(fleet.workers, 'ip:1', 2 * R)
      await sleep(2_500)
      const counts = await fleet.stopAll()
      const calls = fleet.calls()
      assertBucket(fleet.units('ip:1'), LIMITS)
      assertNoErrors(counts, 'ip:1')
      const admitted = calls.filter((c) => c.outcome === 'A').length
      const yardstick = unsharedAdmits(calls.map((c) => c.lo), LIMITS)
      assert.ok(admitted >= 0.6 * yardstick, `the fleet admitted ${admitted}, one unshared bucket would admit ${yardstick} of the same ${calls.length} arrivals`)
      assert.ok(counts.filter((perKey) => perKey['ip:1'].admitted > 0).length >= 2, `the processes shared the key: ${JSON.stringify(counts.map((perKey) => perKey['ip:1']))}`)
      // status(key).cells: what each holds, integers that add up to at most C (someone holds some: idleMs is long)
      const cells = await cellsOf(fleet.workers, 'ip:1')
      for (const held of cells) assert.ok(Number.isInteger(held) && held >= 0 && held <= C, `cells ${JSON.stringify(cells)}`)
      const total = cells.reduce((a, b) => a + b, 0)
      assert.ok(total >= 1 && total <= C, `cells held ${JSON.stringify(cells)}`)
      await fleet.killAll()
    })
  }

  for (const storeKind of ['ioredis', 'mongo']) {
    test(`a fair share reaches every process: three processes round-robin on four keys, each admits on each key within leaseMs (${storeKind})`, { timeout: 60_000 }, async () => {
      // A longer lease (4 s): holders learn of a waiter within leaseMs / 4, the waiter asks again
      // leaseMs / 4 after finding none free, so each of the three has cells (ceil(C / 3) asked)
      // well within leaseMs. Four keys at once: four chances for a lost request to show.
      const leaseMs = 4_000
      const keys = ['fair:1', 'fair:2', 'fair:3', 'fair:4']
      const fleet = await fleetOf(storeKind, 'fair', { count: 3, share: { leaseMs } })
      let start
      for (const key of keys) start = await roundRobin(fleet.workers, key, 2 * R)
      await sleep(start + leaseMs + 1_500 - nowMs())
      const cells = await Promise.all(keys.map((key) => cellsOf(fleet.workers, key)))
      const counts = await fleet.stopAll()
      const calls = fleet.calls()
      for (const [k, key] of keys.entries()) {
        assertNoErrors(counts, key)
        assertBucket(fleet.units(key), LIMITS, key)
        const late = fleet.logs.map((log) => calls.filter((c) => c.file === log && c.key === key && c.outcome === 'A' && c.lo >= start + leaseMs).length)
        assert.ok(late.every((n) => n > 0), `${key}: admitted per process in the last 1.5 s ${JSON.stringify(late)}, cells held ${JSON.stringify(cells[k])} (fair share ${Math.ceil(C / 3)})`)
      }
      await fleet.killAll()
    })
  }

  for (const storeKind of ['ioredis', 'node-redis-cluster', 'mongo']) {
    test(`traffic moving wholly from one process to another: the new one admits most of R within leaseMs / 4 + 1 s (${storeKind})`, { timeout: 60_000 }, async () => {
      const fleet = await fleetOf(storeKind, 'moving', { count: 2 })
      const [from, to] = fleet.workers
      await from.call('traffic', { key: 'ip:2', perSecond: 2 * R })
      await sleep(1_500)
      await from.call('stop')
      const moved = nowMs()
      await to.call('traffic', { key: 'ip:2', perSecond: 2 * R })
      const settled = moved + LEASE_MS / 4 + 1_000
      await sleep(settled + 1_000 - nowMs() + 200)
      const counts = await fleet.stopAll()
      assertNoErrors(counts, 'ip:2')
      const calls = fleet.calls()
      assertBucket(fleet.units('ip:2'), LIMITS)
      const late = admittedBetween(calls, 'ip:2', settled, settled + 1_000)
      assert.ok(late >= 0.5 * R, `in the second after leaseMs / 4 + 1 s the new process admitted ${late} (R = ${R}); it holds ${JSON.stringify(await cellsOf(fleet.workers, 'ip:2'))} cells`)
      await fleet.killAll()
    })
  }

  /**
   * The bucket record of (name, key) in the standalone Redis (its hash fields) and the store's
   * clock then, with the host's clock read just before asking: a store time T was at host time
   * at least `hostBeforeMs + (T - storeNowMs)`.
   */
  async function redisRecord(name, key) {
    const keys = (await admin.keys('*')).filter((k) => k.includes(name) && k.includes(key))
    assert.equal(keys.length, 1, `one record for ${name} / ${key}: ${JSON.stringify(keys)}`)
    const hostBeforeMs = nowMs()
    const [fields, [seconds, micros]] = await Promise.all([admin.hgetall(keys[0]), admin.time()])
    return { fields, storeNowMs: Number(seconds) * 1000 + Number(micros) / 1000, hostBeforeMs }
  }

  test('a holder SIGKILLed: its cells come back to the others only after leaseMs·1.1 + 1 s, empty, and never over the bound (ioredis)', { timeout: 60_000 }, async () => {
    const fleet = await fleetOf('ioredis', 'kill', { count: 2 })
    const [victim, survivor] = fleet.workers
    await victim.call('traffic', { key: 'ip:3', perSecond: 2 * R })
    await sleep(1_500)
    const [victimCells] = await cellsOf([victim], 'ip:3')
    assert.equal(victimCells, C, 'alone on the key, the victim holds every cell')
    await victim.kill()
    const killed = nowMs()
    // When the store last heard from the victim (t:<instance>), on the host's clock (at the earliest).
    const record = await redisRecord(fleet.name, 'ip:3')
    const renewals = Object.entries(record.fields).filter(([field]) => field.startsWith('t:'))
    assert.equal(renewals.length, 1, `one holder in ${JSON.stringify(record.fields)}`)
    const lastHeard = record.hostBeforeMs - (record.storeNowMs - Number(renewals[0][1]))
    assert.ok(lastHeard <= killed + 50, `the store heard from the victim ${(lastHeard - killed).toFixed(1)} ms after it was killed`)
    await survivor.call('traffic', { key: 'ip:3', perSecond: 2 * R })
    const reclaimable = lastHeard + MARGIN_MS
    await waitUntil(() => fleet.calls().some((c) => c.file === fleet.logs[1] && c.outcome === 'A'), { timeoutMs: MARGIN_MS + 10_000, what: 'the survivor to admit' })
    await sleep(1_000)
    const counts = await fleet.stopAll()
    assertNoErrors(counts, 'ip:3')
    const calls = fleet.calls()
    assertBucket(fleet.units('ip:3'), LIMITS)
    const survivorAdmitted = calls.filter((c) => c.file === fleet.logs[1] && c.outcome === 'A')
    const first = Math.min(...survivorAdmitted.map((c) => c.hi))
    // (5 ms: Redis's TIME is its wall clock, the log's the host's monotonic one)
    assert.ok(first >= reclaimable - 5, `the survivor admitted ${(reclaimable - first).toFixed(0)} ms before the store may give the victim's cells away (killed at +0, last heard at ${(lastHeard - killed).toFixed(0)} ms, first admission at +${(first - killed).toFixed(0)} ms)`)
    assert.ok(first <= reclaimable + LEASE_MS / 4 + 2_000, `the survivor first admitted ${(first - reclaimable).toFixed(0)} ms after the cells could be its`)
    // Empty: the cells reached the survivor (not before `reclaimable`) with no tokens, so by any
    // time t it can have admitted at most R·(t - reclaimable) (with them full: C at once).
    const his = survivorAdmitted.flatMap((c) => Array(c.n).fill(c.hi)).sort((a, b) => a - b)
    for (const [k, hi] of his.entries()) {
      const refilled = (R * 1.001 * (hi - reclaimable)) / 1000
      assert.ok(k + 1 <= refilled + 1e-9, `the victim's cells came back with tokens: the survivor had admitted ${k + 1} units ${(hi - reclaimable).toFixed(0)} ms after they could be its (a refill of ${refilled.toFixed(2)})`)
    }
    await fleet.killAll()
  })

  for (const storeKind of ['ioredis', 'mongo']) {
    test(`the store stopped (SIGSTOP): cells decide while the lease holds, then ERR_STORE_UNAVAILABLE, or failOpen's own bucket; back to one bucket after (${storeKind})`, { timeout: 60_000 }, async () => {
      const timeoutMs = 300
      const fleet = await fleetOf(storeKind, 'sigstop', { count: 2, share: { timeoutMs } })
      await fleet.add({ share: { ...fleet.share, failOpen: true } })
      await roundRobin(fleet.workers, 'ip:4', 3 * R)
      await sleep(1_500)
      let stopped
      let resumed
      try {
        stopStore[storeKind]()
        stopped = nowMs()
        await sleep(LEASE_MS + 1_200)
      } finally {
        continueStore[storeKind]()
        resumed = nowMs()
      }
      await sleep(2_000)
      const counts = await fleet.stopAll()
      const calls = fleet.calls()
      const [closedLogs, openLog] = [fleet.logs.slice(0, 2), fleet.logs[2]]
      const lapsed = stopped + LEASE_MS + 100 // every lease sent before the stop has ended
      // failOpen: false: after the lease, nothing admitted, ERR_STORE_UNAVAILABLE; none waited past timeoutMs
      const closedDuring = calls.filter((c) => closedLogs.includes(c.file) && c.lo >= lapsed && c.hi <= resumed)
      assert.ok(closedDuring.length > 10, `${closedDuring.length} calls during the outage`)
      assert.deepEqual(closedDuring.filter((c) => c.outcome === 'A'), [], 'admitted after the lease ended, with the store stopped')
      assert.ok(closedDuring.some((c) => c.outcome === 'ERR_STORE_UNAVAILABLE'), `outcomes ${JSON.stringify([...new Set(closedDuring.map((c) => c.outcome))])}`)
      const slowest = Math.max(...calls.filter((c) => c.lo >= stopped && c.hi <= resumed).map((c) => c.hi - c.lo))
      assert.ok(slowest <= timeoutMs + 1_000, `a call waited ${slowest.toFixed(0)} ms with timeoutMs ${timeoutMs}`)
      // ...while the lease held, the cells still decided (the refill of what each held)
      const whileLeased = admittedBetween(calls, 'ip:4', stopped + 20, stopped + LEASE_MS / 2)
      assert.ok(whileLeased >= 1, `nothing admitted from the cells in the first leaseMs / 2 of the outage (${JSON.stringify(counts.map((c) => c['ip:4']))})`)
      // failOpen: true: its own bucket (C, R) after its lease: some admitted, never past C + R·Δ
      const openUnits = calls.filter((c) => c.file === openLog && c.outcome === 'A' && c.lo >= lapsed && c.hi <= resumed).map((c) => ({ lo: c.lo, hi: c.hi }))
      assert.ok(openUnits.length >= 1, 'failOpen admitted nothing during the outage')
      assertBucket(openUnits, LIMITS, 'the failOpen process during the outage')
      // The fleet's bound holds over everything decided from cells: all but the failOpen process's outage
      const settledAgain = resumed + timeoutMs + 1_000
      const fromCells = calls.filter((c) => c.outcome === 'A' && (c.file !== openLog || c.hi < stopped || c.lo > settledAgain))
      assertBucket(fromCells.map((c) => ({ lo: c.lo, hi: c.hi })), LIMITS)
      // and the fleet admits again once the store is back
      assert.ok(admittedBetween(calls, 'ip:4', settledAgain, Infinity) >= 1, 'nothing admitted after the store came back')
      await fleet.killAll()
    })
  }

  test('the store killed and restarted empty under traffic: never over the bound, and the fleet admits again (ioredis and node-redis)', { timeout: 60_000 }, async () => {
    const fleet = await fleetOf('ioredis', 'restart', { count: 1 })
    await fleet.add({ ...STORES['node-redis']() })
    await roundRobin(fleet.workers, 'ip:5', 2 * R)
    await sleep(1_500)
    await redis.kill()
    await redis.restart()
    const restarted = nowMs()
    await sleep(3_000)
    const counts = await fleet.stopAll()
    const calls = fleet.calls()
    assertBucket(fleet.units('ip:5'), LIMITS)
    const after = admittedBetween(calls, 'ip:5', restarted + 1_500, Infinity)
    assert.ok(after >= 1, `nothing admitted in the 1.5 s after the store came back: ${JSON.stringify(counts.map((c) => c['ip:5']))}`)
    await fleet.killAll()
  })

  test('a record lost while a key knew it comes back empty; one gone after its TTL comes back full (ioredis, a manual clock)', { timeout: 30_000 }, async () => {
    const client = new Redis({ host: redis.host, port: redis.port })
    const name = freshName('lost')
    const clock = manualClock({ wallMs: Date.now() })
    const limiter = new KeyedQuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock, share: { store: redisStore(client), name, bucket: true, leaseMs: LEASE_MS, idleMs: 600_000 } })
    const record = async (key) => (await admin.keys('*')).find((k) => k.includes(name) && k.includes(key))
    try {
      for (const key of ['lost', 'expired']) {
        assert.equal((await limiter.consume(key, 2)).allowed, true)
        await admin.del(await record(key))
      }
      // Within the shortest TTL the store gave it (refill 2 s or margin 2.1 s, plus a minute): lost
      clock.advance(LEASE_MS + 500) // the lease lapsed: the next call asks the store
      const lost = await limiter.consume('lost', 1)
      assert.equal(lost.allowed, false, `a lost record came back with tokens: ${JSON.stringify(lost)}`)
      assert.equal(lost.retryAfterBasis, 'monotonic-refill')
      // After it: the record expired as the store let it, and the bucket had refilled anyway
      clock.advance(2_100 + 60_000)
      const expired = await limiter.consume('expired', 2)
      assert.equal(expired.allowed, true, `a record that expired came back empty: ${JSON.stringify(expired)}`)
    } finally {
      await limiter.close()
      client.disconnect()
    }
  })

  test("per-key limits from policy, and a key with a quota too: each key's bucket holds, and so does the quota (ioredis)", { timeout: 60_000 }, async () => {
    const small = { capacity: 4, refillPerSecond: 8 }
    const policy = { small, plan: { quota: { limit: 25, period: MONTH } } }
    const fleet = await fleetOf('ioredis', 'policy', { count: 3, policy })
    for (const key of ['small', 'big', 'plan']) await roundRobin(fleet.workers, key, 2 * R)
    await sleep(3_000)
    const counts = await fleet.stopAll()
    for (const key of ['small', 'big', 'plan']) assertNoErrors(counts, key)
    assertBucket(fleet.units('small'), small, 'small (C 4, R 8)')
    assertBucket(fleet.units('big'), LIMITS, 'big (the defaults)')
    assertBucket(fleet.units('plan'), LIMITS, 'plan (the default bucket)')
    const smallAdmitted = fleet.units('small').length
    assert.ok(smallAdmitted < fleet.units('big').length, 'the small key had its own, smaller, bucket')
    const plan = fleet.units('plan').length
    assert.ok(plan <= 25, `the quota of 25 was passed: ${plan} admitted`)
    assert.ok(plan >= 20, `the quota's 25 units were left unused: ${plan} admitted`)
    const bases = counts.map((perKey) => perKey.plan.bases)
    assert.ok(bases.some((b) => b['wall-period'] > 0), `no quota denial: ${JSON.stringify(bases)}`)
    assert.ok(bases.some((b) => b['monotonic-refill'] > 0), `no bucket denial: ${JSON.stringify(bases)}`)
    await fleet.killAll()
  })
})
