'use strict'

// One bucket for the whole fleet (`share: { bucket: true }`) against a hostile world, measured as
// share-fleet-bucket.test.js measures it: child processes (helpers/fleet-worker.js) on a real
// redis-server, every call logged, and over the merged logs no interval of real time of length Δ
// holding more admitted units than C + R·Δ·1.001 (helpers/fleet-check.js). The probes: the store
// flushed (FLUSHALL) and restarted empty mid-run; its clock stepped by ±30 s and ±1 h while one
// process holds a slice and another starts; every reply of the store delayed by 0.8·timeoutMs;
// a holder stopped (SIGSTOP) past its lease; an event loop blocked for 3·leaseMs; the store's
// connections stalled and cut; extreme capacities, refills, leases and keys; the operator's fill and
// grant racing a flood.
//
// Each scenario runs a few seconds; the timings asserted are generous (a loaded 2-core machine),
// the bound is not.

const { after, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { startDelayProxy } = require('./helpers/delay-proxy.js')
const { assertBucket, checkBucket, describeWorst } = require('./helpers/fleet-check.js')
const { useFleetServers, roundRobin, nowMs, sleep } = require('./helpers/fleet-procs.js')
const { quotaAdmin, redisStore } = require('../lib/shared.js')
const { periodFor } = require('..')

const C = 10
const R = 20
const LEASE_MS = 1_000
const LIMITS = { capacity: C, refillPerSecond: R }

/** Units admitted of key by the calls made between from and to (ms of the logs' clock). */
const admittedBetween = (calls, key, from, to) => calls.filter((c) => c.key === key && c.outcome === 'A' && c.lo >= from && c.hi <= to).reduce((n, c) => n + c.n, 0)

describe('one bucket for the fleet, hostile probes: child processes on a real redis-server', () => {
  // servers.stepped: a redis-server whose wall clock the tests step.
  const servers = useFleetServers('hostile', { stepped: true, admin: true, limiter: LIMITS, share: { leaseMs: LEASE_MS } })
  const proxies = []

  after(() => Promise.allSettled(proxies.map((proxy) => proxy.close())))

  const fleetOf = servers.fleetOf
  const ioredis = (url) => servers.store('ioredis', url)
  const nodeRedis = (url) => servers.store('node-redis', url)
  /** The operator's own client of the test's redis-server. */
  const adminClient = () => servers.admin

  /** Asserts that no worker saw an error for key. */
  function assertNoErrors(counts, key) {
    for (const [i, perKey] of counts.entries()) assert.deepEqual(perKey?.[key]?.errors ?? {}, {}, `worker ${i}: ${JSON.stringify(perKey?.[key])}`)
  }

  describe('the store loses its data (issue 37)', () => {
    for (const { refillPerSecond, leaseMs } of [{ refillPerSecond: 100, leaseMs: 10_000 }, { refillPerSecond: 20, leaseMs: 1_000 }]) {
      test(`FLUSHALL at +2 s while two processes consume (ioredis and node-redis; C 10, R ${refillPerSecond}/s, leaseMs ${leaseMs}): the record comes back empty, the bound holds`, { timeout: 60_000 }, async () => {
        const limits = { capacity: C, refillPerSecond }
        const fleet = await fleetOf(ioredis(), 'flush', { count: 1, limiter: limits, share: { leaseMs } })
        await fleet.add(nodeRedis())
        const start = await roundRobin(fleet.workers, 'k', 2 * refillPerSecond)
        await sleep(start + 2_000 - nowMs())
        await servers.admin.flushall()
        const flushed = nowMs()
        await sleep(2_000)
        const counts = await fleet.stopAll()
        assertNoErrors(counts, 'k')
        assertBucket(fleet.units('k'), limits)
        assert.ok(admittedBetween(fleet.calls(), 'k', flushed + 500, Infinity) >= 1, 'nothing admitted after the flush')
        await fleet.killAll()
      })
    }

    test('redis-server restarted empty while two processes consume (ioredis and node-redis; C 10, R 100/s): the bound holds, and they admit again', { timeout: 60_000 }, async () => {
      const limits = { capacity: C, refillPerSecond: 100 }
      const fleet = await fleetOf(ioredis(), 'restart', { count: 1, limiter: limits })
      await fleet.add(nodeRedis())
      const start = await roundRobin(fleet.workers, 'k', 200)
      await sleep(start + 1_500 - nowMs())
      await servers.redis.kill()
      await servers.redis.restart()
      const restarted = nowMs()
      await sleep(2_500)
      await fleet.stopAll()
      assertBucket(fleet.units('k'), limits)
      assert.ok(admittedBetween(fleet.calls(), 'k', restarted + 1_000, Infinity) >= 1, 'nothing admitted after the restart')
      await fleet.killAll()
    })
  })

  describe("the store's clock stepped while one process holds a slice and another starts (issue 37)", () => {
    for (const stepMs of [30_000, -30_000, 3_600_000, -3_600_000]) {
      test(`a step of ${stepMs / 1000} s: the bound holds${stepMs > 0 ? ' within the C a forward step may add once' : ''}, and store-clock-step is raised`, { timeout: 60_000 }, async () => {
        const fleet = await fleetOf(ioredis(servers.stepped.url), 'step', { count: 1 })
        let restored = false
        try {
          await fleet.workers[0].call('traffic', { key: 'k', perSecond: 2 * R })
          await sleep(1_000)
          servers.stepped.stepClock(stepMs)
          const other = await fleet.add()
          await other.call('traffic', { key: 'k', perSecond: 2 * R })
          await sleep(1_500)
          const counts = await fleet.stopAll()
          assertNoErrors(counts, 'k')
          const result = checkBucket(fleet.units('k'), { ...LIMITS, allowance: stepMs > 0 ? C : 0 })
          assert.ok(result.ok, describeWorst(result, LIMITS))
          const { stats } = await fleet.workers[0].call('stats')
          assert.ok(stats.anomalies['store-clock-step'] >= 1, `the holder saw no step: ${JSON.stringify(stats.anomalies)}`)
          await fleet.killAll()
          servers.stepped.stepClock(-stepMs)
          restored = true
        } finally {
          if (!restored) servers.stepped.stepClock(-stepMs)
        }
      })
    }
  })

  test('every store reply delayed by 0.8·timeoutMs (three processes, C 10, R 20/s, leaseMs 1,000, timeoutMs 300): each call settles within timeoutMs + 50 ms, decided or ERR_STORE_UNAVAILABLE (issue 37)', { timeout: 60_000 }, async () => {
    const timeoutMs = 300
    const proxy = await startDelayProxy({ host: servers.redis.host, port: servers.redis.port, replyDelayMs: 0.8 * timeoutMs })
    proxies.push(proxy)
    const fleet = await fleetOf(ioredis(proxy.url), 'delayed', { count: 3, share: { timeoutMs } })
    await roundRobin(fleet.workers, 'k', 2 * R)
    await sleep(3_000)
    const counts = await fleet.stopAll()
    const calls = fleet.calls().filter((c) => c.key === 'k')
    assert.ok(calls.length >= 3 * R, `${calls.length} calls`)
    const slowest = calls.reduce((worst, c) => (c.hi - c.lo > worst.hi - worst.lo ? c : worst))
    assert.ok(slowest.hi - slowest.lo <= timeoutMs + 50, `a call took ${(slowest.hi - slowest.lo).toFixed(1)} ms (${slowest.outcome}) with timeoutMs ${timeoutMs}`)
    const outcomes = new Set(calls.map((c) => c.outcome))
    for (const outcome of outcomes) assert.ok(['A', 'D', 'ERR_STORE_UNAVAILABLE'].includes(outcome), JSON.stringify([...outcomes]))
    for (const perKey of counts) for (const basis of Object.keys(perKey.k.bases)) assert.equal(basis, 'monotonic-refill')
    assert.ok(outcomes.has('A'), 'nothing admitted through a slow store')
    assert.ok(calls.some((c) => c.hi - c.lo >= 0.8 * timeoutMs), 'no call waited for the store (the proxy delayed nothing?)')
    assertBucket(fleet.units('k'), LIMITS)
    await fleet.killAll()
  })

  describe('processes and connections in trouble (issue 36)', () => {
    test('a holder stopped (SIGSTOP) for longer than leaseMs, then resumed: it spends no stale slice', { timeout: 60_000 }, async () => {
      const fleet = await fleetOf(ioredis(), 'stopped-holder', { count: 2 })
      await roundRobin(fleet.workers, 'k', 2 * R)
      await sleep(1_000)
      const holder = fleet.workers[0]
      process.kill(holder.pid, 'SIGSTOP')
      try {
        await sleep(LEASE_MS * 1.5)
      } finally {
        process.kill(holder.pid, 'SIGCONT')
      }
      await sleep(1_500)
      await fleet.stopAll()
      assertBucket(fleet.units('k'), LIMITS)
      await fleet.killAll()
    })

    test('an event loop blocked for 3·leaseMs while its traffic falls due: the calls it then makes spend no stale slice', { timeout: 60_000 }, async () => {
      const fleet = await fleetOf(ioredis(), 'blocked', { count: 2 })
      await roundRobin(fleet.workers, 'k', 2 * R)
      await sleep(1_000)
      await fleet.workers[0].call('busy', { ms: 3 * LEASE_MS })
      await sleep(1_500)
      const counts = await fleet.stopAll()
      assertNoErrors(counts, 'k')
      assertBucket(fleet.units('k'), LIMITS)
      await fleet.killAll()
    })

    test('the store stalled behind a proxy, then every connection cut: calls settle within timeoutMs, the bound holds, and the fleet admits again', { timeout: 60_000 }, async () => {
      const timeoutMs = 300
      const proxy = await startDelayProxy({ host: servers.redis.host, port: servers.redis.port })
      proxies.push(proxy)
      const fleet = await fleetOf(ioredis(proxy.url), 'stall', { count: 2, share: { timeoutMs } })
      await roundRobin(fleet.workers, 'k', 2 * R)
      await sleep(1_000)
      proxy.stall()
      await sleep(1_500)
      proxy.cut()
      proxy.resume()
      const cut = nowMs()
      await sleep(2_000)
      await fleet.stopAll()
      const calls = fleet.calls()
      const slowest = Math.max(...calls.map((c) => c.hi - c.lo))
      assert.ok(slowest <= timeoutMs + 100, `a call took ${slowest.toFixed(1)} ms with timeoutMs ${timeoutMs}`)
      assertBucket(fleet.units('k'), LIMITS)
      assert.ok(admittedBetween(calls, 'k', cut + 1_000, Infinity) >= 1, 'nothing admitted after the connections were cut')
      await fleet.killAll()
    })
  })

  describe('the operator racing a flood (issue 36)', () => {
    test('fill racing a flood from three processes: each fill sets the store to C − out, the bound holds with C once for each fill, and the fleet admits again after each', { timeout: 60_000 }, async () => {
      const fleet = await fleetOf(ioredis(), 'fill-race', { count: 3 })
      const admin = quotaAdmin(redisStore(adminClient()), { name: fleet.share.name })
      const start = await roundRobin(fleet.workers, 'flood', 3 * R)
      const fills = []
      for (const at of [800, 1_600, 2_400]) {
        await sleep(start + at - nowMs())
        const filledAt = nowMs()
        const usage = await admin.fill('flood')
        assert.equal(usage.capacity, C)
        assert.ok(usage.tokens >= 0 && Math.abs(usage.tokens - (C - usage.out)) < 1e-9, `fill answered ${JSON.stringify(usage)}`)
        fills.push(filledAt)
      }
      await sleep(start + 3_400 - nowMs())
      const counts = await fleet.stopAll()
      assertNoErrors(counts, 'flood')
      // A fill adds at most C: the bound with C more for each fill.
      assertBucket(fleet.units('flood'), { capacity: C * (1 + fills.length), refillPerSecond: R })
      const calls = fleet.calls()
      for (const at of fills) assert.ok(admittedBetween(calls, 'flood', at, at + 1_000) >= R / 2, `admitted again within a second of the fill at +${Math.round(at - start)} ms`)
      await fleet.killAll()
    })

    test('grant racing a flood on a key with a quota and a shared bucket: once the limiters are idle, used − held is what they admitted', { timeout: 60_000 }, async () => {
      const period = { unit: 'day', timeZone: 'UTC' }
      const limits = { capacity: 1_000, refillPerSecond: 1_000, quota: { limit: 40, period } }
      const fleet = await fleetOf(ioredis(), 'grant-race', { count: 3, limiter: limits })
      const admin = quotaAdmin(redisStore(adminClient()), { name: fleet.share.name })
      const periodId = periodFor(period, Date.now()).id
      const start = await roundRobin(fleet.workers, 'tenant', 300)
      for (const at of [500, 1_000, 1_000]) {
        await sleep(start + at - nowMs())
        await admin.grant('tenant', periodId, 10)
      }
      await sleep(start + 2_000 - nowMs())
      const counts = await fleet.stopAll()
      assertNoErrors(counts, 'tenant')
      for (const worker of fleet.workers) assert.equal((await worker.call('close')).closed, true)
      const usage = await admin.usage('tenant', periodId)
      const admitted = fleet.units('tenant').length
      assert.equal(usage.used - usage.held, admitted, JSON.stringify(usage))
      assert.ok(admitted <= 40 + 30, `admitted ${admitted} of a limit of 40 and 30 granted`)
      assert.ok(admitted >= 60, `the grants were used: ${admitted} admitted`)
      await fleet.killAll()
    })
  })

  describe('extreme limits and keys (issue 36)', () => {
    // Per key (policy): capacity 1 refilled once an hour, capacity 2**31 refilled 1e9 a second,
    // the defaults under a key of 256 code units and under keys with lone surrogates.
    const policy = {
      one: { capacity: 1, refillPerSecond: 1 / 3600 },
      huge: { capacity: 2 ** 31, refillPerSecond: 1e9 },
    }
    const keys = ['one', 'huge', 'k'.repeat(256), '\ud800', 'x\udfffy']
    const limitsOf = (key) => policy[key] ?? LIMITS
    for (const leaseMs of [1_000, 600_000]) {
      test(`three processes, round-robin at 2·R on every key, leaseMs ${leaseMs}: each key's bound holds`, { timeout: 60_000 }, async () => {
        const fleet = await fleetOf(ioredis(), 'extremes', { count: 3, policy, share: { leaseMs } })
        for (const key of keys) await roundRobin(fleet.workers, key, 2 * R)
        await sleep(2_000)
        const counts = await fleet.stopAll()
        for (const key of keys) {
          assertNoErrors(counts, key)
          assertBucket(fleet.units(key), limitsOf(key), JSON.stringify(key))
        }
        assert.equal(fleet.units('one').length, 1, 'capacity 1, refilled once an hour: one admitted')
        const hugeCalls = fleet.calls().filter((c) => c.key === 'huge')
        assert.equal(fleet.units('huge').length, hugeCalls.length, 'capacity 2**31: every call admitted')
        for (const key of keys.slice(2)) assert.ok(fleet.units(key).length >= C, `${JSON.stringify(key)}: ${fleet.units(key).length} admitted`)
        await fleet.killAll()
      })
    }
  })
})
