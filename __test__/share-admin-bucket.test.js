'use strict'

// quotaAdmin's view of a shared bucket (docs/operating-quotas.md, "A shared bucket"): bucket(key)
// answers the BucketUsage the store has now and moves nothing; fill(key) puts the bucket back to
// capacity - out in one atomic store operation, so a saturated key takes again; neither touches
// another key or name. On a real redis-server (ioredis and node-redis) and the MongoDB wire
// server; the bucket's records are made by the store's own bucketTake (lib/share/protocol.js).

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { redisStore, quotaAdmin } = require('quota-clock-source/shared')
const { storeOperations } = require('../lib/share/protocol.js')
const { useStoreServers } = require('./helpers/shared-fleet.js')

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`

/** A bucketTake of `instance` on (name, key): capacity 10, 0.001 a second, want `want`. */
function takeOf(name, key, fields) {
  return { name, key, capacity: 10, refillPerSecond: 0.001, instance: 'A', leaseMs: 10_000, want: 0, more: 0, held: 0, give: 0, charge: 0, fleetMs: -1, recordId: 0, ...fields }
}

describe('quotaAdmin bucket and fill on real stores', () => {
  const servers = useStoreServers('shared_admin_bucket')

  for (const kind of ['ioredis', 'node-redis', 'mongo']) {
    describe(kind, () => {
      test('a key with no bucket record answers capacity null and zeros, and fill makes none', async () => {
        const store = await servers.makeStore(kind)
        const name = freshName(kind)
        const admin = quotaAdmin(store, { name })
        const none = { name, key: '203.0.113.7', capacity: null, refillPerSecond: null, tokens: 0, out: 0, expiresAt: null }
        assert.deepEqual(await admin.bucket('203.0.113.7'), none)
        assert.deepEqual(await admin.fill('203.0.113.7'), none)
        assert.deepEqual(await admin.bucket('203.0.113.7'), none)
      })

      test('bucket answers the store\'s tokens and what is out in slices, and moves nothing', async () => {
        const store = await servers.makeStore(kind)
        const ops = storeOperations(store)
        const name = freshName(kind)
        const a = await ops.bucketTake(takeOf(name, 'k', { want: 3 }))
        await ops.bucketTake(takeOf(name, 'k', { instance: 'B', want: 2, fleetMs: a.fleetMs, recordId: a.recordId }))
        const admin = quotaAdmin(store, { name })
        const seen = await admin.bucket('k')
        assert.deepEqual({ ...seen, tokens: 0, expiresAt: 0 }, { name, key: 'k', capacity: 10, refillPerSecond: 0.001, tokens: 0, out: 5, expiresAt: 0 })
        assert.ok(Math.abs(seen.tokens - 5) < 0.01, `tokens ${seen.tokens}`)
        assert.ok(seen.expiresAt > Date.now() + 10_000_000 && seen.expiresAt < Date.now() + 10_100_000, `expiresAt in ${seen.expiresAt - Date.now()} ms`)
        await admin.bucket('k')
        const after = await ops.bucketTake(takeOf(name, 'k', { want: 0, held: 3, fleetMs: a.fleetMs, recordId: a.recordId }))
        assert.equal(after.tokens, 5, 'the reads moved no fleet time')
      })

      test('fill puts a saturated bucket back to capacity - out: the key takes again; other keys and names are untouched', async () => {
        const store = await servers.makeStore(kind)
        const ops = storeOperations(store)
        const name = freshName(kind)
        const a = await ops.bucketTake(takeOf(name, '203.0.113.7', { want: 4 }))
        // A failOpen charge left the bucket owing: nothing to take.
        const saturated = await ops.bucketTake(takeOf(name, '203.0.113.7', { want: 1, held: 4, charge: 20, fleetMs: a.fleetMs, recordId: a.recordId }))
        assert.deepEqual([saturated.granted, saturated.tokens], [0, -14])
        const other = await ops.bucketTake(takeOf(name, 'other', { want: 10 }))
        const otherName = freshName(kind)
        await ops.bucketTake(takeOf(otherName, '203.0.113.7', { want: 10 }))
        const admin = quotaAdmin(store, { name })
        const filled = await admin.fill('203.0.113.7')
        assert.deepEqual({ ...filled, expiresAt: 0 }, { name, key: '203.0.113.7', capacity: 10, refillPerSecond: 0.001, tokens: 6, out: 4, expiresAt: 0 })
        assert.ok(filled.expiresAt > Date.now())
        const again = await ops.bucketTake(takeOf(name, '203.0.113.7', { instance: 'B', want: 6, fleetMs: a.fleetMs, recordId: a.recordId }))
        assert.deepEqual([again.granted, again.tokens], [6, 0])
        assert.equal((await admin.bucket('other')).out, 10)
        assert.ok((await admin.bucket('other')).tokens < 0.01)
        assert.equal(other.tokens, 0)
        const elsewhere = await quotaAdmin(store, { name: otherName }).bucket('203.0.113.7')
        assert.ok(elsewhere.tokens < 0.01 && elsewhere.out === 10, JSON.stringify(elsewhere))
      })
    })
  }

  const store = redisStore({ isCluster: false, call: async () => assert.fail('no store call for a bad argument') })
  const admin = quotaAdmin(store, { name: 'api' })

  test('bucket and fill refuse a bad key with ERR_INVALID_ARG naming it, and call no store', async () => {
    const cases = [
      [() => admin.bucket(1), TypeError],
      [() => admin.bucket(), TypeError],
      [() => admin.bucket(''), RangeError],
      [() => admin.fill('x'.repeat(257)), RangeError],
      [() => admin.fill(null), TypeError],
    ]
    for (const [call, ErrorClass] of cases) {
      await assert.rejects(call(), (error) => error instanceof ErrorClass && error.code === 'ERR_INVALID_ARG' && /^key/.test(error.message), String(call))
    }
  })

  test('a store that fails is ERR_STORE_UNAVAILABLE with its error as the cause; a nonsense answer is ERR_STORE_RESPONSE', async () => {
    const down = new Error('connection refused')
    const failing = quotaAdmin(redisStore({ isCluster: false, call: async () => Promise.reject(down) }), { name: 'api' })
    for (const call of [() => failing.bucket('acme'), () => failing.fill('acme')]) {
      await assert.rejects(call(), (error) => error.code === 'ERR_STORE_UNAVAILABLE' && error.cause === down && /"api"/.test(error.message) && /"acme"/.test(error.message))
    }
    const lying = quotaAdmin(redisStore({ isCluster: false, call: async () => [10, '1', '12', 0, -1] }), { name: 'api' })
    for (const call of [() => lying.bucket('acme'), () => lying.fill('acme')]) {
      await assert.rejects(call(), (error) => error.code === 'ERR_STORE_RESPONSE' && /"api"/.test(error.message))
    }
  })
})
