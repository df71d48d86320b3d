'use strict'

// Every store call of the package goes through one primitive (lib/share/store-call.js), which
// counts each round trip once: stats().store.calls for a shared limiter, the primitive's own count
// (roundTripsSent) for quotaAdmin and a throttle, which expose none. Checked against the servers'
// own counts, Redis's INFO commandstats (EVALSHA and EVAL) and the MongoDB driver's command events:
// a fleet bucket's takes (the first one creating the record) and give-backs, quotaAdmin's five
// operations, a throttle's checks.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { MongoClient } = require('mongodb')
const { KeyedQuotaClock, createThrottle, periodFor } = require('quota-clock-source')
const { redisStore, mongoStore, quotaAdmin } = require('quota-clock-source/shared')
const { roundTripsSent } = require('../lib/share/store-call.js')
const { suiteServers, scriptCalls } = require('./helpers/server-counts.js')

const MONTH = { unit: 'month', timeZone: 'UTC' }
const unique = (what) => `${what}-${process.pid}-${Date.now()}`

/** A fleet bucket's workload: a take that creates each key's record, more takes, a delete, close. */
async function fleetWorkload(store) {
  const limiter = new KeyedQuotaClock({
    capacity: 50,
    refillPerSecond: 50,
    suspendPolicy: 'ignore',
    share: { store, name: unique('fleet'), bucket: true, leaseMs: 4_000, idleMs: 60_000 },
  })
  for (const key of ['a', 'b']) for (let i = 0; i < 30; i++) await limiter.consume(key)
  limiter.delete('b')
  await limiter.close()
  return limiter.stats().store
}

/** quotaAdmin's five operations on a record that does not exist yet, then on one that does. */
async function adminWorkload(store, before = async () => {}) {
  const name = unique('admin')
  const admin = quotaAdmin(store, { name })
  const periodId = periodFor(MONTH, Date.now()).id
  const sentBefore = roundTripsSent()
  await before()
  await admin.usage('k', periodId)
  await admin.grant('k', periodId, 5)
  await admin.grant('k', periodId, 5)
  await admin.usage('k', periodId)
  await admin.reset('k', periodId)
  await admin.bucket('k')
  await admin.fill('k')
  return roundTripsSent() - sentBefore
}

describe('one round trip counted once, by the one store-call primitive', () => {
  const servers = suiteServers()

  /** A Redis client for the store and one to read the server's counts, reset. */
  async function redisPair() {
    const admin = new Redis({ host: servers.redis.host, port: servers.redis.port })
    const client = new Redis({ host: servers.redis.host, port: servers.redis.port })
    await admin.script('FLUSH')
    await admin.config('RESETSTAT')
    return { admin, client, close: () => Promise.all([client.quit(), admin.quit()]) }
  }

  /** A MongoDB client whose sent commands are listed (those the package sends for a store or a throttle). */
  async function mongoClient() {
    const client = new MongoClient(servers.mongo.uri, { monitorCommands: true, serverSelectionTimeoutMS: 10_000 })
    await client.connect()
    const sent = []
    client.on('commandStarted', (event) => {
      if (['findAndModify', 'update', 'insert', 'find', 'aggregate', 'delete'].includes(event.commandName)) sent.push(event.commandName)
    })
    return { client, sent }
  }

  test("Redis: a fleet bucket's takes and give-backs are the server's EVALSHA and EVAL count", async () => {
    const { admin, client, close } = await redisPair()
    try {
      const stats = await fleetWorkload(redisStore(client))
      const counted = await scriptCalls(admin)
      assert.ok(stats.calls >= 4, `${stats.calls} calls`)
      assert.equal(stats.calls, counted, `stats ${JSON.stringify(stats)}; the server counted ${counted}`)
    } finally {
      await close()
    }
  })

  test("Redis: two limiters' takes for many keys asked together ride in a few calls: each counted once in the process, once in each limiter with a take in it", async () => {
    const { admin, client, close } = await redisPair()
    const store = redisStore(client)
    const make = () =>
      new KeyedQuotaClock({ capacity: 50, refillPerSecond: 50, suspendPolicy: 'ignore', share: { store, name: unique('batch'), bucket: true, leaseMs: 4_000, idleMs: 60_000 } })
    const limiters = [make(), make()]
    try {
      await Promise.all(limiters.map((limiter) => limiter.consume('warm')))
      const before = limiters.map((limiter) => limiter.stats().store.calls)
      await admin.config('RESETSTAT')
      const sentBefore = roundTripsSent()
      const keys = Array.from({ length: 20 }, (_, at) => `client-${at}`)
      const decisions = await Promise.all(limiters.flatMap((limiter) => keys.map((key) => limiter.consume(key))))
      assert.ok(decisions.every((decision) => decision.allowed))
      await Promise.all(limiters.map((limiter) => limiter.close()))
      const counted = await scriptCalls(admin)
      const calls = limiters.map((limiter, at) => limiter.stats().store.calls - before[at])
      // 40 takes asked together: a few calls (each limiter's takes may reach the store in a turn of
      // their own; a call after SCRIPT FLUSH is an EVALSHA and an EVAL), each counted once in the
      // process and once in each limiter with a take in it.
      assert.ok(counted >= 1 && counted <= 4, `the server counted ${counted}; the limiters ${calls}`)
      assert.equal(roundTripsSent() - sentBefore, counted)
      assert.ok(calls.every((n) => n >= 1 && n <= counted) && calls[0] + calls[1] >= counted, `the server counted ${counted}; the limiters ${calls}`)
    } finally {
      await close()
    }
  })

  test("MongoDB: a fleet bucket's takes (the first one creating the record: take, create, take) are the commands sent", async () => {
    const { client, sent } = await mongoClient()
    try {
      const stats = await fleetWorkload(mongoStore(client.db(`trips_${process.pid}`)))
      assert.ok(sent.includes('update'), `a record was created: ${sent.join(' ')}`)
      assert.equal(stats.calls, sent.length, `stats ${JSON.stringify(stats)}; sent ${sent.join(' ')}`)
    } finally {
      await client.close()
    }
  })

  test("Redis: quotaAdmin's operations are the server's EVALSHA and EVAL count, NOSCRIPT retries included", async () => {
    const { admin, client, close } = await redisPair()
    try {
      const trips = await adminWorkload(redisStore(client), () => admin.config('RESETSTAT'))
      const counted = await scriptCalls(admin)
      assert.ok(counted > 7, `the server counted ${counted} (NOSCRIPT retries among them)`)
      assert.equal(trips, counted)
    } finally {
      await close()
    }
  })

  test("MongoDB: quotaAdmin's operations (a grant's create-then-read included) are the commands sent", async () => {
    const { client, sent } = await mongoClient()
    try {
      const trips = await adminWorkload(mongoStore(client.db(`trips_${process.pid}`)), async () => {
        sent.length = 0
      })
      assert.equal(trips, sent.length, `sent ${sent.join(' ')}`)
    } finally {
      await client.close()
    }
  })

  test("MongoDB: a throttle's checks (a counter's creation included) and sweep are the commands sent", async () => {
    const { client, sent } = await mongoClient()
    try {
      const throttle = createThrottle({ db: client.db(`trips_${process.pid}`), timeZone: 'UTC' })
      const key = unique('client')
      const sentBefore = roundTripsSent()
      for (let i = 0; i < 3; i++) await throttle.check(key, { requests_per_minute: 10, requests_per_day: 100 })
      await throttle.sweep()
      assert.ok(sent.length > 7, `sent ${sent.join(' ')}`)
      assert.equal(roundTripsSent() - sentBefore, sent.length, `sent ${sent.join(' ')}`)
    } finally {
      await client.close()
    }
  })
})
