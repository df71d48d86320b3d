'use strict'

// quotaAdmin's grant near Number.MAX_SAFE_INTEGER (issue 38): a grant that would take a record's
// `limit + extra` past it is refused with ERR_INVALID_ARG in the store's one atomic operation, and
// nothing is written; a record that already holds such a value (written by an older version, or by
// hand) is answered with what it holds clamped, and reset and reservations work on it, on Redis
// (ioredis and node-redis) and MongoDB.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { periodFor } = require('quota-clock-source')
const { quotaAdmin } = require('quota-clock-source/shared')
const { MONTH, useStoreServers, limiterOn } = require('./helpers/shared-fleet.js')
const { recordKey, redisQuotaKey } = require('../lib/stores/record-key.js')

const MAX = Number.MAX_SAFE_INTEGER

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`
const openMonth = () => periodFor(MONTH, Date.now()).id
const refusedUnits = (error) => error instanceof RangeError && error.code === 'ERR_INVALID_ARG' && /units/.test(error.message) && /MAX_SAFE_INTEGER/.test(error.message)

describe('quotaAdmin grants near Number.MAX_SAFE_INTEGER', () => {
  const servers = useStoreServers('admin_limits')

  /** Writes `fields` ({ extra, used }) into the record of (name, key, periodId) as an older version could have. */
  async function poison(kind, name, key, periodId, { extra, used }) {
    if (kind === 'mongo') {
      const records = servers.mongoClient.db(servers.dbName).collection('quota_shares')
      await records.updateOne({ _id: recordKey(name, key, periodId) }, { $set: { extra, count: used } })
      return
    }
    const Redis = require('ioredis')
    const client = new Redis({ host: servers.redis.host, port: servers.redis.port })
    try {
      await client.hset(`qcs:${redisQuotaKey(name, key, periodId)}`, 'x', String(extra), 'c', String(used))
    } finally {
      client.disconnect()
    }
  }

  for (const kind of ['ioredis', 'node-redis', 'mongo']) {
    describe(kind, () => {
      test('a grant of Number.MAX_SAFE_INTEGER on a new record is answered; one more unit is refused and nothing is written', async () => {
        const name = freshName(kind)
        const admin = quotaAdmin(await servers.makeStore(kind), { name })
        const period = openMonth()
        const granted = await admin.grant('acme', period, MAX)
        assert.equal(granted.extra, MAX)
        await assert.rejects(admin.grant('acme', period, 1), refusedUnits)
        assert.equal((await admin.usage('acme', period)).extra, MAX)
        assert.equal((await admin.reset('acme', period)).extra, 0)
      })

      test('two grants of 2 ** 52: the second is refused with ERR_INVALID_ARG, the first stays, and the key is still reserved from', async () => {
        const name = freshName(kind)
        const store = await servers.makeStore(kind)
        const admin = quotaAdmin(store, { name })
        const limiter = limiterOn(await servers.makeStore(kind), name, { limit: 40, leaseUnits: 4 })
        const period = openMonth()
        try {
          assert.equal((await limiter.consume('acme')).allowed, true)
          assert.equal((await admin.grant('acme', period, 2 ** 52)).extra, 2 ** 52)
          await assert.rejects(admin.grant('acme', period, 2 ** 52), refusedUnits)
          // The limit (40) counts: limit + extra may reach MAX exactly, not pass it.
          await assert.rejects(admin.grant('acme', period, MAX - 40 - 2 ** 52 + 1), refusedUnits)
          const full = await admin.grant('acme', period, MAX - 40 - 2 ** 52)
          assert.equal(full.limit + full.extra, MAX)
          const usage = await admin.usage('acme', period)
          assert.equal(usage.extra, MAX - 40)
          for (let i = 0; i < 20; i++) assert.equal((await limiter.consume('acme')).allowed, true)
          assert.ok((await admin.usage('acme', period)).used >= 21)
        } finally {
          await limiter.close()
        }
      })

      test('a record already past Number.MAX_SAFE_INTEGER is answered clamped, reserved from and reset', async () => {
        const name = freshName(kind)
        const admin = quotaAdmin(await servers.makeStore(kind), { name })
        const limiter = limiterOn(await servers.makeStore(kind), name, { limit: 40, leaseUnits: 4 })
        const period = openMonth()
        try {
          assert.equal((await limiter.consume('acme')).allowed, true)
          await poison(kind, name, 'acme', period, { extra: 2 ** 54, used: 8 })
          const usage = await admin.usage('acme', period)
          assert.equal(usage.extra, MAX)
          for (let i = 0; i < 20; i++) assert.equal((await limiter.consume('acme')).allowed, true, `consume ${i}`)
          await assert.rejects(admin.grant('acme', period, 1), refusedUnits)
          await poison(kind, name, 'acme', period, { extra: 0, used: 2 ** 54 })
          assert.equal((await admin.usage('acme', period)).used, MAX)
          const reset = await admin.reset('acme', period)
          assert.equal(reset.extra, 0)
          assert.ok(reset.used <= 40, `used ${reset.used}`)
          assert.equal((await limiter.consume('acme')).allowed, true)
          await limiter.close()
          const after = await admin.usage('acme', period)
          assert.equal(after.held, 0)
          assert.ok(after.used >= 1 && after.used <= 40, `used ${after.used}`)
        } finally {
          await limiter.close()
        }
      })
    })
  }
})
