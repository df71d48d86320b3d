'use strict'

// A store that loses its data (docs/several-instances.md): Redis killed and restarted empty, or FLUSHALL, (and a
// MongoDB collection emptied) mid-drain. Every instance notices at its next store call for the
// key that the record is gone or remade (its identity differs) and charges the new record with
// what it had reserved there and not given back: with every instance alive, the total admitted
// never passes the limit. Several limiters in this process, and instances in child processes.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { MongoClient } = require('mongodb')
const { KeyedQuotaClock } = require('quota-clock-source')
const { redisStore, mongoStore } = require('quota-clock-source/shared')
const { startRedisServer } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { startInstance, killInstances } = require('./helpers/shared-fleet.js')

const MONTH = { unit: 'month', timeZone: 'UTC' }
const LIMIT = 20_000
const DRAIN_DEADLINE_MS = 90_000

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const sum = (values) => values.reduce((total, value) => total + value, 0)

/** Waits until `ready()` is true (polling), or fails after `ms`. */
async function until(ready, ms, what) {
  const deadline = Date.now() + ms
  while (!(await ready())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(5)
  }
}

describe('a store that loses its data mid-drain', () => {
  let redis
  let mongo
  let mongoClient
  let work
  const closers = []
  const dbName = `shared_loss_${process.pid}`

  before(async () => {
    ;[redis, mongo] = await Promise.all([startRedisServer(), startMongoServer()])
    mongoClient = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 10_000 })
    await mongoClient.connect()
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-shared-loss-'))
  })

  after(async () => {
    killInstances()
    await Promise.allSettled(closers.map((close) => close()))
    await mongoClient?.close()
    await Promise.allSettled([redis?.stop(), mongo?.stop()])
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  // Clients that reconnect by themselves (a restarted server) and queue nothing for long: the
  // limiter's timeoutMs bounds each wait.
  async function ioredisClient() {
    const client = new Redis({ host: redis.host, port: redis.port, lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    client.on('error', () => {})
    await client.connect()
    closers.push(() => client.disconnect())
    return client
  }
  async function nodeRedisClient() {
    const client = createClient({ url: redis.url, socket: { reconnectStrategy: () => 50 } })
    client.on('error', () => {})
    await client.connect()
    closers.push(() => client.destroy())
    return client
  }
  async function mongoDb() {
    const client = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 5_000 })
    await client.connect()
    closers.push(() => client.close(true))
    return client.db(dbName)
  }

  const losses = {
    async restart() {
      await redis.kill()
      await redis.restart()
    },
    async flushall() {
      const client = await ioredisClient()
      await client.flushall()
    },
    async 'deleteMany'() {
      await mongoClient.db(dbName).collection('quota_shares').deleteMany({})
    },
  }

  /** Drains `key` on `limiter` until a quota denial, riding out the outage; counts into `tally`. */
  async function drain(limiter, key, tally) {
    const deadline = Date.now() + DRAIN_DEADLINE_MS
    for (;;) {
      assert.ok(Date.now() < deadline, 'the drain ended')
      let decision
      try {
        decision = await limiter.consume(key)
      } catch (error) {
        assert.equal(error.code, 'ERR_STORE_UNAVAILABLE')
        await sleep(2)
        continue
      }
      if (decision.allowed) tally.admitted++
      else if (decision.retryAfterBasis === 'wall-period') return
    }
  }

  const cases = [
    { label: 'Redis killed and restarted empty (ioredis)', makeStore: async () => redisStore(await ioredisClient()), loss: 'restart' },
    { label: 'Redis FLUSHALL (node-redis)', makeStore: async () => redisStore(await nodeRedisClient()), loss: 'flushall' },
    { label: 'Redis FLUSHALL (ioredis)', makeStore: async () => redisStore(await ioredisClient()), loss: 'flushall' },
    { label: 'MongoDB records deleted', makeStore: async () => mongoStore(await mongoDb()), loss: 'deleteMany' },
  ]
  for (const { label, makeStore, loss } of cases) {
    test(`${label}: three limiters in one process admit at most the limit`, { timeout: 120_000 }, async () => {
      const name = freshName('loss')
      const limiters = []
      for (let i = 0; i < 3; i++) {
        const store = await makeStore()
        limiters.push(
          new KeyedQuotaClock({
            capacity: 1_000_000,
            refillPerSecond: 1_000_000,
            suspendPolicy: 'ignore',
            quota: { limit: LIMIT, period: MONTH },
            share: { store, name, idleMs: 60_000, timeoutMs: 2_000 },
          }),
        )
      }
      const tallies = limiters.map(() => ({ admitted: 0 }))
      const drains = limiters.map((limiter, at) => drain(limiter, 'tenant', tallies[at]))
      await until(() => sum(tallies.map((tally) => tally.admitted)) >= 0.4 * LIMIT, 60_000, '40% admitted')
      const atLoss = sum(tallies.map((tally) => tally.admitted))
      await losses[loss]()
      await Promise.all(drains)
      const admitted = sum(tallies.map((tally) => tally.admitted))
      assert.ok(atLoss < 0.9 * LIMIT, `the loss came mid-drain (${atLoss} admitted)`)
      assert.ok(admitted <= LIMIT, `admitted ${admitted} of ${LIMIT} (${tallies.map((tally) => tally.admitted).join(' + ')}), ${atLoss} before the loss`)
      // Only what was in flight when the store lost it (a lease per limiter at most) goes missing.
      assert.ok(admitted >= LIMIT - 3 * 200 - 3, `admitted ${admitted} of ${LIMIT}`)
      await Promise.all(limiters.map((limiter) => limiter.close().catch(() => undefined)))
    })
  }

  const fileSize = (file) => fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0

  for (const [client, loss] of [
    ['ioredis', 'restart'],
    ['node-redis', 'flushall'],
  ]) {
    test(`three processes (${client}), ${loss === 'restart' ? 'Redis restarted empty' : 'FLUSHALL'} mid-drain: at most the limit admitted`, { timeout: 180_000 }, async () => {
      const name = freshName('loss-processes')
      const config = { client, url: redis.url, share: { name, idleMs: 60_000, timeoutMs: 2_000 }, quota: { limit: LIMIT, period: MONTH } }
      const instances = await Promise.all([startInstance(config), startInstance(config), startInstance(config)])
      const files = instances.map((_, at) => path.join(work, `${name}-${at}.admitted`))
      const draining = Promise.all(instances.map((instance, at) => instance.call('drain', { key: 'tenant', file: files[at], pauseEvery: 50, maxErrors: 1e9 })))
      const total = () => sum(files.map(fileSize))
      await until(() => total() >= 0.4 * LIMIT, 120_000, '40% admitted')
      const atLoss = total()
      await losses[loss]()
      const drains = await draining
      const admitted = sum(drains.map((drain) => drain.admitted))
      assert.equal(admitted, total())
      for (const drain of drains) assert.equal(drain.denial?.retryAfterBasis, 'wall-period', JSON.stringify(drain))
      assert.ok(atLoss < 0.9 * LIMIT, `the loss came mid-drain (${atLoss} admitted)`)
      assert.ok(admitted <= LIMIT, `admitted ${admitted} of ${LIMIT} (${drains.map((drain) => drain.admitted).join(' + ')}), ${atLoss} before the loss`)
      assert.ok(admitted >= LIMIT - 3 * 200 - 3, `admitted ${admitted} of ${LIMIT}`)
      await Promise.all(instances.map((instance) => instance.exit()))
    })
  }
})
