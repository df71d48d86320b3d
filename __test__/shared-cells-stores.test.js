'use strict'

// The fleet bucket's two store operations (lib/quota-store.js: cellsAcquire, cellsRenew)
// on every store, each step of both against real servers: redis-server standalone (its wall clock
// steppable, through ioredis and node-redis), a real three-node Redis Cluster (ioredis Cluster,
// node-redis createCluster), the MongoDB wire-compatible test server, and the in-process test
// store (the reference model the driver's unit tests use). Where the store's clock can be stepped
// the reclaim margin is checked on both sides; elsewhere with a 1 ms lease (margin 1001.1 ms).

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient, createCluster } = require('redis')
const { MongoClient } = require('mongodb')
const { redisStore, mongoStore } = require('quota-clock-source/shared')
const { QuotaClockError } = require('quota-clock-source')
const { storeOperations } = require('../lib/quota-store.js')
const { RENEW_CHUNK } = require('../lib/shared/redis-cells.js')
const { startRedisServer, startRedisCluster } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { testStore } = require('./helpers/test-store.js')

let unique = 0
const freshName = () => `cells-${process.pid}-${++unique}`
const part = (text) => `${Buffer.byteLength(text)}:${text}`
/** The documented Redis key of a bucket record. */
const redisKey = (name, key, prefix = 'qcs:') => `${prefix}{b:${part(name)}}:${part(key)}`

const L = 10_000
const MARGIN = 1.1 * L + 1000
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function acquireOf(name, fields) {
  return { name, key: 'k', capacity: 10, refillPerSecond: 2, initial: 10, leaseMs: L, held: 0, recordId: 0, ...fields }
}

/** A renewal of one key; answers that key's answer and the store time. */
async function renewOne(ops, name, instance, fields, leaseMs = L) {
  const answer = await ops.cellsRenew({ name, instance, leaseMs, keys: [{ key: 'k', held: 0, tokens: 0, recordId: 0, ...fields }] })
  assert.equal(answer.keys.length, 1)
  return { ...answer.keys[0], storeNowMs: answer.storeNowMs }
}

/** Calls of each command Redis counted so far (INFO commandstats; commands of scripts included). */
async function commandCalls(client, commands) {
  const info = await client.info('commandstats')
  return Object.fromEntries(commands.map((command) => [command, Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0)]))
}

const near = (actual, expected) => assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} != ${expected}`)

/** Every step of both operations on one store (variant: { ops, step?(ms), drop(name, key) }). */
function stepsOn(label, variant) {
  describe(label, () => {
    const v = () => variant()

    test('a new record is created full, and a process alone takes every cell with its tokens', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 7 }))
      assert.deepEqual({ ...a, recordId: 0, storeNowMs: 0 }, { granted: 10, tokens: 7, held: 10, fair: 10, waiting: 0, recordId: 0, storeNowMs: 0 })
      assert.ok(Number.isSafeInteger(a.recordId) && a.recordId > 0 && a.recordId < 2 ** 48)
      // Store time is the store's clock in ms (on MongoDB $toLong of $$NOW: the test server
      // mishandles Date arithmetic on $$NOW, see lib/shared/mongo-cells.js).
      if (v().step === undefined) assert.ok(Math.abs(a.storeNowMs - Date.now()) < 10_000, `store time ${a.storeNowMs}, here ${Date.now()}`)
      // Asking again with nothing free: nothing more, the same identity.
      const again = await ops.cellsAcquire(acquireOf(name, { instance: 'A', held: 10, recordId: a.recordId }))
      assert.deepEqual([again.granted, again.tokens, again.held, again.recordId], [0, 0, 10, a.recordId])
      assert.ok(again.storeNowMs >= a.storeNowMs)
    })

    test('a second process finds none free, is marked waiting, and takes the cells given back with at most their tokens', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      const b = await ops.cellsAcquire(acquireOf(name, { instance: 'B' }))
      assert.deepEqual([b.granted, b.tokens, b.held, b.fair, b.waiting, b.recordId], [0, 0, 0, 5, 0, a.recordId])
      // A's renewal learns that another process waits, and the fair share.
      let renewed = await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId })
      assert.deepEqual([renewed.held, renewed.waiting, renewed.fair], [10, 1, 5])
      // A gives 5 cells back and says 7 tokens: the 5 cells carry 5 at most.
      renewed = await renewOne(ops, name, 'A', { held: 5, tokens: 7, recordId: a.recordId })
      assert.deepEqual([renewed.held, renewed.waiting, renewed.fair], [5, 1, 5])
      const b2 = await ops.cellsAcquire(acquireOf(name, { instance: 'B', held: 0, recordId: b.recordId }))
      assert.deepEqual([b2.granted, b2.held, b2.fair, b2.waiting], [5, 5, 5, 0])
      near(b2.tokens, 5)
      // B asked while A holds cells, so it stays marked: it wants more, and a holder that has not
      // used the key since its last tick gives it every cell.
      renewed = await renewOne(ops, name, 'A', { held: 5, recordId: a.recordId })
      assert.deepEqual([renewed.held, renewed.waiting, renewed.fair], [5, 1, 5])
    })

    test('with a waiter, a process takes only up to its fair share of the free cells; tokens go with cells pro rata', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', capacity: 9, initial: 9 }))
      await ops.cellsAcquire(acquireOf(name, { instance: 'B', capacity: 9 }))
      await ops.cellsAcquire(acquireOf(name, { instance: 'C', capacity: 9 }))
      // A gives back 6 cells with 4 tokens: free 6, f 4. B and C wait; fair = ceil(9 / 3) = 3.
      const renewed = await renewOne(ops, name, 'A', { held: 3, tokens: 4, recordId: a.recordId })
      assert.deepEqual([renewed.held, renewed.waiting, renewed.fair], [3, 1, 3])
      const b = await ops.cellsAcquire(acquireOf(name, { instance: 'B', capacity: 9, recordId: a.recordId }))
      assert.deepEqual([b.granted, b.held, b.fair, b.waiting], [3, 3, 3, 1])
      near(b.tokens, 2) // 4 * 3 / 6
      const c = await ops.cellsAcquire(acquireOf(name, { instance: 'C', capacity: 9, recordId: a.recordId }))
      // (B, which asked while others held cells, is still marked waiting.)
      assert.deepEqual([c.granted, c.held, c.fair, c.waiting], [3, 3, 3, 1])
      near(c.tokens, 2)
    })

    test('a release (held 0) frees every cell with its tokens, and forgets the process', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      await ops.cellsAcquire(acquireOf(name, { instance: 'B' }))
      const released = await renewOne(ops, name, 'A', { held: 0, tokens: 6.5, recordId: a.recordId })
      assert.deepEqual([released.held, released.waiting], [0, 1])
      const b = await ops.cellsAcquire(acquireOf(name, { instance: 'B', recordId: a.recordId }))
      assert.deepEqual([b.granted, b.held, b.fair, b.waiting], [10, 10, 10, 0])
      near(b.tokens, 6.5)
      // A holds nothing any more: its renewal keeps nothing.
      const late = await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId })
      assert.deepEqual([late.held, late.waiting, late.fair], [0, 0, 10])
    })

    test('a failed give-back (held below what the record says) frees the difference with no tokens', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      const again = await ops.cellsAcquire(acquireOf(name, { instance: 'A', held: 4, recordId: a.recordId }))
      // 6 cells freed with 0 tokens; A alone takes them back: 0 tokens come with them.
      assert.deepEqual([again.granted, again.tokens, again.held], [6, 0, 10])
    })

    test('a record remade (or another identity) is not renewed, and an acquire does not count the old holding', async () => {
      const { ops, drop } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      const wrong = await renewOne(ops, name, 'A', { held: 10, tokens: 3, recordId: a.recordId + 1 })
      assert.deepEqual([wrong.held, wrong.waiting, wrong.fair], [0, 0, 0])
      const still = await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId })
      assert.equal(still.held, 10, 'the mismatched renewal wrote nothing')
      await drop(name, 'k')
      const gone = await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId })
      assert.deepEqual([gone.held, gone.waiting, gone.fair], [0, 0, 0])
      const missing = await ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys: [{ key: 'never', held: 3, tokens: 1, recordId: 0 }] })
      assert.deepEqual(missing.keys, [{ held: 0, waiting: 0, fair: 0 }])
      const remade = await ops.cellsAcquire(acquireOf(name, { instance: 'A', held: 10, recordId: a.recordId, initial: 4 }))
      assert.notEqual(remade.recordId, a.recordId)
      assert.deepEqual([remade.granted, remade.tokens, remade.held], [10, 4, 10])
    })

    test('a capacity change: fewer cells cut the holder and the free tokens; more cells come with no tokens', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      await renewOne(ops, name, 'A', { held: 6, tokens: 4, recordId: a.recordId }) // 4 free, f = 4
      const smaller = await ops.cellsAcquire(acquireOf(name, { instance: 'A', capacity: 8, held: 6, recordId: a.recordId }))
      // C = 8: free cells 2, f = min(4, 2) = 2; alone, A takes them.
      assert.deepEqual([smaller.granted, smaller.held, smaller.fair], [2, 8, 8])
      near(smaller.tokens, 2)
      const tiny = await ops.cellsAcquire(acquireOf(name, { instance: 'A', capacity: 3, held: 8, recordId: a.recordId }))
      assert.deepEqual([tiny.granted, tiny.tokens, tiny.held, tiny.fair], [0, 0, 3, 3])
      const larger = await ops.cellsAcquire(acquireOf(name, { instance: 'A', capacity: 20, held: 3, recordId: a.recordId }))
      assert.deepEqual([larger.granted, larger.tokens, larger.held, larger.fair], [17, 0, 20, 20])
    })

    test('cells of a holder come back only after 1.1 * leaseMs + 1000 ms of store time since its last renewal, with no tokens', async () => {
      const { ops, step } = v()
      const name = freshName()
      const leaseMs = step === undefined ? 1 : L
      const margin = 1.1 * leaseMs + 1000
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10, leaseMs }))
      const b = await ops.cellsAcquire(acquireOf(name, { instance: 'B', leaseMs }))
      assert.equal(b.granted, 0)
      if (step !== undefined) {
        step(margin - 500)
        const early = await ops.cellsAcquire(acquireOf(name, { instance: 'B', leaseMs, recordId: a.recordId }))
        assert.ok(early.storeNowMs - a.storeNowMs < margin, 'the store clock moved less than the margin')
        assert.ok(early.storeNowMs - a.storeNowMs >= margin - 500, `the store clock moved (${early.storeNowMs - a.storeNowMs} ms)`)
        assert.equal(early.granted, 0, 'not before the margin')
        step(600)
      } else {
        await sleep(Math.ceil(margin) + 50)
      }
      const late = await ops.cellsAcquire(acquireOf(name, { instance: 'B', leaseMs, recordId: a.recordId }))
      assert.ok(late.storeNowMs - a.storeNowMs > margin)
      assert.deepEqual([late.granted, late.tokens, late.held, late.fair, late.waiting], [10, 0, 10, 10, 0])
      const lapsed = await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId }, leaseMs)
      assert.deepEqual([lapsed.held, lapsed.waiting], [0, 0])
    })

    test('a renewal keeps a holder: the margin counts from its last renewal', async () => {
      const { ops, step } = v()
      if (step === undefined) return // the margin's clock is stepped only where it can be
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      step(MARGIN - 1000)
      await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId })
      step(MARGIN - 1000)
      const b = await ops.cellsAcquire(acquireOf(name, { instance: 'B', recordId: a.recordId }))
      assert.equal(b.granted, 0)
      assert.equal(b.fair, 5)
      // The waiter is forgotten leaseMs after it asked.
      step(L + 500)
      const kept = await renewOne(ops, name, 'A', { held: 10, recordId: a.recordId })
      assert.deepEqual([kept.held, kept.waiting, kept.fair], [10, 0, 10])
    })

    test('a renewal gives back the cells of another holder past the margin, also when it renews only', async () => {
      const { ops, step } = v()
      if (step === undefined) return // the margin's clock is stepped only where it can be
      const name = freshName()
      const a = await ops.cellsAcquire(acquireOf(name, { instance: 'A', initial: 10 }))
      await renewOne(ops, name, 'A', { held: 5, recordId: a.recordId })
      const b = await ops.cellsAcquire(acquireOf(name, { instance: 'B', recordId: a.recordId }))
      assert.deepEqual([b.granted, b.held, b.fair, b.waiting], [5, 5, 5, 0])
      step(L + 500) // B's waiting mark is forgotten
      const forgot = await renewOne(ops, name, 'A', { held: 5, recordId: a.recordId })
      assert.deepEqual([forgot.held, forgot.waiting, forgot.fair], [5, 0, 5])
      step(1000) // B's cells were given L + 1500 ms ago: still inside the margin
      const kept = await renewOne(ops, name, 'A', { held: 5, recordId: a.recordId })
      assert.deepEqual([kept.held, kept.waiting, kept.fair], [5, 0, 5])
      step(1000) // L + 2500 ms: past the margin
      const alone = await renewOne(ops, name, 'A', { held: 5, recordId: a.recordId })
      assert.deepEqual([alone.held, alone.waiting, alone.fair], [5, 0, 10])
      const back = await ops.cellsAcquire(acquireOf(name, { instance: 'A', held: 5, recordId: a.recordId }))
      assert.deepEqual([back.granted, back.tokens, back.held], [5, 0, 10])
    })

    test('a renewal of many keys answers each in order', async () => {
      const { ops } = v()
      const name = freshName()
      const keys = []
      for (let i = 0; i < 50; i++) {
        const a = await ops.cellsAcquire(acquireOf(name, { key: `key-${i}`, instance: 'A', capacity: 1 + i, initial: 0 }))
        keys.push({ key: `key-${i}`, held: i % 2 === 0 ? 1 + i : 0, tokens: 0, recordId: a.recordId })
      }
      const renewed = await ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys })
      assert.deepEqual(
        renewed.keys,
        keys.map((one, i) => ({ held: one.held, waiting: 0, fair: 1 + i })),
      )
    })
  })
}

describe('the fleet bucket store operations', () => {
  let redis
  let cluster
  let mongo
  const clients = {}
  const variants = {}

  before(async () => {
    ;[redis, cluster, mongo] = await Promise.all([startRedisServer({ fakeTime: true }), startRedisCluster(), startMongoServer()])
    clients.ioredis = new Redis({ host: redis.host, port: redis.port })
    clients.nodeRedis = createClient({ url: redis.url })
    await clients.nodeRedis.connect()
    clients.ioCluster = new Redis.Cluster(cluster.rootNodes)
    clients.nodeCluster = createCluster({ rootNodes: cluster.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) })
    await clients.nodeCluster.connect()
    clients.mongo = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 10_000, monitorCommands: true })
    await clients.mongo.connect()
    clients.db = clients.mongo.db(`cells_${process.pid}`)
    const step = (ms) => redis.stepClock(ms)
    const dropRedis = (client) => (name, key) => client.del(redisKey(name, key))
    variants.ioredis = { ops: storeOperations(redisStore(clients.ioredis)), step, drop: dropRedis(clients.ioredis) }
    variants.nodeRedis = { ops: storeOperations(redisStore(clients.nodeRedis)), step, drop: (name, key) => clients.nodeRedis.del(redisKey(name, key)) }
    variants.ioCluster = { ops: storeOperations(redisStore(clients.ioCluster)), drop: dropRedis(clients.ioCluster) }
    variants.nodeCluster = { ops: storeOperations(redisStore(clients.nodeCluster)), drop: (name, key) => clients.nodeCluster.del(redisKey(name, key)) }
    variants.mongo = {
      ops: storeOperations(mongoStore(clients.db)),
      drop: (name, key) => clients.db.collection('quota_shares').deleteOne({ _id: `b:${part(name)}:${part(key)}` }),
    }
    const t = testStore()
    variants.test = { ops: storeOperations(t.store), step: (ms) => t.stepClock(ms), drop: (name, key) => t.records.delete(JSON.stringify(['cells', name, key])) }
  })

  after(async () => {
    await Promise.allSettled([clients.ioredis?.quit(), clients.nodeRedis?.close(), clients.ioCluster?.quit(), clients.nodeCluster?.close(), clients.mongo?.close()])
    await Promise.allSettled([redis?.stop(), cluster?.stop(), mongo?.stop()])
  })

  stepsOn('the in-process test store (the reference model, its clock stepped)', () => variants.test)
  stepsOn('Redis through ioredis (its clock stepped)', () => variants.ioredis)
  stepsOn('Redis through node-redis (its clock stepped)', () => variants.nodeRedis)
  stepsOn('a three-node Redis Cluster through ioredis Cluster', () => variants.ioCluster)
  stepsOn('a three-node Redis Cluster through node-redis createCluster', () => variants.nodeCluster)
  stepsOn('MongoDB', () => variants.mongo)

  test("the stepped Redis's TIME really moves, forwards and back", async () => {
    const seconds = async () => Number((await clients.ioredis.time())[0])
    const before = await seconds()
    redis.stepClock(3_600_000)
    const later = await seconds()
    assert.ok(later - before >= 3599 && later - before <= 3660, `TIME moved ${later - before} s`)
    redis.stepClock(-3_600_000)
    const back = await seconds()
    assert.ok(back - before >= 0 && back - before <= 60, `TIME back ${back - before} s`)
  })

  test('the cluster has three masters, and one name keeps all its bucket records in one slot (one node)', async () => {
    const shards = await clients.ioCluster.cluster('SHARDS')
    assert.equal(shards.length, 3)
    const name = freshName()
    const slots = new Set()
    for (let i = 0; i < 20; i++) slots.add(await clients.ioCluster.cluster('KEYSLOT', redisKey(name, `k${i}`)))
    assert.equal(slots.size, 1)
    // Records of other names spread over the nodes.
    const spread = new Set()
    for (let i = 0; i < 40; i++) spread.add(Math.floor((await clients.ioCluster.cluster('KEYSLOT', redisKey(`n${i}`, 'k'))) / 5462))
    assert.ok(spread.size > 1)
  })

  test('a record expires once nobody touched it for long enough for the bucket to refill, plus a minute', async () => {
    const name = freshName()
    await variants.ioredis.ops.cellsAcquire(acquireOf(name, { instance: 'A', capacity: 1000, refillPerSecond: 1 }))
    const ttl = await clients.ioredis.pttl(redisKey(name, 'k'))
    assert.ok(ttl > 1_000_000 + 59_000 && ttl <= 1_060_000, `PTTL ${ttl}`)
    await variants.ioredis.ops.cellsAcquire(acquireOf(`${name}-fast`, { instance: 'A', capacity: 10, refillPerSecond: 1000, leaseMs: 600_000 }))
    const leaseTtl = await clients.ioredis.pttl(redisKey(`${name}-fast`, 'k'))
    assert.ok(leaseTtl > 660_000 + 59_000 && leaseTtl <= 721_000, `PTTL ${leaseTtl}`)
    const document = await clients.db.collection('quota_shares').findOne({ _id: `b:${part(name)}:${part('k')}` })
    assert.equal(document, null) // (that was Redis's record)
    await variants.mongo.ops.cellsAcquire(acquireOf(name, { instance: 'A', capacity: 1000, refillPerSecond: 1 }))
    const made = await clients.db.collection('quota_shares').findOne({ _id: `b:${part(name)}:${part('k')}` })
    const left = made.expiresAt.getTime() - Date.now()
    assert.ok(left > 1_000_000 && left <= 1_060_000, `expiresAt in ${left} ms`)
  })

  test('a plain renewal on Redis reads four fields of each record (one HMGET), not the whole record, and moves its expiry only by more than a tenth', async () => {
    const { ops } = variants.ioredis
    const name = freshName()
    const keys = []
    for (const key of ['k1', 'k2', 'k3']) {
      const a = await ops.cellsAcquire(acquireOf(name, { key, instance: 'A' }))
      keys.push({ key, held: a.held, tokens: 0, recordId: a.recordId })
    }
    const commands = ['hgetall', 'hmget', 'hset', 'hdel', 'pexpire']
    const delta = async (work) => {
      const before = await commandCalls(clients.ioredis, commands)
      const answer = await work()
      const after = await commandCalls(clients.ioredis, commands)
      return { answer, calls: Object.fromEntries(commands.map((command) => [command, after[command] - before[command]])) }
    }
    const plain = await delta(() => ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys }))
    assert.deepEqual(plain.answer.keys, keys.map(() => ({ held: 10, waiting: 0, fair: 10 })))
    // The expiry (72 s: the margin 12 s + 60 s) moves only once it would move by more than 7.2 s.
    assert.deepEqual(plain.calls, { hgetall: 0, hmget: 3, hset: 3, hdel: 0, pexpire: 0 })
    redis.stepClock(7_000)
    const early = await delta(() => ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys }))
    assert.deepEqual(early.calls, { hgetall: 0, hmget: 3, hset: 3, hdel: 0, pexpire: 0 })
    const kept = await clients.ioredis.pttl(redisKey(name, 'k1'))
    assert.ok(kept > 72_000 - 7_500 && kept <= 65_000, `PTTL ${kept}`)
    redis.stepClock(1_000)
    const moved = await delta(() => ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys }))
    assert.deepEqual(moved.answer.keys, keys.map(() => ({ held: 10, waiting: 0, fair: 10 })))
    assert.deepEqual(moved.calls, { hgetall: 0, hmget: 3, hset: 3, hdel: 0, pexpire: 3 })
    const renewedTtl = await clients.ioredis.pttl(redisKey(name, 'k1'))
    assert.ok(renewedTtl > 71_000 && renewedTtl <= 72_000, `PTTL ${renewedTtl}`)
    // A give-back, or another lease, is the full renewal.
    const given = await delta(() => ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys: [{ ...keys[0], held: 4 }, keys[1]] }))
    assert.deepEqual(given.answer.keys, [{ held: 4, waiting: 0, fair: 10 }, { held: 10, waiting: 0, fair: 10 }])
    assert.deepEqual(given.calls, { hgetall: 1, hmget: 2, hset: 2, hdel: 0, pexpire: 1 })
    const longer = await delta(() => ops.cellsRenew({ name, instance: 'A', leaseMs: 2 * L, keys: [keys[2]] }))
    assert.deepEqual(longer.answer.keys, [{ held: 10, waiting: 0, fair: 10 }])
    assert.equal(longer.calls.hgetall, 1)
    const ttl = await clients.ioredis.pttl(redisKey(name, 'k3'))
    assert.ok(ttl > 1.1 * 2 * L + 1000 + 59_000, `PTTL ${ttl}`)
  })

  test(`a Redis renewal of 100,000 keys is one script per ${RENEW_CHUNK.toLocaleString('en')} keys`, async (t) => {
    const { ops } = variants.ioredis
    const name = freshName()
    const count = 100_000
    const keys = []
    const startedAt = process.hrtime.bigint()
    for (let at = 0; at < count; at += 5_000) {
      const batch = []
      for (let i = at; i < at + 5_000; i++) batch.push(ops.cellsAcquire(acquireOf(name, { key: `k${i}`, instance: 'A', capacity: 4, initial: 4 })))
      for (const [i, a] of (await Promise.all(batch)).entries()) keys.push({ key: `k${at + i}`, held: 4, tokens: 0, recordId: a.recordId })
    }
    const createdMs = Number(process.hrtime.bigint() - startedAt) / 1e6
    await ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys: keys.slice(0, 2) }) // the script loaded
    const calls = () => commandCalls(clients.ioredis, ['evalsha', 'eval'])
    const before = await calls()
    const renewStart = process.hrtime.bigint()
    const renewed = await ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys })
    const renewMs = Number(process.hrtime.bigint() - renewStart) / 1e6
    const afterCalls = await calls()
    assert.equal(renewed.keys.length, count)
    assert.ok(renewed.keys.every((one) => one.held === 4 && one.waiting === 0 && one.fair === 4))
    assert.deepEqual({ evalsha: afterCalls.evalsha - before.evalsha, eval: afterCalls.eval - before.eval }, { evalsha: Math.ceil(count / RENEW_CHUNK), eval: 0 })
    t.diagnostic(`100,000 acquires (5,000 at a time): ${createdMs.toFixed(0)} ms; one renewal of 100,000 keys: ${renewMs.toFixed(0)} ms in ${Math.ceil(count / RENEW_CHUNK)} scripts`)
  })

  test('a MongoDB renewal of many keys is two round trips: one update command and one aggregate', async (t) => {
    const { ops } = variants.mongo
    const name = freshName()
    const keys = []
    for (let at = 0; at < 400; at += 100) {
      const batch = []
      for (let i = at; i < at + 100; i++) batch.push(ops.cellsAcquire(acquireOf(name, { key: `k${i}`, instance: 'A', capacity: 4, initial: 4 })))
      for (const [i, a] of (await Promise.all(batch)).entries()) keys.push({ key: `k${at + i}`, held: i % 2 === 0 ? 4 : 1, tokens: 1, recordId: a.recordId })
    }
    const commands = []
    const listen = (event) => commands.push(event.commandName)
    clients.mongo.on('commandStarted', listen)
    const startedAt = process.hrtime.bigint()
    const renewed = await ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys }).finally(() => clients.mongo.off('commandStarted', listen))
    const ms = Number(process.hrtime.bigint() - startedAt) / 1e6
    assert.deepEqual(commands, ['update', 'aggregate'])
    assert.deepEqual(
      renewed.keys.map((one) => one.held),
      keys.map((one) => one.held),
    )
    t.diagnostic(`MongoDB test server: one renewal of 400 keys ${ms.toFixed(0)} ms`)
  })

  describe('an answer that makes no sense is ERR_STORE_RESPONSE', () => {
    /** An ioredis client whose script replies pass through `corrupt`. */
    function corrupted(client, corrupt) {
      return new Proxy(client, {
        get(target, property) {
          if (property === 'call') return async (...args) => corrupt(await target.call(...args))
          const value = Reflect.get(target, property)
          return typeof value === 'function' ? value.bind(target) : value
        },
      })
    }
    const isStoreResponse = (error) => error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE'

    const acquireCases = [
      ['tokens above granted', (reply) => [reply[0], String(reply[0] + 1), ...reply.slice(2)]],
      ['held above capacity', (reply) => [reply[0], reply[1], 11, ...reply.slice(3)]],
      ['a negative grant', (reply) => [-1, ...reply.slice(1)]],
      ['tokens not a number', (reply) => [reply[0], 'lots', ...reply.slice(2)]],
      ['a missing field', (reply) => reply.slice(0, 6)],
      ['fair above capacity', (reply) => [reply[0], reply[1], reply[2], 11, ...reply.slice(4)]],
      ['an infinite store time', (reply) => [...reply.slice(0, 6), 'inf']],
      ['no identity', (reply) => [...reply.slice(0, 5), '0', reply[6]]],
    ]
    for (const [what, corrupt] of acquireCases) {
      test(`cellsAcquire on Redis: ${what}`, async () => {
        const ops = storeOperations(redisStore(corrupted(clients.ioredis, corrupt)))
        await assert.rejects(ops.cellsAcquire(acquireOf(freshName(), { instance: 'A' })), isStoreResponse)
      })
    }

    const renewCases = [
      ['one answer too few', (reply) => reply.slice(0, -3)],
      ['held above what was kept', (reply) => [reply[0], 99, ...reply.slice(2)]],
      ['waiting not 0 or 1', (reply) => [reply[0], reply[1], 2, ...reply.slice(3)]],
      ['no store time', (reply) => ['', ...reply.slice(1)]],
      ['not a list', () => 'OK'],
    ]
    for (const [what, corrupt] of renewCases) {
      test(`cellsRenew on Redis: ${what}`, async () => {
        const name = freshName()
        const a = await variants.ioredis.ops.cellsAcquire(acquireOf(name, { instance: 'A' }))
        const ops = storeOperations(redisStore(corrupted(clients.ioredis, corrupt)))
        await assert.rejects(ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys: [{ key: 'k', held: 5, tokens: 0, recordId: a.recordId }] }), isStoreResponse)
      })
    }

    test('cellsAcquire and cellsRenew on MongoDB: a document that says nonsense', async () => {
      const db = clients.db
      const collection = db.collection('quota_shares')
      const lying = {
        findOneAndUpdate: async (...args) => {
          const reply = await collection.findOneAndUpdate(...args)
          if (reply.value === null) return reply
          return { ...reply, value: { ...reply.value, ans: { ...reply.value.ans, tk: reply.value.ans.g + 1 } } }
        },
        updateOne: (...args) => collection.updateOne(...args),
        bulkWrite: (...args) => collection.bulkWrite(...args),
        aggregate: () => ({ toArray: async () => [{ docs: [], now: -5 }] }),
      }
      const ops = storeOperations(mongoStore({ databaseName: db.databaseName, collection: () => lying }))
      const name = freshName()
      await assert.rejects(ops.cellsAcquire(acquireOf(name, { instance: 'A' })), isStoreResponse)
      await assert.rejects(ops.cellsRenew({ name, instance: 'A', leaseMs: L, keys: [{ key: 'k', held: 1, tokens: 0, recordId: 0 }] }), isStoreResponse)
    })

    test("the test store's fail, hang and late switches apply to the cells operations", async () => {
      const t = testStore()
      const ops = storeOperations(t.store)
      const renewal = { name: 'x', instance: 'A', leaseMs: L, keys: [{ key: 'k', held: 1, tokens: 0, recordId: 0 }] }
      t.control.mode = 'fail'
      await assert.rejects(ops.cellsAcquire(acquireOf('x', { instance: 'A' })), (error) => error === t.control.failWith)
      await assert.rejects(ops.cellsRenew(renewal), (error) => error === t.control.failWith)
      t.control.mode = 'hang'
      let settled = false
      const hung = ops.cellsAcquire(acquireOf('x', { instance: 'A' })).finally(() => (settled = true))
      await sleep(20)
      assert.equal(settled, false)
      t.nowMs = 5_000.5
      t.release()
      assert.equal((await hung).storeNowMs, 5_000.5, 'answered at release, by the store clock then')
      t.control.mode = 'ok'
      t.control.delayMs = 30
      const startedAt = Date.now()
      assert.deepEqual((await ops.cellsRenew(renewal)).keys, [{ held: 1, waiting: 0, fair: 10 }])
      assert.ok(Date.now() - startedAt >= 25)
      assert.deepEqual([t.calls.cellsAcquire.length, t.calls.cellsRenew.length], [2, 2])
      assert.equal(t.cells('x', 'k').holders.get('A').h, 1)
    })

    test('the test store checks its answers too (control.answer)', async () => {
      const t = testStore()
      t.control.answer = { granted: 1, tokens: 2, held: 1, fair: 1, waiting: 0, recordId: 1, storeNowMs: 0 }
      await assert.rejects(storeOperations(t.store).cellsAcquire(acquireOf('x', { instance: 'A' })), isStoreResponse)
    })
  })
})
