'use strict'

// stats().store.calls counts each round trip to the store (docs/metrics.md), on a real redis-server with
// both clients and on the MongoDB wire server: compared with Redis's own INFO commandstats
// (EVALSHA and EVAL calls, a NOSCRIPT's EVALSHA and the EVAL after it both counted) and with the
// MongoDB driver's command events, for a shared quota limiter's reservations, refills, give-backs
// on delete and close.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { MongoClient } = require('mongodb')
const { KeyedQuotaClock } = require('quota-clock-source')
const { redisStore, mongoStore } = require('quota-clock-source/shared')
const { suiteServers, scriptCalls } = require('./helpers/server-counts.js')

const MONTH = { unit: 'month', timeZone: 'UTC' }

/** A shared quota limiter on `store`; its keys, traffic, a script flush midway, deletes and close. */
async function workload(store, { midway = async () => {} } = {}) {
  const limiter = new KeyedQuotaClock({
    capacity: 1_000_000,
    refillPerSecond: 1_000_000,
    suspendPolicy: 'ignore',
    quota: { limit: 200, period: MONTH },
    share: { store, name: `calls-${process.pid}-${Date.now()}`, leaseUnits: 5, idleMs: 60_000 },
  })
  for (const key of ['a', 'b', 'c']) for (let i = 0; i < 12; i++) assert.equal((await limiter.consume(key)).allowed, true)
  await midway()
  for (let i = 0; i < 12; i++) assert.equal((await limiter.consume('a')).allowed, true)
  limiter.delete('b')
  await limiter.close()
  return limiter.stats().store
}

describe('stats().store.calls is one per store round trip', () => {
  const servers = suiteServers()

  const clients = {
    ioredis: async () => {
      const client = new Redis({ host: servers.redis.host, port: servers.redis.port, lazyConnect: true })
      await client.connect()
      return { client, quit: () => client.quit() }
    },
    'node-redis': async () => {
      const client = createClient({ url: servers.redis.url })
      await client.connect()
      return { client, quit: () => client.close() }
    },
  }

  for (const [kind, open] of Object.entries(clients)) {
    test(`Redis (${kind}): calls equals the server's EVALSHA and EVAL count, NOSCRIPT retries included`, async () => {
      const admin = new Redis({ host: servers.redis.host, port: servers.redis.port })
      const { client, quit } = await open()
      try {
        await admin.script('FLUSH')
        await admin.config('RESETSTAT')
        const stats = await workload(redisStore(client), { midway: () => admin.script('FLUSH') })
        const counted = await scriptCalls(admin)
        assert.ok(stats.calls >= 8, `${stats.calls} calls`)
        assert.equal(stats.calls, counted, `stats ${JSON.stringify(stats)}; the server counted ${counted}`)
      } finally {
        await quit()
        admin.disconnect()
      }
    })
  }

  test('MongoDB: calls equals the commands the driver sent for the limiter (a new record: find, create, reserve)', async () => {
    const client = new MongoClient(servers.mongo.uri, { monitorCommands: true, serverSelectionTimeoutMS: 10_000 })
    await client.connect()
    const sent = []
    client.on('commandStarted', (event) => {
      if (['findAndModify', 'update', 'insert', 'find', 'aggregate', 'delete'].includes(event.commandName)) sent.push(event.commandName)
    })
    try {
      const stats = await workload(mongoStore(client.db(`calls_${process.pid}`)))
      assert.ok(stats.calls >= 8, `${stats.calls} calls`)
      assert.equal(stats.calls, sent.length, `stats ${JSON.stringify(stats)}; sent ${sent.join(' ')}`)
    } finally {
      await client.close()
    }
  })
})
