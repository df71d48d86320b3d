'use strict'

// The quota stores of quota-clock-source/shared against real servers: redis-server (through
// ioredis, iovalkey and node-redis, and a one-node Redis Cluster through ioredis's and node-redis's
// cluster classes) and
// the MongoDB wire-compatible test server through the official driver. Every store must keep the
// one reservation rule a shared limiter relies on (lib/share/protocol.js): reserve atomically, never
// past the limit, an eighth of what is left at most, what the caller lacks at least; count failOpen
// charges; give back never below zero; let records expire with their period.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const Valkey = require('iovalkey')
const { createClient, createCluster } = require('redis')
const { MongoClient } = require('mongodb')
const { redisStore, mongoStore } = require('quota-clock-source/shared')
const { KeyedQuotaClock, QuotaClockError } = require('quota-clock-source')
const { storeStatsOf } = require('../lib/share/driver.js')
const { isQuotaStore, storeOperations } = require('../lib/share/protocol.js')
const { startRedisServer } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')

const HOUR_MS = 3_600_000

let unique = 0
/** A quota name no other test uses. */
function freshName(label = 'q') {
  return `${label}-${process.pid}-${++unique}`
}

function request(fields) {
  return { key: 'tenant', periodId: '2024-03', leaseUnits: 10, lacking: 0, charge: 0, expiresAtMs: Date.now() + HOUR_MS, ...fields }
}

/** The reservation rule, one call at a time: what a store must answer, and the count after. */
function rule(count, { limit, leaseUnits, lacking, charge }) {
  const charged = count + charge
  const room = Math.max(0, limit - charged)
  const want = Math.max(lacking, Math.min(leaseUnits, Math.ceil(room / 8)))
  const granted = room >= want ? want : 0
  return { count: charged + granted, answer: { granted, unreserved: room - granted } }
}

/** The documented Redis key of a record: <prefix>{<slot(name)>:<slot(key)>}:<periodId>, slot(t) = <bytes>:<t with % { } escaped>. */
function redisKey(prefix, name, key, periodId) {
  const slot = (text) => {
    const escaped = text.replace(/[%{}]/g, (c) => ({ '%': '%25', '{': '%7B', '}': '%7D' })[c])
    return `${Buffer.byteLength(escaped)}:${escaped}`
  }
  return `${prefix}{${slot(name)}:${slot(key)}}:${periodId}`
}

const byAnswer = (a, b) => a.granted - b.granted || a.unreserved - b.unreserved

describe('quota stores on real servers', () => {
  let redis
  let redisCluster
  let mongo
  let ioredis
  let iovalkey
  let nodeRedis
  let ioCluster
  let nodeCluster
  let mongoClient
  let db
  const variants = []

  before(async () => {
    ;[redis, redisCluster, mongo] = await Promise.all([startRedisServer(), startRedisServer({ cluster: true }), startMongoServer()])
    ioredis = new Redis({ host: redis.host, port: redis.port, lazyConnect: true })
    await ioredis.connect()
    iovalkey = new Valkey({ host: redis.host, port: redis.port, lazyConnect: true })
    await iovalkey.connect()
    nodeRedis = createClient({ url: redis.url })
    await nodeRedis.connect()
    ioCluster = new Redis.Cluster([{ host: redisCluster.host, port: redisCluster.port }])
    nodeCluster = createCluster({ rootNodes: [{ url: redisCluster.url }] })
    await nodeCluster.connect()
    mongoClient = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 10_000 })
    await mongoClient.connect()
    db = mongoClient.db(`shared_stores_${process.pid}`)
  })

  after(async () => {
    await Promise.allSettled([ioredis?.quit(), iovalkey?.quit(), nodeRedis?.close(), ioCluster?.quit(), nodeCluster?.close(), mongoClient?.close()])
    await Promise.allSettled([redis?.stop(), redisCluster?.stop(), mongo?.stop()])
  })

  // Each variant: how to make the store, and how to read a record behind its back.
  const redisRecord = (admin, prefix) => ({
    async count(name, key, periodId) {
      const value = await admin().hget(redisKey(prefix, name, key, periodId), 'c')
      return value === null ? undefined : Number(value)
    },
    async expiresAtMs(name, key, periodId) {
      return Number(await admin().call('PEXPIRETIME', redisKey(prefix, name, key, periodId)))
    },
  })
  variants.push(
    { label: 'Redis through ioredis', make: (options) => redisStore(ioredis, options), ...redisRecord(() => ioredis, 'qcs:') },
    { label: 'Redis through node-redis', make: (options) => redisStore(nodeRedis, options), ...redisRecord(() => ioredis, 'qcs:') },
    { label: 'Redis through iovalkey', make: (options) => redisStore(iovalkey, options), ...redisRecord(() => ioredis, 'qcs:') },
    { label: 'a Redis Cluster through ioredis', make: (options) => redisStore(ioCluster, options), ...redisRecord(() => ioCluster, 'qcs:') },
    { label: 'a Redis Cluster through node-redis', make: (options) => redisStore(nodeCluster, options), ...redisRecord(() => ioCluster, 'qcs:') },
    {
      label: 'MongoDB',
      make: (options) => mongoStore(db, options),
      async count(name, key, periodId) {
        const doc = await db.collection('quota_shares').findOne({ name, key, periodId })
        return doc === null ? undefined : doc.count
      },
      async expiresAtMs(name, key, periodId) {
        const doc = await db.collection('quota_shares').findOne({ name, key, periodId })
        return doc.expiresAt.getTime()
      },
    },
  )

  for (const variant of variants) {
    describe(variant.label, () => {
      const v = () => variant
      let ops
      before(() => {
        const store = v().make()
        assert.ok(isQuotaStore(store))
        const raw = storeOperations(store)
        // The reservation rule's answers; the record's identity is tested in share-admin.test.js.
        ops = {
          ...raw,
          async reserve(req) {
            const { recordId, ...answer } = await raw.reserve(req)
            assert.ok(Number.isSafeInteger(recordId) && recordId >= 0, `recordId ${recordId}`)
            return answer
          },
        }
      })

      // (Redis only: the MongoDB driver's reservation takes several steps of its own once the loop is free.)
      const onRedis = variant.label.includes('Redis')
      if (onRedis) test('an answer that came while the process was busy is read before its timeout: synchronous work longer than timeoutMs between awaited covered calls never makes a healthy store unavailable', async () => {
        const limiter = new KeyedQuotaClock({
          capacity: 1e9,
          refillPerSecond: 1e9,
          suspendPolicy: 'ignore',
          quota: { limit: 1_000_000, period: { unit: 'day', timeZone: 'UTC' } },
          share: { store: v().make(), name: freshName('busy'), leaseUnits: 4, timeoutMs: 150 },
        })
        assert.equal((await limiter.consume('k')).allowed, true)
        // Covered calls settle on microtasks alone: the background refill's answer waits in the
        // socket until a call is not covered, long after the refill's timeoutMs.
        for (let i = 0; i < 8; i++) {
          const until = performance.now() + 200 // a handler's synchronous work
          while (performance.now() < until);
          assert.equal((await limiter.consume('k')).allowed, true, `call ${i}`)
        }
        assert.equal(storeStatsOf(limiter).timeouts, 0)
        assert.ok(storeStatsOf(limiter).calls >= 3, 'refilled in the background')
        await limiter.close()
      })

      test('fifty concurrent reservations grant the whole limit, never more, as one-at-a-time would', async () => {
        const name = freshName()
        const req = request({ name, limit: 100, leaseUnits: 10 })
        const answers = await Promise.all(Array.from({ length: 50 }, () => ops.reserve(req)))
        let count = 0
        const expected = []
        for (let i = 0; i < 50; i++) {
          const next = rule(count, req)
          count = next.count
          expected.push(next.answer)
        }
        assert.deepEqual(answers.sort(byAnswer), expected.sort(byAnswer))
        assert.equal(answers.reduce((sum, answer) => sum + answer.granted, 0), 100)
        assert.equal(await v().count(name, req.key, req.periodId), 100)
        assert.deepEqual(await ops.reserve(req), { granted: 0, unreserved: 0 })
      })

      test('fifty concurrent calls lacking units each get all they lack or nothing, never past the limit', async () => {
        const name = freshName()
        const req = request({ name, limit: 97, leaseUnits: 2, lacking: 4 })
        const answers = await Promise.all(Array.from({ length: 50 }, () => ops.reserve(req)))
        for (const { granted } of answers) assert.ok(granted === 0 || granted === 4, `granted ${granted}`)
        const total = answers.reduce((sum, answer) => sum + answer.granted, 0)
        assert.equal(total, 96)
        assert.equal(await v().count(name, req.key, req.periodId), 96)
      })

      test('a reservation takes at most an eighth of what is left unreserved (rounded up) and at most leaseUnits', async () => {
        const name = freshName()
        const seen = []
        for (let i = 0; i < 6; i++) seen.push(await ops.reserve(request({ name, limit: 80, leaseUnits: 1000 })))
        assert.deepEqual(seen, [
          { granted: 10, unreserved: 70 },
          { granted: 9, unreserved: 61 },
          { granted: 8, unreserved: 53 },
          { granted: 7, unreserved: 46 },
          { granted: 6, unreserved: 40 },
          { granted: 5, unreserved: 35 },
        ])
        assert.deepEqual(await ops.reserve(request({ name, limit: 80, leaseUnits: 3 })), { granted: 3, unreserved: 32 })
        // Near the end, an eighth rounds up to 1 while anything is left.
        const last = freshName()
        assert.deepEqual(await ops.reserve(request({ name: last, limit: 1, leaseUnits: 50 })), { granted: 1, unreserved: 0 })
        assert.deepEqual(await ops.reserve(request({ name: last, limit: 1, leaseUnits: 50 })), { granted: 0, unreserved: 0 })
      })

      test('a call lacking more than an eighth gets what it lacks; lacking more than is left gets nothing and counts nothing', async () => {
        const name = freshName()
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 5, lacking: 40 })), { granted: 40, unreserved: 60 })
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 5, lacking: 61 })), { granted: 0, unreserved: 60 })
        assert.equal(await v().count(name, 'tenant', '2024-03'), 40)
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 5, lacking: 60 })), { granted: 60, unreserved: 0 })
        // A call lacking nothing with nothing left: nothing, and no error.
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 5 })), { granted: 0, unreserved: 0 })
      })

      test('each reservation is judged against the limit it carries (two plans for one name)', async () => {
        const name = freshName()
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 10, lacking: 50 })), { granted: 50, unreserved: 50 })
        // A process still on a smaller plan sees the count past its limit: nothing for it.
        assert.deepEqual(await ops.reserve(request({ name, limit: 40, leaseUnits: 10, lacking: 1 })), { granted: 0, unreserved: 0 })
        assert.deepEqual(await ops.reserve(request({ name, limit: 200, leaseUnits: 10 })), { granted: 10, unreserved: 140 })
      })

      test('a failOpen charge is counted with the reservation, even when nothing is granted, and may pass the limit', async () => {
        const name = freshName()
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 10, charge: 20 })), { granted: 10, unreserved: 70 })
        assert.equal(await v().count(name, 'tenant', '2024-03'), 30)
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 10, charge: 90, lacking: 1 })), { granted: 0, unreserved: 0 })
        assert.equal(await v().count(name, 'tenant', '2024-03'), 120)
        await ops.giveBack({ name, key: 'tenant', periodId: '2024-03', units: 15 })
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 10 })), { granted: 0, unreserved: 0 })
        assert.equal(await v().count(name, 'tenant', '2024-03'), 105)
      })

      test('giving back lowers the count, never below zero; a record that does not exist is not created', async () => {
        const name = freshName()
        await ops.reserve(request({ name, limit: 100, leaseUnits: 10 }))
        assert.equal(await ops.giveBack({ name, key: 'tenant', periodId: '2024-03', units: 4 }), undefined)
        assert.equal(await v().count(name, 'tenant', '2024-03'), 6)
        await ops.giveBack({ name, key: 'tenant', periodId: '2024-03', units: 25 })
        assert.equal(await v().count(name, 'tenant', '2024-03'), 0)
        assert.deepEqual(await ops.reserve(request({ name, limit: 100, leaseUnits: 10 })), { granted: 10, unreserved: 90 })
        const none = freshName()
        await ops.giveBack({ name: none, key: 'tenant', periodId: '2024-03', units: 3 })
        assert.equal(await v().count(none, 'tenant', '2024-03'), undefined)
      })

      test('concurrent give-backs and reservations keep the count exact', async () => {
        const name = freshName()
        const req = request({ name, limit: 1000, leaseUnits: 5 })
        await Promise.all(Array.from({ length: 20 }, () => ops.reserve(req)))
        assert.equal(await v().count(name, 'tenant', '2024-03'), 100)
        await Promise.all(Array.from({ length: 20 }, () => ops.giveBack({ name, key: 'tenant', periodId: '2024-03', units: 2 })))
        assert.equal(await v().count(name, 'tenant', '2024-03'), 60)
      })

      test('the record expires at expiresAtMs: a later expiry pushes it out, an earlier one does not pull it in', async () => {
        const name = freshName()
        const endMs = Date.now() + 5 * HOUR_MS
        await ops.reserve(request({ name, limit: 100, expiresAtMs: endMs }))
        assert.equal(await v().expiresAtMs(name, 'tenant', '2024-03'), endMs)
        await ops.reserve(request({ name, limit: 100, expiresAtMs: endMs + HOUR_MS }))
        assert.equal(await v().expiresAtMs(name, 'tenant', '2024-03'), endMs + HOUR_MS)
        await ops.reserve(request({ name, limit: 100, expiresAtMs: endMs - HOUR_MS }))
        assert.equal(await v().expiresAtMs(name, 'tenant', '2024-03'), endMs + HOUR_MS)
      })

      test('a period end the server has already passed (a caller whose clock runs behind) keeps the record a while, and the count with it', async () => {
        const name = freshName()
        const pastMs = Date.now() - 5_000
        assert.deepEqual(await ops.reserve(request({ name, limit: 80, leaseUnits: 10, expiresAtMs: pastMs })), { granted: 10, unreserved: 70 })
        assert.deepEqual(await ops.reserve(request({ name, limit: 80, leaseUnits: 10, expiresAtMs: pastMs })), { granted: 9, unreserved: 61 })
        assert.equal(await variant.count(name, 'tenant', '2024-03'), 19)
        const expiresAtMs = await variant.expiresAtMs(name, 'tenant', '2024-03')
        assert.ok(expiresAtMs > Date.now() + 60_000 && expiresAtMs <= Date.now() + 600_000, `expires in ${expiresAtMs - Date.now()} ms`)
      })

      test('names and keys containing ":" and any Unicode never share a record', async () => {
        const base = freshName()
        const records = [
          [`${base}:a`, 'b'],
          [base, 'a:b'],
          [`${base}:a:b`, 'x'],
          [base, 'a:b:x'],
          [`${base}`, '3:x'],
          [`${base}`, 'ключ 🔑'],
          [`${base}🔑`, 'ключ'],
          [base, '\ud800'], // lone surrogates: UTF-8 cannot carry them, yet they stay apart
          [base, '\udc00'],
          [base, '\ufffd'],
          [base, '\ud800\udc00'],
          [base, '\udc00\ud800'], // two lone surrogates, not a pair
        ]
        for (const [name, key] of records) {
          assert.deepEqual(await ops.reserve(request({ name, key, limit: 16, leaseUnits: 16 })), { granted: 2, unreserved: 14 }, `${name} / ${JSON.stringify(key)}`)
        }
        assert.deepEqual(await ops.reserve(request({ name: base, key: 'a:b', periodId: '2024-04', limit: 16, leaseUnits: 16 })), { granted: 2, unreserved: 14 })
        assert.deepEqual(await ops.reserve(request({ name: base, key: 'a:b', limit: 16, leaseUnits: 16 })), { granted: 2, unreserved: 12 })
      })
    })
  }

  describe('Redis specifics', () => {
    test('a record lives at <prefix>{<name bytes>:<name>:<key bytes>:<key>}:<periodId>, as a hash that expires by itself', async () => {
      const name = `${freshName()}:plán`
      const ops = storeOperations(redisStore(ioredis))
      await ops.reserve(request({ name, key: 'tenant:42', periodId: '2024-03-15', limit: 100, expiresAtMs: Date.now() + 400 }))
      const key = redisKey('qcs:', name, 'tenant:42', '2024-03-15')
      assert.match(key, /^qcs:\{\d+:q-\d+-\d+:plán:9:tenant:42\}:2024-03-15$/)
      const { i: identity, ...fields } = await ioredis.hgetall(key)
      assert.match(identity, /^[1-9]\d*$/, 'the identity made when the record was created')
      assert.deepEqual(fields, { c: '10', l: '100', e: String(await ioredis.pexpiretime(key)) })
      const ttl = await ioredis.pttl(key)
      assert.ok(ttl > 0 && ttl <= 400, `PTTL ${ttl}`)
      await new Promise((resolve) => setTimeout(resolve, 500))
      assert.equal(await ioredis.exists(key), 0)
    })

    test('the prefix option names every record', async () => {
      const name = freshName()
      const ops = storeOperations(redisStore(nodeRedis, { prefix: 'billing{eu}:' }))
      await ops.reserve(request({ name, limit: 100 }))
      assert.equal(await ioredis.hget(redisKey('billing{eu}:', name, 'tenant', '2024-03'), 'c'), '10')
      assert.equal(await ioredis.exists(redisKey('qcs:', name, 'tenant', '2024-03')), 0)
      const bare = storeOperations(redisStore(ioredis, { prefix: '' }))
      await bare.reserve(request({ name, limit: 100 }))
      assert.equal(await ioredis.hget(redisKey('', name, 'tenant', '2024-03'), 'c'), '10')
    })

    test('one reservation is one EVALSHA; a server without the script gets one EVAL, then EVALSHA again', async () => {
      for (const client of [ioredis, nodeRedis]) {
        const ops = storeOperations(redisStore(client))
        const name = freshName()
        await ops.reserve(request({ name, limit: 100 })) // both scripts are loaded now
        await ops.giveBack({ name, key: 'tenant', periodId: '2024-03', units: 0 })
        await ioredis.call('CONFIG', 'RESETSTAT')
        await ops.reserve(request({ name, limit: 100 }))
        await ops.giveBack({ name, key: 'tenant', periodId: '2024-03', units: 1 })
        assert.deepEqual(await scriptCalls(), { evalsha: 2, eval: 0 })
        await ioredis.call('SCRIPT', 'FLUSH')
        await ioredis.call('CONFIG', 'RESETSTAT')
        const { recordId, ...answer } = await ops.reserve(request({ name, limit: 100 }))
        assert.deepEqual(answer, { granted: 10, unreserved: 71 })
        assert.ok(recordId > 0)
        assert.deepEqual(await scriptCalls(), { evalsha: 1, eval: 1 })
        await ops.reserve(request({ name, limit: 100 }))
        assert.deepEqual(await scriptCalls(), { evalsha: 2, eval: 1 })
      }
      async function scriptCalls() {
        const info = await ioredis.info('commandstats')
        const calls = (command) => Number((new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info) ?? [0, 0])[1])
        return { evalsha: calls('evalsha'), eval: calls('eval') }
      }
    })

    test('a Redis error rejects the operation with that error, not a made-up answer', async () => {
      const name = freshName()
      await ioredis.hset(redisKey('qcs:', name, 'tenant', '2024-03'), 'c', 'not a number')
      for (const client of [ioredis, nodeRedis]) {
        const ops = storeOperations(redisStore(client))
        await assert.rejects(ops.reserve(request({ name, limit: 100 })), (error) => {
          assert.match(error.message, /not an integer|hash value/i)
          return true
        })
      }
    })
  })

  describe('MongoDB specifics', () => {
    test('a record is one document with the count and an expiresAt date; the collection option names it', async () => {
      const name = freshName()
      const ops = storeOperations(mongoStore(db, { collection: 'shares_elsewhere' }))
      const endMs = Date.UTC(2099, 3, 1)
      const { recordId, ...answer } = await ops.reserve(request({ name, key: 'tenant:42', limit: 100, expiresAtMs: endMs }))
      assert.deepEqual(answer, { granted: 10, unreserved: 90 })
      assert.ok(recordId > 0)
      const doc = await db.collection('shares_elsewhere').findOne({ name })
      assert.equal(doc._id, `${Buffer.byteLength(name)}:${name}:9:tenant:42:2024-03`)
      assert.equal(doc.key, 'tenant:42')
      assert.equal(doc.periodId, '2024-03')
      assert.equal(doc.count, 10)
      assert.ok(doc.expiresAt instanceof Date)
      assert.equal(doc.expiresAt.getTime(), endMs)
      assert.equal(await db.collection('quota_shares').countDocuments({ name }), 0)
    })

    test('the TTL index line of the docs is accepted', async () => {
      const collection = db.collection(freshName('ttl'))
      assert.equal(await collection.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 }), 'expiresAt_1')
    })

    test('a server error rejects the operation with that error', async () => {
      const name = freshName()
      const ops = storeOperations(mongoStore(db))
      await ops.reserve(request({ name, limit: 100 }))
      await db.collection('quota_shares').updateOne({ name }, { $set: { count: 'not a number' } })
      await assert.rejects(ops.reserve(request({ name, limit: 100 })), (error) => {
        assert.ok(error instanceof Error)
        assert.notEqual(error.code, 'ERR_STORE_RESPONSE')
        return true
      })
    })
  })
})

describe('store answers that make no sense', () => {
  // Clients of the supported shapes that answer what no server would. (The scripts answer granted
  // and unreserved as decimal strings of digits: anything else in their place is nonsense.)
  const ioredisAnswering = (reply) => ({ isCluster: false, call: async () => reply })
  const nodeRedisAnswering = (reply) => ({ isOpen: true, sendCommand: async () => reply })
  const dbAnswering = (reply) => ({ databaseName: 'fake', collection: () => ({ findOneAndUpdate: async () => reply, updateOne: async () => ({}) }) })
  const expectResponseError = (promise) =>
    assert.rejects(promise, (error) => {
      assert.ok(error instanceof QuotaClockError, `${error}`)
      assert.equal(error.code, 'ERR_STORE_RESPONSE')
      assert.match(error.message, /"plans"/)
      return true
    })
  const req = request({ name: 'plans', limit: 100, lacking: 2 })

  for (const reply of [null, 'OK', 7, [], [5], [5, 1], [5, 1, '2', 3, 4], [5, 1, '2', 'x'], [5, 1, '2', -3], [5, 1, 'x'], ['5.0', '1', '2'], ['-5', '1', '2'], ['5', '0x1', '2'], [-1, 10], [5, -1], [2.5, 1], [5, Number.NaN], [1, 10], [2 ** 53, 0]]) {
    test(`Redis answering ${JSON.stringify(reply)} is ERR_STORE_RESPONSE`, async () => {
      await expectResponseError(storeOperations(redisStore(ioredisAnswering(reply))).reserve(req))
      await expectResponseError(storeOperations(redisStore(nodeRedisAnswering(reply))).reserve(req))
    })
  }

  test('Redis granting more than the call asked for (leaseUnits, or what it lacks) is ERR_STORE_RESPONSE', async () => {
    await expectResponseError(storeOperations(redisStore(ioredisAnswering([11, 0]))).reserve(req))
    await expectResponseError(storeOperations(redisStore(ioredisAnswering([31, 0]))).reserve({ ...req, lacking: 30 }))
    assert.deepEqual(await storeOperations(redisStore(ioredisAnswering([30, 0, '7']))).reserve({ ...req, lacking: 30 }), { granted: 30, unreserved: 0, recordId: 7 })
  })

  for (const [what, reply] of [
    ['no result', null],
    ['a result without the document', { ok: 1 }],
    ['a document without a number count', { value: { _id: 'x', count: 'ten', granted: 10 } }],
    ['a document without granted', { value: { _id: 'x', count: 10 } }],
    ['a negative grant', { value: { _id: 'x', count: 10, granted: -1 } }],
    ['a fractional grant', { value: { _id: 'x', count: 10, granted: 1.5 } }],
  ]) {
    test(`MongoDB answering ${what} is ERR_STORE_RESPONSE`, async () => {
      await expectResponseError(storeOperations(mongoStore(dbAnswering(reply))).reserve(req))
    })
  }

  test('MongoDB never finding the record it creates is ERR_STORE_RESPONSE, after a bounded number of tries', async () => {
    let tries = 0
    const db = {
      databaseName: 'fake',
      collection: () => ({
        findOneAndUpdate: async () => {
          tries++
          return { value: null }
        },
        updateOne: async () => ({}),
      }),
    }
    await expectResponseError(storeOperations(mongoStore(db)).reserve(req))
    assert.ok(tries >= 2 && tries <= 5, `${tries} tries`)
  })

  test('a client that throws or rejects makes the operation reject with its error; nothing throws synchronously', async () => {
    const boom = new Error('connection reset')
    const throwing = { isCluster: false, call: () => { throw boom } }
    const rejecting = { isOpen: true, sendCommand: () => Promise.reject(boom) }
    const throwingDb = { databaseName: 'fake', collection: () => ({ findOneAndUpdate: () => { throw boom }, updateOne: () => Promise.reject(boom) }) }
    for (const store of [redisStore(throwing), redisStore(rejecting), mongoStore(throwingDb)]) {
      const ops = storeOperations(store)
      let reserving
      assert.doesNotThrow(() => {
        reserving = ops.reserve(req)
      })
      await assert.rejects(reserving, (error) => error === boom)
      let givingBack
      assert.doesNotThrow(() => {
        givingBack = ops.giveBack({ name: 'plans', key: 'tenant', periodId: '2024-03', units: 1 })
      })
      await assert.rejects(givingBack, (error) => error === boom)
    }
  })
})

describe('making a store', () => {
  const ioredisShaped = { isCluster: false, call: async () => [1, 0, '7'] }
  const dbShaped = { databaseName: 'app', collection: () => ({}) }
  const expectOptionError = (fn, ErrorClass, pattern) =>
    assert.throws(fn, (error) => {
      assert.ok(error instanceof ErrorClass, `${error}`)
      assert.equal(error.code, 'ERR_INVALID_OPTION')
      assert.match(error.message, pattern)
      return true
    })

  test('redisStore refuses anything but an ioredis or node-redis client', () => {
    const notClients = [undefined, null, 'redis://127.0.0.1:6379', 6379, {}, { call: async () => {} }, { sendCommand: async () => {} }, dbShaped, () => {}, new Map()]
    for (const client of notClients) expectOptionError(() => redisStore(client), TypeError, /redisStore: client must be an ioredis Redis or Cluster .* or a node-redis client/)
  })

  test('redisStore checks its options', () => {
    expectOptionError(() => redisStore(ioredisShaped, 'qcs:'), TypeError, /redisStore: options must be an object/)
    expectOptionError(() => redisStore(ioredisShaped, { prefix: 5 }), TypeError, /redisStore: prefix must be .*; received 5/)
    expectOptionError(() => redisStore(ioredisShaped, { prefix: 'x'.repeat(257) }), RangeError, /prefix must be a well-formed string of at most 256 characters/)
    expectOptionError(() => redisStore(ioredisShaped, { prefix: 'a\ud800' }), RangeError, /prefix/)
    expectOptionError(() => redisStore(ioredisShaped, { prefx: 'a:' }), TypeError, /redisStore: unknown option 'prefx' \(did you mean 'prefix'\?\); expected one of 'prefix'/)
    assert.ok(isQuotaStore(redisStore(ioredisShaped, { prefix: undefined })))
  })

  test('mongoStore refuses anything but a Db', () => {
    const notDbs = [undefined, null, 'mongodb://127.0.0.1', {}, { collection: () => ({}) }, ioredisShaped, () => {}]
    for (const db of notDbs) expectOptionError(() => mongoStore(db), TypeError, /mongoStore: db must be the MongoDB driver's Db/)
  })

  test('mongoStore checks its options', () => {
    expectOptionError(() => mongoStore(dbShaped, { collection: 7 }), TypeError, /mongoStore: collection must be .*; received 7/)
    for (const name of ['', 'a$b', 'system.shares', 'a\0b', 'x'.repeat(121)]) expectOptionError(() => mongoStore(dbShaped, { collection: name }), RangeError, /mongoStore: collection must be/)
    expectOptionError(() => mongoStore(dbShaped, { colection: 'x' }), TypeError, /mongoStore: unknown option 'colection' \(did you mean 'collection'\?\); expected one of 'collection'/)
  })

  test('the key layout table of docs/several-instances.md is the key each reservation touches', async () => {
    const docs = require('node:fs').readFileSync(require('node:path').join(__dirname, '..', 'docs', 'several-instances.md'), 'utf8')
    const rows = [...docs.matchAll(/^\s*\| `([^`]+)` \| `([^`]+)` \| `([^`]+)` \| `(qcs:[^`]+)` \|$/gm)]
    assert.ok(rows.length >= 3, 'the table is missing')
    for (const [, name, key, periodId, documented] of rows) {
      const keys = []
      const client = { isCluster: false, call: async (...args) => (keys.push(args[3]), [1, 0, '7']) }
      await storeOperations(redisStore(client)).reserve(request({ name, key, periodId, limit: 8, leaseUnits: 1 }))
      await storeOperations(redisStore(client)).giveBack({ name, key, periodId, units: 1 })
      assert.deepEqual(keys, [documented, documented])
    }
  })

  test('a node-redis cluster (getMasters() before redis 4.6, masters since) gets the record key as the key that picks its node', async () => {
    const seen = []
    const sendCommand = async (firstKey, isReadonly, args) => (seen.push([firstKey, isReadonly, args[3]]), [1, 0, '7'])
    for (const cluster of [{ getMasters: () => [], getSlotMaster: () => ({}), sendCommand }, { isOpen: true, masters: [], slots: [], sendCommand }]) {
      await storeOperations(redisStore(cluster)).reserve(request({ name: 'api', key: 'k', periodId: '2024', limit: 8, leaseUnits: 1 }))
    }
    assert.deepEqual(seen, [
      ['qcs:{3:api:1:k}:2024', false, 'qcs:{3:api:1:k}:2024'],
      ['qcs:{3:api:1:k}:2024', false, 'qcs:{3:api:1:k}:2024'],
    ])
  })

  test('making a store sends nothing to the server, and the store is a frozen object with only its kind', () => {
    let calls = 0
    const client = { isCluster: false, call: async () => calls++ }
    const db = { databaseName: 'app', collection: () => calls++ }
    const stores = [redisStore(client), mongoStore(db)]
    assert.equal(calls, 0)
    assert.deepEqual(stores.map((store) => [Object.isFrozen(store), Object.keys(store), store.kind]), [
      [true, ['kind'], 'redis'],
      [true, ['kind'], 'mongo'],
    ])
    assert.equal(isQuotaStore({ kind: 'redis' }), false)
  })
})
