'use strict'

// One bucket for the whole fleet (`share: { bucket: true }`), measured the way a user
// would: several child processes (helpers/fleet-worker.js), each with its own client and limiter
// on one real store started here (redis-server through ioredis and node-redis, a three-node Redis Cluster
// through both clients' cluster classes, the MongoDB wire server), log every call with
// process.hrtime.bigint(); over the merged logs, no interval of real time of length Δ may hold more
// admitted units than C + R·Δ·1.001 (helpers/fleet-check.js; its own tests are share-fleet-check.test.js).
// Every scenario checks that bound, then what it is about: round-robin traffic, traffic moving
// from one process to another, a holder killed, the store stopped (SIGSTOP), restarted empty and
// flushed, failOpen, per-key limits from `policy`, a key with a quota too; and the contract's "no
// budget stranded" bullets: first consumes, a round-robin burst on a full bucket, an idle key's
// burst, a store outage longer than the lease, a saturated key's store calls, the denial's wait.
//
// Small buckets (C 10, R 20/s) and a short lease (leaseMs 1,000) keep each scenario to a few
// seconds; the timings asserted are generous (a loaded 2-core machine), the bound is not.

const { before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { KeyedQuotaClock, manualClock } = require('..')
const { redisStore } = require('../lib/shared.js')
const { assertBucket, checkBucket, describeWorst, unsharedAdmits } = require('./helpers/fleet-check.js')
const { useFleetServers, startFleet, roundRobin, waitUntil, nowMs, sleep } = require('./helpers/fleet-procs.js')
const { decodeBucketRecord } = require('./helpers/redis-bucket-record.js')

const C = 10
const R = 20
const LEASE_MS = 1_000
const LIMITS = { capacity: C, refillPerSecond: R }
const MONTH = { unit: 'month', timeZone: 'UTC' }
// The fleet time after a holder's last call before the store writes its slice off as spent.
const MARGIN_MS = LEASE_MS * 1.1 + 1_000

describe('one bucket for the fleet: child processes on real stores', () => {
  const servers = useFleetServers('bucket', { mongo: true, cluster: true, admin: true, limiter: LIMITS, share: { leaseMs: LEASE_MS } })
  const { fleetOf, freshName } = servers
  let redis
  let admin // reads and flushes the standalone Redis behind the workers' backs
  before(() => ({ redis, admin } = servers))

  const stopStore = { ioredis: () => redis.pause(), mongo: () => process.kill(servers.mongo.serverPid(), 'SIGSTOP') }
  const continueStore = { ioredis: () => redis.resume(), mongo: () => process.kill(servers.mongo.serverPid(), 'SIGCONT') }

  /** Each worker's counts for key; asserts that none saw an error (a healthy store). */
  function assertNoErrors(counts, key) {
    for (const [i, perKey] of counts.entries()) assert.deepEqual(perKey?.[key]?.errors ?? {}, {}, `worker ${i}: ${JSON.stringify(perKey?.[key])}`)
  }

  /** Units admitted of key by the calls made between from and to (ms of the logs' clock). */
  const admittedBetween = (calls, key, from, to) => calls.filter((c) => c.key === key && c.outcome === 'A' && c.lo >= from && c.hi <= to).reduce((n, c) => n + c.n, 0)

  /** status(key) of each worker: { tokens (its slice), fleetTokens, ... }. */
  const statusOf = (workers, key) => Promise.all(workers.map(async (worker) => (await worker.call('status', { key })).status))

  /** The slices of key held by workers: integers from 0 to C that add up to at most C. */
  async function assertSlices(workers, key, capacity = C) {
    const statuses = await statusOf(workers, key)
    const slices = statuses.map((status) => status.tokens)
    for (const status of statuses) {
      assert.ok(status.tokens >= 0 && status.tokens <= capacity, `slices ${JSON.stringify(slices)}`)
      assert.ok(status.fleetTokens <= capacity, `fleetTokens ${status.fleetTokens} above C`)
    }
    assert.ok(slices.reduce((a, b) => a + b, 0) <= capacity, `slices held ${JSON.stringify(slices)} add up to more than C = ${capacity}`)
    return statuses
  }

  /** count calls of consume(key) dealt to the workers in turn, each awaited; the units admitted. */
  async function roundRobinBurst(workers, key, count) {
    let admitted = 0
    for (let i = 0; i < count; i++) {
      const { decision, error } = await workers[i % workers.length].call('consume', { key })
      assert.equal(error, undefined, JSON.stringify(error))
      if (decision.allowed) admitted++
    }
    return admitted
  }

  /** The store calls each worker has made (stats().store.calls). */
  const storeCalls = (workers) => Promise.all(workers.map(async (worker) => (await worker.call('stats')).stats.store.calls))
  /** The tokens each worker's store calls took (stats().store.reserved). */
  const storeTaken = (workers) => Promise.all(workers.map(async (worker) => (await worker.call('stats')).stats.store.reserved))

  test('the harness can fail: three processes with buckets of their own break the bound', { timeout: 60_000 }, async () => {
    const fleet = await startFleet({ count: 3, store: { client: 'none' }, limiter: LIMITS, share: null, dir: servers.work, label: freshName('unshared') })
    await roundRobin(fleet.workers, 'ip:0', 2 * R)
    await sleep(1_000)
    await fleet.stopAll()
    const result = checkBucket(fleet.units('ip:0'), LIMITS)
    assert.equal(result.ok, false, `three unshared buckets passed: ${JSON.stringify(result.worst)}`)
    assert.ok(result.worst.count >= 2 * C, `the worst window holds the three bursts: ${describeWorst(result, LIMITS)}`)
    await fleet.killAll()
  })

  test('one process alone decides close to one unshared bucket on the same arrivals (ioredis)', { timeout: 60_000 }, async () => {
    const fleet = await fleetOf('ioredis', 'alone', { count: 1 })
    await fleet.workers[0].call('traffic', { key: 'ip:0', perSecond: 2 * R })
    await sleep(2_500)
    const counts = await fleet.stopAll()
    assertNoErrors(counts, 'ip:0')
    await assertSlices(fleet.workers, 'ip:0')
    const calls = fleet.calls()
    assertBucket(fleet.units('ip:0'), LIMITS)
    const yardstick = unsharedAdmits(calls.map((c) => c.lo), LIMITS)
    const admitted = fleet.units('ip:0').length
    assert.ok(admitted >= 0.9 * yardstick - 1, `alone, the process admitted ${admitted}; one unshared bucket would admit ${yardstick} of the same ${calls.length} arrivals`)
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
      assert.ok(admitted >= 0.8 * yardstick, `the fleet admitted ${admitted}, one unshared bucket would admit ${yardstick} of the same ${calls.length} arrivals`)
      assert.ok(counts.filter((perKey) => perKey['ip:1'].admitted > 0).length >= 2, `the processes shared the key: ${JSON.stringify(counts.map((perKey) => perKey['ip:1']))}`)
      await assertSlices(fleet.workers, 'ip:1')
      await fleet.killAll()
    })
  }

  for (const storeKind of ['ioredis', 'node-redis-cluster', 'mongo']) {
    test(`traffic moving wholly from one process to another: the new one admits 90% of R within leaseMs / 2 + 1 s (${storeKind})`, { timeout: 60_000 }, async () => {
      const fleet = await fleetOf(storeKind, 'moving', { count: 2 })
      const [from, to] = fleet.workers
      await from.call('traffic', { key: 'ip:2', perSecond: 2 * R })
      await sleep(1_500)
      await from.call('stop')
      const moved = nowMs()
      await to.call('traffic', { key: 'ip:2', perSecond: 2 * R })
      const settled = moved + LEASE_MS / 2 + 1_000
      await sleep(settled + 1_000 - nowMs() + 200)
      const counts = await fleet.stopAll()
      assertNoErrors(counts, 'ip:2')
      const calls = fleet.calls()
      assertBucket(fleet.units('ip:2'), LIMITS)
      // In the second after leaseMs / 2 + 1 s: R of refill, and what was in the bucket then
      const late = admittedBetween(calls, 'ip:2', settled, settled + 1_000)
      assert.ok(late >= 0.9 * R - 1, `in the second after leaseMs / 2 + 1 s the new process admitted ${late} (R = ${R}); slices ${JSON.stringify(await statusOf(fleet.workers, 'ip:2'))}`)
      await fleet.killAll()
    })
  }

  /** The bucket record of (name, key) in the standalone Redis, decoded (docs/several-instances.md). */
  async function redisRecord(name, key) {
    const keys = (await admin.keys('*')).filter((k) => k.includes(name) && k.includes(key))
    assert.equal(keys.length, 1, `one record for ${name} / ${key}: ${JSON.stringify(keys)}`)
    return decodeBucketRecord(await admin.getBuffer(keys[0]))
  }

  test('a holder SIGKILLed: the store keeps its slice out until leaseMs·1.1 + 1 s of fleet time have passed, then the bucket is whole again; never over the bound (ioredis)', { timeout: 60_000 }, async () => {
    const fleet = await fleetOf('ioredis', 'kill', { count: 2 })
    const [victim, survivor] = fleet.workers
    // The victim takes a slice: its first call one token, its second a share of the rest.
    for (let i = 0; i < 2; i++) assert.equal((await victim.call('consume', { key: 'ip:3' })).decision.allowed, true)
    const record = await redisRecord(fleet.name, 'ip:3')
    const outs = Object.entries(record.instances).filter(([, entry]) => entry.o !== undefined)
    assert.equal(outs.length, 1, `one holder in ${JSON.stringify(record)}`)
    const out = outs[0][1].o
    assert.ok(out >= 2, `the victim's slice: ${JSON.stringify(record)}`)
    await victim.kill()
    const killed = nowMs()
    // Before the write-off, and after C / R of refill: the bucket holds at most C - out
    await sleep((C / R) * 1000 + 100)
    const before = await survivor.call('burst', { key: 'ip:3', count: 2 * C })
    const beforeAt = nowMs()
    assert.ok(beforeAt < killed + MARGIN_MS, `the first burst came ${(beforeAt - killed).toFixed(0)} ms after the kill (loaded machine?)`)
    assert.ok(before.admitted <= C - out, `before the write-off the survivor admitted ${before.admitted}, with ${out} out to the victim (C = ${C})`)
    // After it, the first call writes the slice off as spent (the bucket refills from then on,
    // and nothing of the victim's is out any more); C / R later a burst finds the bucket full
    await sleep(killed + MARGIN_MS + 300 - nowMs())
    await survivor.call('consume', { key: 'ip:3' })
    assert.equal((await redisRecord(fleet.name, 'ip:3')).instances[outs[0][0]]?.o, undefined, 'the victim still has a slice out after the write-off margin')
    await sleep((C / R) * 1000 + 200)
    const afterKill = await roundRobinBurst([survivor], 'ip:3', 2 * C)
    assert.ok(afterKill >= 0.9 * C - 1, `after the write-off the survivor admitted ${afterKill} of a full bucket (C = ${C})`)
    assertBucket(fleet.units('ip:3'), LIMITS)
    await fleet.killAll()
  })

  for (const storeKind of ['ioredis', 'mongo']) {
    test(`the store stopped (SIGSTOP): slices decide while their lease holds, then ERR_STORE_UNAVAILABLE, or failOpen's own bucket; back to one bucket after (${storeKind})`, { timeout: 60_000 }, async () => {
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
      // (what failOpen admitted meanwhile is taken from the store's bucket: a debt of up to
      // C + R·(the outage), repaid at R)
      await sleep(5_000)
      await fleet.stopAll()
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
      // failOpen: true: its own bucket (C, R) after its lease: some admitted, never past C + R·Δ
      const openUnits = calls.filter((c) => c.file === openLog && c.outcome === 'A' && c.lo >= lapsed && c.hi <= resumed).map((c) => ({ lo: c.lo, hi: c.hi }))
      assert.ok(openUnits.length >= 1, 'failOpen admitted nothing during the outage')
      assertBucket(openUnits, LIMITS, 'the failOpen process during the outage')
      // The fleet's bound holds over everything decided from slices: all but the failOpen process's outage
      const settledAgain = resumed + timeoutMs + 1_000
      const fromSlices = calls.filter((c) => c.outcome === 'A' && (c.file !== openLog || c.hi < stopped || c.lo > settledAgain))
      assertBucket(fromSlices.map((c) => ({ lo: c.lo, hi: c.hi })), LIMITS)
      // and the fleet admits again once the store is back and failOpen's debt is repaid
      const debt = calls.filter((c) => c.file === openLog && c.outcome === 'A' && c.hi >= stopped && c.lo <= settledAgain).length
      const repaid = settledAgain + (debt / R) * 1000
      const end = Math.max(...calls.map((c) => c.lo))
      assert.ok(repaid + 500 < end, `failOpen's debt of ${debt} is repaid only ${(repaid - resumed).toFixed(0)} ms after the store came back`)
      assert.ok(admittedBetween(calls, 'ip:4', repaid, Infinity) >= 1, `nothing admitted after the store came back and failOpen's debt of ${debt} was repaid`)
      await fleet.killAll()
    })
  }

  test('the store killed and restarted empty, then FLUSHALL, under traffic: records come back empty, never over the bound, and the fleet admits again (ioredis and node-redis)', { timeout: 60_000 }, async () => {
    const fleet = await fleetOf('ioredis', 'restart', { count: 1 })
    await fleet.add(servers.store('node-redis'))
    await roundRobin(fleet.workers, 'ip:5', 2 * R)
    await sleep(1_500)
    await redis.kill()
    await redis.restart()
    const restarted = nowMs()
    await sleep(2_500)
    await admin.flushall()
    const flushed = nowMs()
    await sleep(2_500)
    const counts = await fleet.stopAll()
    const calls = fleet.calls()
    // A record that came back full would add C on top of a saturated key's R·Δ: the bound catches it
    assertBucket(fleet.units('ip:5'), LIMITS)
    for (const [label, from] of [['restarted', restarted], ['flushed', flushed]]) {
      const again = admittedBetween(calls, 'ip:5', from + 1_000, from + 2_500)
      assert.ok(again >= 1, `nothing admitted in the 1.5 s after the store was ${label}: ${JSON.stringify(counts.map((c) => c['ip:5']))}`)
    }
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
        assert.equal((await limiter.consume(key, 1)).allowed, true)
        assert.equal((await limiter.consume(key, 1)).allowed, true)
        await admin.del(await record(key))
      }
      // Within the shortest TTL the store gave it (C / R 2 s or the margin 2.1 s, plus a minute): lost
      clock.advance(LEASE_MS + 500) // the lease lapsed: the next call asks the store
      const lost = await limiter.consume('lost', 1)
      assert.equal(lost.allowed, false, `a lost record came back with tokens: ${JSON.stringify(lost)}`)
      assert.equal(lost.retryAfterBasis, 'monotonic-refill')
      // After it: the record may have expired as the store lets it, and the bucket had refilled anyway
      clock.advance(2_100 + 60_000)
      const expired = await limiter.consume('expired', 2)
      assert.equal(expired.allowed, true, `a record that may have expired came back empty: ${JSON.stringify(expired)}`)
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
    await assertSlices(fleet.workers, 'small', small.capacity)
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

  describe('no budget stranded', () => {
    for (const storeKind of ['ioredis', 'node-redis', 'mongo']) {
      test(`first consumes at three processes are admitted; a round-robin burst of 2·C on a full bucket admits 0.9·C; a key emptied and idle for T admits 0.9·min(C, R·T) − 1 at once (${storeKind})`, { timeout: 60_000 }, async () => {
        const limiter = { capacity: C, refillPerSecond: 5 }
        const fleet = await fleetOf(storeKind, 'stranded', { count: 3, limiter })
        const { workers } = fleet
        // A fresh key's first consume at each process (3 ≤ C in the bucket)
        for (const [i, worker] of workers.entries()) {
          const { decision } = await worker.call('consume', { key: 'first' })
          assert.equal(decision?.allowed, true, `process ${i}'s first consume: ${JSON.stringify(decision)}`)
        }
        // 2·C round-robin on a full bucket
        const burst = await roundRobinBurst(workers, 'burst', 2 * C)
        assert.ok(burst >= 0.9 * C, `a round-robin burst of ${2 * C} on a full bucket of ${C} admitted ${burst}`)
        // emptied (the burst), then idle for T = 1 s (R·T = 5): a burst at one process, at once
        const emptied = nowMs()
        await sleep(1_000)
        const T = (nowMs() - emptied) / 1000
        const { admitted } = await workers[2].call('burst', { key: 'burst', count: 2 * C })
        const due = 0.9 * Math.min(C, limiter.refillPerSecond * T) - 1
        assert.ok(admitted >= due, `idle ${T.toFixed(2)} s after the burst, a burst at one process admitted ${admitted} (at least ${due.toFixed(1)} due)`)
        assertBucket(fleet.units('burst'), limiter)
        await fleet.killAll()
      })
    }

    test("the docs' recipe, 100 per 15 minutes: a round-robin burst of 200 over three processes admits at least 90 (ioredis)", { timeout: 60_000 }, async () => {
      const limiter = { capacity: 100, refillPerSecond: 100 / 900 }
      const fleet = await fleetOf('ioredis', 'recipe', { count: 3, limiter })
      const admitted = await roundRobinBurst(fleet.workers, 'ip', 200)
      assert.ok(admitted >= 90, `admitted ${admitted} of 200 on a full bucket of 100`)
      assertBucket(fleet.units('ip'), limiter)
      await assertSlices(fleet.workers, 'ip', 100)
      await fleet.killAll()
    })

    test('a store outage longer than leaseMs loses live processes nothing: their unspent slices come back, and the bucket refills for the outage (ioredis)', { timeout: 60_000 }, async () => {
      // A slow refill (R·(the whole scenario) < 2), so what comes back is what the slices held.
      const limiter = { capacity: 30, refillPerSecond: 0.2 }
      const fleet = await fleetOf('ioredis', 'outage', { count: 3, limiter, share: { timeoutMs: 300 } })
      for (const worker of fleet.workers) for (let i = 0; i < 2; i++) assert.equal((await worker.call('consume', { key: 'ip' })).decision.allowed, true)
      const held = (await statusOf(fleet.workers, 'ip')).reduce((sum, status) => sum + status.tokens, 0)
      assert.ok(held >= 5, `the slices held ${held} unspent`)
      let resumed
      try {
        redis.pause()
        await sleep(MARGIN_MS + 400) // past the lease, and past the store's write-off margin
      } finally {
        redis.resume()
        resumed = nowMs()
      }
      // The give-backs go at the idle timer's next turns; then one process finds them all
      await waitUntil(async () => (await statusOf(fleet.workers, 'ip')).every((status) => status.tokens === 0), { timeoutMs: 5_000, what: 'the slices to lapse' })
      await sleep(LEASE_MS)
      const { admitted } = await fleet.workers[0].call('burst', { key: 'ip', count: 30 })
      const refilled = (limiter.refillPerSecond * (nowMs() - resumed + 2 * MARGIN_MS)) / 1000
      const due = 0.9 * (30 - 6) - 1
      assert.ok(admitted >= due, `after the outage a burst admitted ${admitted}: the slices had held ${held} unspent and the store ${30 - 6 - held} (at least ${due.toFixed(1)} due, a refill of at most ${refilled.toFixed(1)} since)`)
      assertBucket(fleet.units('ip'), limiter)
      await fleet.killAll()
    })

    const storeCallsPerSecond = []
    const tokensPerCall = []
    test('a saturated key: the fleet admits 90% of R, and a denial waits the fleet\'s wait (ioredis, leaseMs 4,000)', { timeout: 60_000 }, async () => {
      const limits = { capacity: R, refillPerSecond: R }
      const fleet = await fleetOf('ioredis', 'saturated', { count: 3, limiter: limits, share: { leaseMs: 4_000 } })
      const before = await storeCalls(fleet.workers)
      const takenBefore = await storeTaken(fleet.workers)
      const start = await roundRobin(fleet.workers, 'ip', 2 * R)
      await sleep(start + 6_000 - nowMs())
      const seconds = (nowMs() - start) / 1000
      const counts = await fleet.stopAll()
      assertNoErrors(counts, 'ip')
      const made = (await storeCalls(fleet.workers)).map((n, i) => n - before[i])
      storeCallsPerSecond.push(...made.map((n) => n / seconds))
      tokensPerCall.push(...(await storeTaken(fleet.workers)).map((n, i) => (n - takenBefore[i]) / made[i]))
      const calls = fleet.calls()
      assertBucket(fleet.units('ip'), limits)
      const admitted = fleet.units('ip').length
      const yardstick = unsharedAdmits(calls.map((c) => c.lo), limits)
      assert.ok(admitted >= 0.8 * yardstick, `the fleet admitted ${admitted}; one bucket would admit ${yardstick} of the same ${calls.length} arrivals`)
      // Once the full bucket is shared out and spent (after the first two seconds), 90% of R
      const steadyFrom = start + 2_000
      const steadyTo = Math.max(...calls.map((c) => c.hi))
      const steady = admittedBetween(calls, 'ip', steadyFrom, steadyTo)
      const due = (0.9 * R * (steadyTo - steadyFrom)) / 1000 - 1
      assert.ok(steady >= due, `after the first two seconds the fleet admitted ${steady} in ${((steadyTo - steadyFrom) / 1000).toFixed(2)} s (90% of R: ${due.toFixed(1)})`)
      // The denial's wait: from a denial on the empty bucket, the process admits again within
      // retryAfterMs + 1 s, and retryAfterMs is not over a second more than that real wait.
      const [first] = fleet.workers
      let denial
      for (let i = 0; i < 3 * R && denial === undefined; i++) {
        const { decision } = await first.call('consume', { key: 'ip' })
        if (!decision.allowed) denial = { decision, at: nowMs() }
      }
      assert.ok(denial, 'no denial on a drained bucket')
      assert.equal(denial.decision.retryAfterBasis, 'monotonic-refill')
      let admittedAt
      await waitUntil(async () => {
        const { decision } = await first.call('consume', { key: 'ip' })
        if (decision.allowed) admittedAt = nowMs()
        return decision.allowed
      }, { timeoutMs: 10_000, what: 'an admission after the denial' })
      const realWait = admittedAt - denial.at
      assert.ok(denial.decision.retryAfterMs <= realWait + 1_000, `retryAfterMs ${denial.decision.retryAfterMs}, admitted again after ${realWait.toFixed(0)} ms`)
      assert.ok(realWait <= denial.decision.retryAfterMs + 1_000, `retryAfterMs ${denial.decision.retryAfterMs}, admitted again only after ${realWait.toFixed(0)} ms`)
      await fleet.killAll()
    })

    // The store calls the scenario above cost: a saturated key is denied locally between them
    // (short answers, and a key living off the refill), at most two a process a second, the first
    // second's sharing-out of the full bucket included.
    test('a saturated key costs at most 2 store calls per process per second (the scenario above)', () => {
      assert.equal(storeCallsPerSecond.length, 3, 'the scenario above ran')
      for (const perSecond of storeCallsPerSecond) assert.ok(perSecond <= 2, `store calls per process per second: ${JSON.stringify(storeCallsPerSecond.map((n) => n.toFixed(1)))}, tokens taken per call ${JSON.stringify(tokensPerCall.map((n) => n.toFixed(1)))}`)
    })
  })
})
