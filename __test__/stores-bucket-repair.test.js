'use strict'

// A fleet bucket record that is not one: a field missing, not a finite number
// in range, bytes that are not the documented layout, or a key of another type (a hash of earlier
// releases' layout among them). On Redis and on the MongoDB wire server, for each corruption:
// the next take treats the record as lost (it comes back EMPTY with a new identity, once, and says
// so), the record it leaves is sound (read, taken from, refilled, its TTL the usual one); the
// operator's bucket() reports the record as ERR_STORE_RESPONSE naming it and fill() replaces it
// with a full bucket; a shared limiter meeting one warns once (QUOTA_CLOCK_STORE_RECORD_REPAIRED)
// and keeps deciding the key; the CLI's bucket and fill say the same as quotaAdmin.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const path = require('node:path')
const Redis = require('ioredis')
const { MongoClient } = require('mongodb')
const { KeyedQuotaClock, QuotaClockError, manualClock } = require('quota-clock-source')
const { redisStore, mongoStore, quotaAdmin } = require('quota-clock-source/shared')
const { storeOperations, bucketKeptMs } = require('../lib/share/protocol.js')
const { useStoreServers } = require('./helpers/shared-fleet.js')
const { warningsDuring } = require('./helpers/warnings.js')
const { rewriteBucketRecord, HEAD_BYTES } = require('./helpers/redis-bucket-record.js')

const BIN = path.join(__dirname, '..', 'bin', 'quota-clock-source.js')
const L = 10_000
const REPAIRED = 'QUOTA_CLOCK_STORE_RECORD_REPAIRED'
let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`
const part = (text) => `${Buffer.byteLength(text)}:${text}`
const redisName = (name, key) => `qcs:{${part(name)}:${part(key)}}:b`
const mongoId = (name, key) => `bucket:${part(name)}:${part(key)}`
const isStoreResponse = (error) => error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE'

function takeOf(name, fields) {
  return { name, key: 'k', capacity: 10, refillPerSecond: 2, instance: 'A', leaseMs: L, want: 1, more: 0, held: 0, give: 0, charge: 0, fleetMs: -1, recordId: 0, ...fields }
}

// Each corruption: [label, Redis (client, record name), MongoDB (collection, _id)]. The Redis record is
// one binary string (docs/several-instances.md); the helper rewrites its fields or its bytes.
const set = (fields) => (c, at) => rewriteBucketRecord(c, at, { change: (r) => ({ ...r, ...fields }) })
const setA = (entry) => (c, at) => rewriteBucketRecord(c, at, { change: (r) => ({ ...r, instances: { ...r.instances, A: { ...r.instances.A, ...entry } } }) })
const bytes = (how) => (c, at) => rewriteBucketRecord(c, at, { bytes: how })
const CORRUPTIONS = [
  ['F = 1e300 (finite, out of range)', set({ F: 1e300 }), (c, _id) => c.updateOne({ _id }, { $set: { F: 1e300 } })],
  ['F = nan', set({ F: Number.NaN }), (c, _id) => c.updateOne({ _id }, { $set: { F: Number.NaN } })],
  ['the identity out of range (Redis: 0; MongoDB: abc)', set({ i: 0 }), (c, _id) => c.updateOne({ _id }, { $set: { rid: 'abc' } })],
  ['tk = nan', set({ tk: Number.NaN }), (c, _id) => c.updateOne({ _id }, { $set: { tk: Number.NaN } })],
  ['tk = inf', set({ tk: Number.POSITIVE_INFINITY }), (c, _id) => c.updateOne({ _id }, { $set: { tk: Number.POSITIVE_INFINITY } })],
  ['tk = -inf', set({ tk: Number.NEGATIVE_INFINITY }), (c, _id) => c.updateOne({ _id }, { $set: { tk: Number.NEGATIVE_INFINITY } })],
  ['the capacity missing (Redis: the record cut short of its fixed part)', bytes((b) => b.subarray(0, HEAD_BYTES - 1)), (c, _id) => c.updateOne({ _id }, { $unset: { C: '' } })],
  ['the capacity out of range (Redis: 0; MongoDB: 2.5)', set({ C: 0 }), (c, _id) => c.updateOne({ _id }, { $set: { C: 2.5 } })],
  ['the refill zero', set({ R: 0 }), (c, _id) => c.updateOne({ _id }, { $set: { R: 0 } })],
  ['a holder without its lease (Redis: its entry cut short)', bytes((b) => b.subarray(0, b.length - 4)), (c, _id) => c.updateOne({ _id }, { $unset: { 'h.A.l': '' } })],
  ["a holder's fleet ms nan", setA({ a: Number.NaN }), (c, _id) => c.updateOne({ _id }, { $set: { 'h.A.a': Number.NaN } })],
  ["a holder's tokens out fractional", setA({ o: 1.5 }), (c, _id) => c.updateOne({ _id }, { $set: { 'h.A.o': 1.5 } })],
  ["a holder's lease 0", setA({ l: 0 }), (c, _id) => c.updateOne({ _id }, { $set: { 'h.A.l': 0 } })],
  ['a holder listed twice (MongoDB: its tokens out negative)', bytes((b) => Buffer.concat([b, b.subarray(HEAD_BYTES)])), (c, _id) => c.updateOne({ _id }, { $set: { 'h.A.o': -1 } })],
  ['a byte more than the record (MongoDB: tk text)', bytes((b) => Buffer.concat([b, Buffer.from([0])])), (c, _id) => c.updateOne({ _id }, { $set: { tk: '7' } })],
  [
    "an entry of no kind (flags 0; MongoDB: a holder's fields text)",
    bytes((b) => Buffer.concat([b, Buffer.from([1, 0, 0x42, 0])])),
    (c, _id) => c.updateOne({ _id }, { $set: { 'h.A.a': 'x' } }),
  ],
  [
    'a key of another type (a string not a record; MongoDB: fields of another type)',
    async (c, at) => {
      await c.del(at)
      await c.set(at, 'not a bucket')
    },
    (c, _id) => c.updateOne({ _id }, { $set: { tk: 'seven', h: 'nobody' } }),
  ],
  [
    "a record of the hash layout of earlier releases (MongoDB: the document's fields renamed)",
    async (c, at) => {
      await c.del(at)
      await c.hset(at, 'C', '10', 'R', '2', 'tk', '7', 'F', '0', 'S', String(Date.now()), 'i', '42')
      await c.pexpire(at, 60_000)
    },
    (c, _id) => c.updateOne({ _id }, { $rename: { tk: 'tokens' } }),
  ],
]

describe('a fleet bucket record that is not one is treated as lost', () => {
  const servers = useStoreServers('bucket_repair')
  const kinds = {
    redis: {
      name: redisName,
      async open() {
        const client = new Redis({ host: servers.redis.host, port: servers.redis.port })
        return { store: redisStore(client), client, close: () => client.quit() }
      },
      corrupt: ({ client }, how, name, key) => how[1](client, redisName(name, key)),
      async ttlMs({ client }, name, key) {
        return client.pttl(redisName(name, key))
      },
    },
    mongo: {
      name: mongoId,
      async open() {
        const client = new MongoClient(servers.mongo.uri, { serverSelectionTimeoutMS: 10_000 })
        await client.connect()
        const db = client.db(servers.dbName)
        return { store: mongoStore(db), records: db.collection('quota_shares'), close: () => client.close() }
      },
      corrupt: ({ records }, how, name, key) => how[2](records, mongoId(name, key)),
      async ttlMs({ records }, name, key) {
        const document = await records.findOne({ _id: mongoId(name, key) })
        return document.expiresAt.getTime() - Date.now()
      },
    },
  }

  for (const [kind, store] of Object.entries(kinds)) {
    describe(kind, () => {
      for (const corruption of CORRUPTIONS) {
        test(`${corruption[0]}: bucket() names it; the next take makes it EMPTY with a new identity, once; then it is a bucket again`, async () => {
          const opened = await store.open()
          try {
            const ops = storeOperations(opened.store)
            const admin = quotaAdmin(opened.store, { name: 'unused' })
            const name = freshName('repair')
            const a = await ops.bucketTake(takeOf(name, { want: 3, newId: 1_000 + unique }))
            await store.corrupt(opened, corruption, name, 'k')
            // The operator's view: ERR_STORE_RESPONSE naming the record, nothing written.
            const named = (error) => isStoreResponse(error) && error.message.includes(store.name(name, 'k'))
            await assert.rejects(ops.bucketRead({ name, key: 'k' }), named)
            await assert.rejects(quotaAdmin(opened.store, { name }).bucket('k'), named)
            await assert.rejects(ops.bucketRead({ name, key: 'k' }), named, 'the read repaired nothing')
            assert.ok(admin)
            // A take: lost to the caller (its slice of 3 counts for nothing), EMPTY, a new identity.
            const newId = 2_000_000 + unique
            const b = await ops.bucketTake(takeOf(name, { want: 1, held: 3, give: 0, fleetMs: a.fleetMs + 5_000, recordId: a.recordId, newId }))
            assert.deepEqual([b.repaired, b.recordId, b.granted, b.held, b.tokens, b.fleetMs, b.others], [true, newId, 0, 0, 0, 0, 0])
            // Once: the next take finds a sound record of that identity.
            const c = await ops.bucketTake(takeOf(name, { instance: 'B', want: 0, recordId: b.recordId, newId: newId + 1 }))
            assert.deepEqual([c.repaired, c.recordId], [false, newId])
            assert.ok(c.tokens >= 0 && c.tokens < 10, `tokens ${c.tokens}: an empty bucket refilling, not a full one`)
            const read = await ops.bucketRead({ name, key: 'k' })
            assert.deepEqual([read.capacity, read.refillPerSecond, read.out], [10, 2, 0])
            // Its TTL is a sound record's: set by the take, at most what a take keeps it.
            const ttl = await store.ttlMs(opened, name, 'k')
            assert.ok(ttl > 0 && ttl <= bucketKeptMs(10, 2, L) + 1_000, `TTL ${ttl}`)
            // The bucket refills from empty: a take a little later gets a token.
            let d
            const deadline = Date.now() + 10_000
            do d = await ops.bucketTake(takeOf(name, { want: 1, recordId: b.recordId }))
            while (d.granted === 0 && Date.now() < deadline)
            assert.deepEqual([d.repaired, d.granted, d.recordId], [false, 1, newId])
          } finally {
            await opened.close()
          }
        })
      }

      test('fill() replaces a record that is not one with a full bucket (its capacity kept when it reads, else the next take\'s)', async () => {
        const opened = await store.open()
        try {
          const ops = storeOperations(opened.store)
          for (const corruption of [CORRUPTIONS[0], CORRUPTIONS[1], CORRUPTIONS[6], CORRUPTIONS[9], CORRUPTIONS[CORRUPTIONS.length - 2], CORRUPTIONS[CORRUPTIONS.length - 1]]) {
            const name = freshName('fill')
            const admin = quotaAdmin(opened.store, { name })
            const a = await ops.bucketTake(takeOf(name, { want: 3 }))
            await store.corrupt(opened, corruption, name, 'k')
            const filled = await admin.fill('k')
            const capacityKept = filled.capacity !== null
            if (capacityKept) assert.deepEqual([filled.capacity, filled.refillPerSecond, filled.tokens, filled.out], [10, 2, 10, 0], corruption[0])
            else assert.deepEqual([filled.capacity, filled.tokens, filled.out], [null, 0, 0], corruption[0])
            // A sound record now: bucket() reads it, and a take of a caller who knew the old one
            // finds a full bucket (a new identity: its old slice is gone), not an empty one.
            await admin.bucket('k')
            const b = await ops.bucketTake(takeOf(name, { want: 10, held: 3, fleetMs: a.fleetMs, recordId: a.recordId }))
            assert.deepEqual([b.repaired, b.granted, b.held], [false, 10, 10], corruption[0])
            assert.notEqual(b.recordId, a.recordId)
            assert.ok((await store.ttlMs(opened, name, 'k')) > 0)
          }
        } finally {
          await opened.close()
        }
      })

      test('a shared limiter meeting one warns once (QUOTA_CLOCK_STORE_RECORD_REPAIRED), denies from the empty bucket, and admits again as it refills', { timeout: 30_000 }, async () => {
        const opened = await store.open()
        const name = freshName('warn')
        const clock = manualClock({ wallMs: Date.now() })
        const limiter = new KeyedQuotaClock({ capacity: 2, refillPerSecond: 20, suspendPolicy: 'ignore', clock, share: { store: opened.store, name, bucket: true, leaseMs: 1_000, idleMs: 600_000, timeoutMs: 5_000 } })
        try {
          assert.equal((await limiter.consume('k', 2)).allowed, true)
          await store.corrupt(opened, CORRUPTIONS[0], name, 'k')
          let first
          const warnings = await warningsDuring(REPAIRED, async () => {
            clock.advance(2_000) // the slice's lease lapsed: the next call asks the store
            first = await limiter.consume('k', 2)
            clock.advance(2_000)
            await limiter.consume('k', 2)
          })
          assert.equal(first.allowed, false, `an emptied record admitted: ${JSON.stringify(first)}`)
          assert.equal(warnings.length, 1, warnings.map((w) => w.message).join('\n'))
          assert.match(warnings[0].message, new RegExp(`share "${name}".*key "k".*empty`))
          // The key is not disabled: the bucket refills and the limiter admits from it again.
          let allowed = false
          const deadline = Date.now() + 10_000
          while (!allowed && Date.now() < deadline) {
            clock.advance(1_100)
            allowed = (await limiter.consume('k', 1)).allowed
            if (!allowed) await new Promise((resolve) => setTimeout(resolve, 20))
          }
          assert.equal(allowed, true, 'the repaired key admitted nothing as it refilled')
        } finally {
          await limiter.close().catch(() => {})
          await opened.close()
        }
      })

      test('the CLI: bucket exits 1 naming the record; fill replaces it and prints a full bucket', { timeout: 120_000 }, async () => {
        const opened = await store.open()
        try {
          const ops = storeOperations(opened.store)
          const name = freshName('cli')
          await ops.bucketTake(takeOf(name, { key: '203.0.113.7', want: 3 }))
          await store.corrupt(opened, CORRUPTIONS[1], name, '203.0.113.7')
          const flag = kind === 'redis' ? ['--redis', servers.redis.url] : ['--mongo', mongoUrl()]
          const shown = await cli(['bucket', ...flag, '--name', name, '--key', '203.0.113.7'])
          assert.equal(shown.status, 1, shown.stdout + shown.stderr)
          assert.match(shown.stderr, /ERR_STORE_RESPONSE/)
          assert.ok(shown.stderr.includes(store.name(name, '203.0.113.7')), shown.stderr)
          assert.ok(shown.stderr.includes('fill'), shown.stderr)
          const filled = await cli(['fill', ...flag, '--name', name, '--key', '203.0.113.7', '--json'])
          assert.equal(filled.status, 0, filled.stderr)
          const usage = JSON.parse(filled.stdout)
          assert.deepEqual([usage.capacity, usage.tokens, usage.out], [10, 10, 0])
        } finally {
          await opened.close()
        }
      })
    })
  }

  function mongoUrl() {
    const url = new URL(servers.mongo.uri)
    url.pathname = `/${servers.dbName}`
    return url.href
  }
})

function cli(args) {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { cwd: path.join(__dirname, '..'), encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? error.code : 0, stdout, stderr })
    })
  })
}
