'use strict'
// Blocks with share (docs/blocking.md), on a real redis-server (ioredis and node-redis), a
// three-node Redis Cluster and the MongoDB wire server: the store's block records (blockSet,
// blockClear, blockRead, keys), the reservation and the fleet bucket's take that carry the key's
// block, quotaAdmin's block, unblock, blocked and keys, and instances in processes of their own
// (a shared quota, a fleet bucket): a block made by one is honoured by the others from their next
// store call for the key, and an unblock is seen within a second.

const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { MongoClient } = require('mongodb')
const { redisStore, mongoStore, quotaAdmin } = require('../lib/shared.js')
const { storeOperations } = require('../lib/share/protocol.js')
const { startRedisServer, startRedisCluster } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { startWorker, killInstances } = require('./helpers/shared-fleet.js')

const WORKER = path.join(__dirname, 'helpers', 'shared-worker.js')
const MONTH = { unit: 'month', timeZone: 'UTC' }
const MINUTE = 60_000
let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`
const turn = () => new Promise((resolve) => setTimeout(resolve, 20))

/** Until `check()` is true (each try after a turn of the event loop and 20 ms), at most `withinMs`. */
async function until(check, withinMs, what) {
  const started = Date.now()
  while (!(await check())) {
    assert.ok(Date.now() - started < withinMs, `${what} within ${withinMs} ms`)
    await turn()
  }
  return Date.now() - started
}

const takeOf = (name, key, fields = {}) => ({ name, key, capacity: 10, refillPerSecond: 2, instance: 'A', leaseMs: 10_000, want: 1, more: 0, held: 0, give: 0, charge: 0, fleetMs: -1, recordId: 0, spend: true, ...fields })
const reserveOf = (name, key, fields = {}) => ({ name, key, periodId: '2026-12', limit: 100, leaseUnits: 5, lacking: 0, charge: 0, expiresAtMs: Date.now() + 3_600_000, instance: 'A', held: 0, owned: 0, recordId: 0, ...fields })

describe('blocks in the stores', () => {
  let redis
  let cluster
  let mongo
  const closers = []
  const kinds = {}

  before(async () => {
    ;[redis, cluster, mongo] = await Promise.all([startRedisServer(), startRedisCluster(), startMongoServer()])
    const single = new Redis({ host: redis.host, port: redis.port })
    const clustered = new Redis.Cluster(cluster.rootNodes)
    const mongoClient = new MongoClient(mongo.uri)
    await mongoClient.connect()
    closers.push(() => single.quit(), () => clustered.quit(), () => mongoClient.close())
    kinds.redis = { store: redisStore(single), worker: { client: 'ioredis', url: redis.url } }
    const nodeRedis = createClient({ url: redis.url })
    await nodeRedis.connect()
    closers.push(() => nodeRedis.close())
    kinds['redis (node-redis)'] = { store: redisStore(nodeRedis), worker: { client: 'node-redis', url: redis.url } }
    kinds.mongo = { db: mongoClient.db(`blocks_${process.pid}`), store: mongoStore(mongoClient.db(`blocks_${process.pid}`)), worker: { client: 'mongo', url: mongo.uri, dbName: `blocks_${process.pid}` } }
    kinds['redis cluster'] = { store: redisStore(clustered), worker: { client: 'ioredis-cluster', nodes: cluster.rootNodes } }
  })

  after(async () => {
    killInstances()
    await Promise.allSettled(closers.map((close) => close()))
    await Promise.allSettled([redis?.stop(), cluster?.stop(), mongo?.stop()])
  })

  for (const kind of ['redis', 'redis (node-redis)', 'redis cluster', 'mongo']) {
    test(`blockSet, blockRead, blockClear and the reservation's blockedMs (${kind})`, async () => {
      const ops = storeOperations(kinds[kind].store)
      const name = freshName('ops')
      const key = 'a{b}:c'
      assert.deepEqual(await ops.blockRead({ name, key }), { blockedMs: 0, level: 0 })
      const reserved = await ops.reserve(reserveOf(name, key))
      assert.equal(reserved.blockedMs, undefined, 'no block, nothing in the reservation\'s answer')
      const manual = await ops.blockSet({ name, key, forMs: MINUTE, resetAfterMs: 86_400_000 })
      assert.ok(manual.blockedMs > MINUTE - 1000 && manual.blockedMs <= MINUTE, String(manual.blockedMs))
      assert.equal(manual.level, 0, 'a manual block does not change the level')
      const shorter = await ops.blockSet({ name, key, forMs: 1000, resetAfterMs: 86_400_000 })
      assert.ok(shorter.blockedMs > MINUTE - 1000, 'a longer block stays')
      const auto = await ops.blockSet({ name, key, forMs: 1000, levels: [1000, 5 * MINUTE, 10 * MINUTE], resetAfterMs: 86_400_000 })
      assert.equal(auto.level, 1)
      let trips = 0
      const again = await ops.reserve(reserveOf(name, key, { recordId: reserved.recordId }), () => trips++)
      assert.equal(trips, 1, 'the block came in the reservation\'s own round trip')
      assert.ok(again.blockedMs > MINUTE - 2000, `the reservation answers the block: ${again.blockedMs}`)
      assert.ok((await ops.blockRead({ name, key })).blockedMs > 0)
      const cleared = await ops.blockClear({ name, key })
      assert.ok(cleared.blockedMs > 0)
      assert.deepEqual(await ops.blockRead({ name, key }), { blockedMs: 0, level: 0 })
      assert.equal((await ops.reserve(reserveOf(name, key, { recordId: reserved.recordId }))).blockedMs, undefined)
      const other = await ops.blockRead({ name: `${name}x`, key })
      assert.deepEqual(other, { blockedMs: 0, level: 0 }, 'another name has no block')
    })

    test(`a quota record made after a block carries it: the reservation that makes it answers the block (${kind})`, async () => {
      const ops = storeOperations(kinds[kind].store)
      const name = freshName('later')
      await ops.blockSet({ name, key: 'k', forMs: MINUTE, resetAfterMs: 86_400_000 })
      const first = await ops.reserve(reserveOf(name, 'k'))
      assert.ok(first.blockedMs > MINUTE - 2000 && first.blockedMs <= MINUTE, `the new record's reservation: ${first.blockedMs}`)
      const next = await ops.reserve(reserveOf(name, 'k', { periodId: '2027-01', recordId: 0 }))
      assert.ok(next.blockedMs > MINUTE - 2000, `another period's new record too: ${next.blockedMs}`)
      await ops.blockClear({ name, key: 'k' })
      assert.equal((await ops.reserve(reserveOf(name, 'k', { recordId: first.recordId }))).blockedMs, undefined, 'lifted on the record too')
    })

    test(`a fleet bucket's take answers the key's block in its own round trip, on either path, and a bucket made after a block carries it (${kind})`, async () => {
      const ops = storeOperations(kinds[kind].store)
      const name = freshName('take')
      const key = 'a{b}:c'
      const first = await ops.bucketTake(takeOf(name, key))
      assert.equal(first.blockedMs, undefined, 'no block, nothing in the answer')
      await ops.blockSet({ name, key, forMs: MINUTE, resetAfterMs: 86_400_000 })
      let trips = 0
      // Spent at once, nothing held: a record that lists no instance stays so (Redis's fast path).
      const spent = await ops.bucketTake(takeOf(name, key, { recordId: first.recordId }), () => trips++)
      assert.equal(trips, 1, "the block came in the take's own round trip")
      assert.ok(spent.blockedMs > MINUTE - 2000 && spent.blockedMs <= MINUTE, `the spent take answers the block: ${spent.blockedMs}`)
      // A slice kept: the record lists the instance (the full path).
      const kept = await ops.bucketTake(takeOf(name, key, { recordId: first.recordId, more: 1, spend: false }))
      assert.ok(kept.blockedMs > MINUTE - 2000 && kept.blockedMs <= MINUTE, `the kept take answers the block: ${kept.blockedMs}`)
      const giveBack = await ops.bucketTake(takeOf(name, key, { recordId: first.recordId, want: 0, held: 0, give: kept.held, spend: false }))
      assert.ok(giveBack.blockedMs > 0, 'a give-back answers it too')
      await ops.blockSet({ name, key: 'later', forMs: MINUTE, resetAfterMs: 86_400_000 })
      const made = await ops.bucketTake(takeOf(name, 'later'))
      assert.ok(made.blockedMs > MINUTE - 2000 && made.blockedMs <= MINUTE, `the take that makes the bucket: ${made.blockedMs}`)
      await ops.blockClear({ name, key })
      const lifted = await ops.bucketTake(takeOf(name, key, { recordId: first.recordId }))
      assert.equal(lifted.blockedMs, undefined, 'lifted')
      assert.ok(lifted.granted >= 1, 'and the take took as before')
    })

    test(`block times are the store's, not the writer's wall clock (${kind})`, async () => {
      const ops = storeOperations(kinds[kind].store)
      const name = freshName('clock')
      const reserved = await ops.reserve(reserveOf(name, 'k'))
      const realNow = Date.now
      Date.now = () => realNow() + 3_600_000 // the writer's clock an hour ahead
      let written
      try {
        written = await ops.blockSet({ name, key: 'k', forMs: MINUTE, resetAfterMs: 86_400_000 })
      } finally {
        Date.now = realNow
      }
      assert.ok(written.blockedMs > MINUTE - 2000 && written.blockedMs <= MINUTE, `as written: ${written.blockedMs}`)
      const read = await ops.blockRead({ name, key: 'k' })
      assert.ok(read.blockedMs > MINUTE - 2000 && read.blockedMs <= MINUTE, `read by a process whose clock is right: ${read.blockedMs}`)
      const again = await ops.reserve(reserveOf(name, 'k', { recordId: reserved.recordId }))
      assert.ok(again.blockedMs > MINUTE - 2000 && again.blockedMs <= MINUTE, `the reservation's: ${again.blockedMs}`)
      const listed = await quotaAdmin(kinds[kind].store, { name }).keys({ blocked: true })
      assert.ok(listed[0].blockedForMs > MINUTE - 2000 && listed[0].blockedForMs <= MINUTE, `keys: ${listed[0].blockedForMs}`)
    })

    test(`the store forgets a block and the key's level resetAfterMs after it ends (${kind})`, async () => {
      const ops = storeOperations(kinds[kind].store)
      const name = freshName('reset')
      const levels = [200, 60_000]
      const first = await ops.blockSet({ name, key: 'k', forMs: 200, levels, resetAfterMs: 300 })
      assert.equal(first.level, 1)
      if (kind === 'mongo') {
        const document = await kinds.mongo.db.collection('quota_shares').findOne({ name, key: 'k' })
        const untilMs = Date.now() + first.blockedMs
        assert.ok(Math.abs(document.expiresAt.getTime() - (untilMs + 300)) < 1000, `expiresAt ${document.expiresAt.toISOString()}: the block's end and resetAfterMs`)
      }
      await until(async () => (await ops.blockRead({ name, key: 'k' })).blockedMs === 0, 5_000, 'the block over')
      await new Promise((resolve) => setTimeout(resolve, 400))
      // (MongoDB's TTL monitor deletes the document within a minute: forgotten all the same.)
      assert.deepEqual(await ops.blockRead({ name, key: 'k' }), { blockedMs: 0, level: 0 }, 'the block and its level forgotten')
      assert.deepEqual((await quotaAdmin(kinds[kind].store, { name }).blocked('k')).level, 0, "the operator's view too")
      const again = await ops.blockSet({ name, key: 'k', forMs: 200, levels, resetAfterMs: 300 })
      assert.ok(again.blockedMs <= 200, `level 0's length again: ${again.blockedMs}`)
      assert.equal(again.level, 1)
    })

    test(`quotaAdmin block, unblock, blocked and keys (${kind})`, async () => {
      const name = freshName('admin')
      const admin = quotaAdmin(kinds[kind].store, { name })
      const ops = storeOperations(kinds[kind].store)
      await ops.reserve(reserveOf(name, 'tenant:1'))
      await ops.reserve(reserveOf(name, 'tenant{2}'))
      const blocked = await admin.block('203.0.113.9', 30_000)
      assert.deepEqual(Object.keys(blocked), ['name', 'key', 'blockedForMs', 'level'])
      assert.equal(blocked.name, name)
      assert.ok(blocked.blockedForMs > 29_000 && blocked.blockedForMs <= 30_000)
      assert.ok((await admin.blocked('203.0.113.9')).blockedForMs > 0)
      const all = await admin.keys()
      assert.deepEqual(all.map((entry) => entry.key).sort(), ['203.0.113.9', 'tenant:1', 'tenant{2}'])
      const onlyBlocked = await admin.keys({ blocked: true })
      assert.deepEqual(onlyBlocked.map((entry) => entry.key), ['203.0.113.9'])
      assert.ok(onlyBlocked[0].blockedForMs > 0)
      assert.equal((await admin.keys({ limit: 1 })).length, 1)
      assert.deepEqual(await quotaAdmin(kinds[kind].store, { name: `${name}-typo` }).keys(), [], 'a mistyped name lists nothing')
      const lifted = await admin.unblock('203.0.113.9')
      assert.equal(lifted.level, 0)
      assert.equal((await admin.blocked('203.0.113.9')).blockedForMs, 0)
      assert.deepEqual(await admin.keys({ blocked: true }), [])
      await assert.rejects(admin.block('k', 0), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG' && /forMs/.test(e.message))
      await assert.rejects(admin.block('k', '1'), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG')
      await assert.rejects(admin.keys({ limit: 10_001 }), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG')
      await assert.rejects(admin.keys({ blocked: 'yes' }), (e) => e instanceof TypeError && e.code === 'ERR_INVALID_ARG')
    })

    for (const shape of ['a shared quota', 'a fleet bucket']) test(`${shape}: a block made by one process is honoured by another from its next store call, and an unblock is seen within a second (${kind})`, { timeout: 120_000 }, async () => {
      const name = freshName('fleet')
      const config =
        shape === 'a shared quota'
          ? { ...kinds[kind].worker, share: { name, leaseUnits: 1 }, quota: { limit: 1000, period: MONTH } }
          : { ...kinds[kind].worker, share: { name, bucket: true, leaseMs: 10_000 }, policy: { k: { capacity: 10, refillPerSecond: 1 } } }
      const [a, b] = await Promise.all([startWorker(WORKER, config), startWorker(WORKER, config)])
      const admin = quotaAdmin(kinds[kind].store, { name })
      let exited = false
      try {
        assert.equal((await b.call('consume', { key: 'k' })).decision.allowed, true)
        await a.call('block', { key: 'k', forMs: MINUTE })
        await until(async () => (await admin.blocked('k')).blockedForMs > 0, 10_000, 'the block written to the store')
        const before = (await b.call('stats')).stats.store.calls
        let admitted = 0
        let decision
        for (;;) {
          decision = (await b.call('consume', { key: 'k' })).decision
          if (!decision.allowed) break
          admitted++
        }
        const calls = (await b.call('stats')).stats.store.calls - before
        assert.equal(decision.retryAfterBasis, 'block')
        // (A reservation of leaseUnits 1; a slice of the bucket of 10.)
        assert.ok(admitted <= (shape === 'a shared quota' ? 1 : 9), `at most what its reservation or slice held: ${admitted}`)
        // (A reservation, maybe a background refill.)
        assert.ok(calls <= 2, `the first store call answered the block: ${calls}`)
        assert.ok((await b.call('status', { key: 'k' })).status.blockedForMs > MINUTE - 5000)
        const denied = (await b.call('stats')).stats.store.calls
        for (let i = 0; i < 20; i++) assert.equal((await b.call('consume', { key: 'k' })).decision.retryAfterBasis, 'block')
        assert.ok((await b.call('stats')).stats.store.calls - denied <= 1, 'a blocked key is asked about at most once a second')
        await a.exit() // the block survives the process that made it
        exited = true
        assert.ok((await admin.blocked('k')).blockedForMs > 0)
        assert.equal((await b.call('consume', { key: 'k' })).decision.retryAfterBasis, 'block')
        assert.ok((await admin.unblock('k')).blockedForMs > 0)
        await until(async () => (await admin.blocked('k')).blockedForMs === 0, 10_000, 'the unblock written to the store')
        const seenMs = await until(async () => (await b.call('consume', { key: 'k' })).decision.allowed, 5_000, 'the unblock seen')
        assert.ok(seenMs < 1000 + 1000, `seen within a second (and a loaded machine's margin): ${seenMs} ms`)
      } finally {
        await Promise.allSettled([exited ? undefined : a.exit(), b.exit()])
      }
    })
  }
})
