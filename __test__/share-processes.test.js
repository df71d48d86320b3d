'use strict'

// Several instances sharing one quota through a real store, each a real child process with its
// own client and its own KeyedQuotaClock (__test__/helpers/shared-worker.js): redis-server (through
// ioredis and node-redis) and the MongoDB wire-compatible server, started by the test. The store is
// stopped (SIGSTOP) and killed (SIGKILL) underneath them; instances are killed mid-drain and
// restarted.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { MongoClient } = require('mongodb')
const { startRedisServer } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { startInstance, stopFleet } = require('./helpers/shared-fleet.js')

const MONTH = { unit: 'month', timeZone: 'UTC' }
const DAY_MS = 86_400_000
// The background timers and store round trips on a loaded 2-core machine (CI shares machines; the
// suite must pass beside two CPU hogs): generous slack, and a timeoutMs long enough that a call
// that did not wait (under timeoutMs / 2) is told apart from one that waited for it.
const SLACK_MS = 2_000
const LOADED_TIMEOUT_MS = 1_000
// The tests of exactness on a healthy store: a timeoutMs no loaded machine reaches (the MongoDB
// test server is a JS process competing for the cores; three drains on it once waited over the
// default 300 ms beside two CPU hogs, ERR_STORE_UNAVAILABLE).
const HEALTHY_TIMEOUT_MS = 10_000

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

function sum(values) {
  return values.reduce((total, value) => total + value, 0)
}

/** Bytes of a file (one per admitted unit), 0 if it does not exist yet. */
function fileSize(file) {
  return fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0
}

describe('instances in several processes sharing one quota', () => {
  let redis
  let mongo
  let admin // an ioredis client to read records behind the instances' backs
  let mongoClient
  let work
  const dbName = `shared_processes_${process.pid}`

  before(async () => {
    ;[redis, mongo] = await Promise.all([startRedisServer(), startMongoServer()])
    admin = new Redis({ host: redis.host, port: redis.port, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    admin.on('error', () => {})
    mongoClient = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 10_000 })
    await mongoClient.connect()
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-shared-processes-'))
  })

  after(() => stopFleet({ redis, mongo, admin, mongoClient, work }))

  const clients = {
    ioredis: () => ({ client: 'ioredis', url: redis.url }),
    'node-redis': () => ({ client: 'node-redis', url: redis.url }),
    mongo: () => ({ client: 'mongo', url: mongo.uri, dbName }),
  }

  /** What the store has counted for (name, key) in the open month (undefined: no record). */
  async function storeCount(client, name, key) {
    const periodId = new Date().toISOString().slice(0, 7)
    if (client === 'mongo') {
      const doc = await mongoClient.db(dbName).collection('quota_shares').findOne({ name, key, periodId })
      return doc === null ? undefined : doc.count
    }
    const value = await admin.hget(`qcs:{${Buffer.byteLength(name)}:${name}:${Buffer.byteLength(key)}:${key}}:${periodId}`, 'c')
    return value === null ? undefined : Number(value)
  }

  for (const clientKind of ['ioredis', 'node-redis', 'mongo']) {
    test(`three processes draining one key admit exactly the limit (${clientKind})`, { timeout: 60_000 }, async () => {
      const name = freshName('drain')
      const config = { ...clients[clientKind](), share: { name, leaseUnits: 10, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS }, quota: { limit: 600, period: MONTH } }
      const instances = await Promise.all([startInstance(config), startInstance(config), startInstance(config)])
      // Paced (a 1 ms pause every 5 calls), so the three drains overlap even on a loaded machine.
      const drains = await Promise.all(instances.map((instance) => instance.call('drain', { key: 'tenant:42', pauseEvery: 5 })))
      for (const drain of drains) {
        assert.deepEqual(drain.errors, {})
        assert.equal(drain.denial.retryAfterBasis, 'wall-period')
        assert.equal(drain.denial.quotaRemaining, 0)
      }
      assert.equal(sum(drains.map((drain) => drain.admitted)), 600, `admitted ${drains.map((drain) => drain.admitted).join(' + ')}`)
      assert.ok(drains.filter((drain) => drain.admitted > 0).length >= 2, 'the instances shared the quota')
      assert.equal(await storeCount(clientKind, name, 'tenant:42'), 600)
      await Promise.all(instances.map((instance) => instance.exit()))
    })
  }

  // Contention is never an outage: calls racing for a key on a healthy store are decided, however
  // many rounds of store calls they take.
  for (const timeoutMs of [300, 2_000]) {
    test(`four processes with 20 concurrent calls each drain one key on a healthy Redis: no ERR_STORE_UNAVAILABLE (timeoutMs ${timeoutMs})`, { timeout: 120_000 }, async () => {
      const name = freshName('race')
      const limit = 4_000
      const leaseUnits = 10 // small slices: many store rounds per call near the end
      const config = { ...clients.ioredis(), share: { name, leaseUnits, timeoutMs, idleMs: 60_000 }, quota: { limit, period: MONTH } }
      const instances = await Promise.all([0, 1, 2, 3].map(() => startInstance(config)))
      const drains = await Promise.all(instances.map((instance) => instance.call('drain', { key: 'hot', concurrency: 20 })))
      assert.equal(sum(drains.map((drain) => drain.admitted)), limit, `admitted ${drains.map((drain) => drain.admitted).join(' + ')}`)
      for (const [i, instance] of instances.entries()) {
        const { store } = (await instance.call('stats')).stats
        const { ERR_STORE_UNAVAILABLE: unavailable = 0, ...others } = drains[i].errors
        assert.deepEqual(others, {})
        if (timeoutMs >= 2_000) assert.deepEqual([unavailable, store.errors, store.timeouts], [0, 0, 0], `store counters ${JSON.stringify(store)}`)
        // (A loaded machine may truly keep an answer past 300 ms: then the store counters say so.)
        else if (unavailable > 0) assert.ok(store.errors + store.timeouts > 0, `${unavailable} ERR_STORE_UNAVAILABLE with store counters ${JSON.stringify(store)}`)
      }
      assert.equal(await storeCount('ioredis', name, 'hot'), limit)
      await Promise.all(instances.map((instance) => instance.exit()))
    })
  }

  test('ioredis and node-redis instances share one record', { timeout: 60_000 }, async () => {
    const name = freshName('mixed')
    const share = { name, leaseUnits: 7, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS }
    const quota = { limit: 300, period: MONTH }
    const instances = await Promise.all([
      startInstance({ ...clients.ioredis(), share, quota }),
      startInstance({ ...clients['node-redis'](), share, quota }),
    ])
    const drains = await Promise.all(instances.map((instance) => instance.call('drain', { key: 'k', n: 2, pauseEvery: 5 })))
    // Two units at a time from odd slices: an instance left with one unit it cannot use gives it
    // back before it is denied, so none is lost between them.
    assert.equal(sum(drains.map((drain) => drain.admitted)), 300, `admitted ${drains.map((drain) => drain.admitted).join(' + ')}`)
    for (const instance of instances) assert.equal((await instance.call('close')).closed, true)
    assert.equal(await storeCount('ioredis', name, 'k'), 300)
    assert.equal((await instances[1].call('drain', { key: 'k', n: 1 })).admitted, 0)
    await Promise.all(instances.map((instance) => instance.exit()))
  })

  for (const clientKind of ['ioredis', 'mongo']) {
    test(`an instance killed mid-drain strands only what it held; the others admit the rest (${clientKind})`, { timeout: 60_000 }, async () => {
      const name = freshName('kill')
      const leaseUnits = 20
      const config = { ...clients[clientKind](), share: { name, leaseUnits, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS }, quota: { limit: 1000, period: MONTH } }
      const [victim, survivor] = await Promise.all([startInstance(config), startInstance(config)])
      const file = path.join(work, `${name}.admitted`)
      const draining = victim.call('drain', { key: 'tenant', file, pauseEvery: 5 }).catch(() => undefined)
      const deadline = Date.now() + 20_000
      while (fileSize(file) < 150 && Date.now() < deadline) await sleep(5)
      await victim.kill()
      await draining
      const admittedByVictim = fileSize(file)
      assert.ok(admittedByVictim >= 150 && admittedByVictim < 1000, `the victim admitted ${admittedByVictim}`)
      const rest = await survivor.call('drain', { key: 'tenant' })
      const stranded = 1000 - admittedByVictim - rest.admitted
      // What an instance holds for a key: at most one lease (a refill tops it up to one, never past
      // it); plus, here, the one admission the kill may catch between its decision and its record.
      assert.ok(stranded >= 0 && stranded <= leaseUnits + 1, `stranded ${stranded} (victim ${admittedByVictim}, survivor ${rest.admitted})`)
      assert.equal(await storeCount(clientKind, name, 'tenant'), 1000)
      await survivor.exit()
    })
  }

  for (const clientKind of ['node-redis', 'mongo']) {
    test(`a restarted instance continues from the store (${clientKind})`, { timeout: 60_000 }, async () => {
      const name = freshName('restart')
      const config = { ...clients[clientKind](), share: { name, leaseUnits: 25, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS }, quota: { limit: 400, period: MONTH } }
      const first = await startInstance(config)
      assert.equal((await first.call('drain', { key: 'acme', max: 130 })).admitted, 130)
      assert.equal((await first.call('close')).closed, true)
      assert.equal(await storeCount(clientKind, name, 'acme'), 130, 'close() gave every unused unit back')
      await first.exit()
      const second = await startInstance(config)
      const { decision } = await second.call('consume', { key: 'acme' })
      assert.equal(decision.allowed, true)
      assert.ok(decision.quotaRemaining <= 400 - 131, `quotaRemaining ${decision.quotaRemaining}`)
      const drain = await second.call('drain', { key: 'acme' })
      assert.equal(1 + drain.admitted, 270)
      await second.exit()
    })
  }

  test('unused units of an idle key go back to the store, and another instance can use them', { timeout: 30_000 }, async () => {
    const name = freshName('idle')
    const config = { ...clients.ioredis(), share: { name, leaseUnits: 50, idleMs: 300 }, quota: { limit: 100, period: MONTH } }
    const [idler, other] = await Promise.all([startInstance(config), startInstance(config)])
    assert.equal((await idler.call('consume', { key: 'k' })).decision.allowed, true)
    assert.ok((await storeCount('ioredis', name, 'k')) > 1, 'the first call reserved a slice')
    const deadline = Date.now() + 300 + 2 * SLACK_MS + 2_000
    while ((await storeCount('ioredis', name, 'k')) !== 1 && Date.now() < deadline) await sleep(20)
    assert.equal(await storeCount('ioredis', name, 'k'), 1, 'the idle instance gave back all but the unit it admitted')
    assert.equal((await other.call('drain', { key: 'k' })).admitted, 99)
    await Promise.all([idler.exit(), other.exit()])
  })

  test('the idle timer never keeps an instance alive', { timeout: 30_000 }, async () => {
    const name = freshName('alive')
    const script = `
      const Redis = require('ioredis')
      const { KeyedQuotaClock } = require(${JSON.stringify(path.join(__dirname, '..', 'index.js'))})
      const { redisStore } = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'shared.js'))})
      ;(async () => {
        const redis = new Redis(${JSON.stringify(redis.url)})
        const limiter = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore',
          quota: { limit: 1000, period: { unit: 'month', timeZone: 'UTC' } },
          share: { store: redisStore(redis), name: ${JSON.stringify(name)}, idleMs: 600000 } })
        const decision = await limiter.consume('k')
        await redis.quit()
        console.log(JSON.stringify(decision.allowed))
      })()`
    const started = Date.now()
    const node = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let output = ''
    node.stdout.on('data', (chunk) => (output += chunk))
    const code = await new Promise((resolve) => node.once('exit', resolve))
    assert.equal(code, 0)
    assert.equal(output.trim(), 'true')
    assert.ok(Date.now() - started < 10_000, 'the process exited on its own, long before idleMs')
  })

  describe('the store stopped (SIGSTOP) and killed (SIGKILL)', () => {
    const stopStore = {
      ioredis: () => redis.pause(),
      'node-redis': () => redis.pause(),
      mongo: () => process.kill(mongo.serverPid(), 'SIGSTOP'),
    }
    const continueStore = {
      ioredis: () => redis.resume(),
      'node-redis': () => redis.resume(),
      mongo: () => process.kill(mongo.serverPid(), 'SIGCONT'),
    }
    for (const clientKind of ['ioredis', 'node-redis', 'mongo']) {
      test(`stopped: covered calls go on, uncovered ones reject ERR_STORE_UNAVAILABLE within timeoutMs, nothing queues; a late answer is kept (${clientKind})`, { timeout: 60_000 }, async () => {
        const name = freshName('sigstop')
        const timeoutMs = LOADED_TIMEOUT_MS
        const config = { ...clients[clientKind](), share: { name, leaseUnits: 100, idleMs: 60_000, timeoutMs }, quota: { limit: 10_000, period: MONTH } }
        const instance = await startInstance(config)
        assert.equal((await instance.call('consume', { key: 'covered' })).decision.allowed, true) // holds 99 of a 100-unit lease
        stopStore[clientKind]()
        try {
          const covered = await instance.call('consume', { key: 'covered', n: 10 })
          assert.equal(covered.decision.allowed, true)
          assert.ok(covered.elapsedMs < timeoutMs / 2, `a covered call waited ${covered.elapsedMs} ms`)
          const uncovered = await instance.call('consume', { key: 'new-key' })
          assert.equal(uncovered.error?.code, 'ERR_STORE_UNAVAILABLE', JSON.stringify(uncovered))
          assert.match(uncovered.error.message, new RegExp(name))
          assert.ok(uncovered.elapsedMs >= timeoutMs - 20 && uncovered.elapsedMs < timeoutMs + SLACK_MS, `waited ${uncovered.elapsedMs} ms`)
          // More calls for the key while its store call hangs: refused at once.
          const more = await instance.call('consumeMany', { key: 'new-key', count: 20 })
          assert.deepEqual(new Set(more.results.map((result) => result.code)), new Set(['ERR_STORE_UNAVAILABLE']))
          assert.ok(Math.max(...more.elapsedMs) < timeoutMs / 2, `queued: ${Math.max(...more.elapsedMs)} ms`)
          // The covered key is still decided locally.
          assert.equal((await instance.call('consume', { key: 'covered', n: 5 })).decision.allowed, true)
        } finally {
          continueStore[clientKind]()
        }
        // The hung store call answers now, and its slice is credited to the key: the next call is covered.
        const deadline = Date.now() + 5_000
        while ((await storeCount(clientKind, name, 'new-key')) !== 100 && Date.now() < deadline) await sleep(20)
        await sleep(50)
        const late = await instance.call('consume', { key: 'new-key' })
        assert.equal(late.decision?.allowed, true, JSON.stringify(late))
        assert.ok(late.elapsedMs < timeoutMs / 2, `the late answer was not kept: the call waited ${late.elapsedMs} ms`)
        assert.equal(await storeCount(clientKind, name, 'new-key'), 100, 'one reservation of the lease, from the hung call, and no more')
        assert.equal((await instance.call('close')).closed, true)
        assert.equal(await storeCount(clientKind, name, 'new-key'), 1)
        await instance.exit()
      })
    }

    test('stopped, failOpen: uncovered calls are admitted at once after timeoutMs and charged to the store when it is back', { timeout: 60_000 }, async () => {
      const name = freshName('failopen')
      const config = { ...clients.ioredis(), share: { name, leaseUnits: 10, idleMs: 60_000, timeoutMs: 200, failOpen: true }, quota: { limit: 1000, period: MONTH } }
      const instance = await startInstance(config)
      redis.pause()
      let admitted
      try {
        const first = await instance.call('consume', { key: 'k', n: 3 })
        assert.equal(first.decision?.allowed, true, JSON.stringify(first))
        assert.ok(first.elapsedMs < 200 + SLACK_MS)
        const more = await instance.call('consumeMany', { key: 'k', n: 2, count: 5 })
        assert.ok(more.results.every((result) => result.allowed), JSON.stringify(more.results))
        admitted = 3 + 10
      } finally {
        redis.resume()
      }
      // The next store call that succeeds for the key carries the charge.
      const deadline = Date.now() + 10_000
      let count
      do {
        await instance.call('drain', { key: 'k', max: 1 })
        admitted += 1
        count = await storeCount('ioredis', name, 'k')
      } while ((count === undefined || count < admitted) && Date.now() < deadline)
      assert.ok(count >= admitted, `the store counted ${count}, the instance admitted ${admitted}`)
      await instance.call('close')
      assert.equal(await storeCount('ioredis', name, 'k'), admitted, 'after close the store holds exactly what was admitted')
      await instance.exit()
    })

    test('killed: uncovered calls reject ERR_STORE_UNAVAILABLE within timeoutMs, covered ones go on; a restarted store serves again', { timeout: 60_000 }, async () => {
      const name = freshName('sigkill')
      const timeoutMs = LOADED_TIMEOUT_MS
      const configs = [clients.ioredis(), clients['node-redis']()].map((client) => ({
        ...client,
        share: { name, leaseUnits: 100, idleMs: 60_000, timeoutMs },
        quota: { limit: 10_000, period: MONTH },
      }))
      const instances = await Promise.all(configs.map(startInstance))
      for (const instance of instances) assert.equal((await instance.call('consume', { key: 'covered' })).decision.allowed, true)
      await redis.kill()
      try {
        for (const instance of instances) {
          const covered = await instance.call('consume', { key: 'covered', n: 10 })
          assert.equal(covered.decision?.allowed, true, JSON.stringify(covered))
          assert.ok(covered.elapsedMs < timeoutMs / 2, `a covered call waited ${covered.elapsedMs} ms`)
          const uncovered = await instance.call('consume', { key: `other-${instance.pid}` })
          assert.equal(uncovered.error?.code, 'ERR_STORE_UNAVAILABLE', JSON.stringify(uncovered))
          assert.ok(uncovered.elapsedMs < timeoutMs + SLACK_MS, `waited ${uncovered.elapsedMs} ms`)
        }
      } finally {
        await redis.restart()
      }
      for (const instance of instances) {
        const deadline = Date.now() + 10_000
        let reply
        do {
          await sleep(50)
          reply = await instance.call('consume', { key: `after-${instance.pid}` })
        } while (reply.error && Date.now() < deadline)
        assert.equal(reply.decision?.allowed, true, JSON.stringify(reply))
      }
      await Promise.all(instances.map((instance) => instance.exit()))
    })
  })

  test('a period change: at the boundary every instance moves to a fresh quota, and each period is exact', { timeout: 60_000 }, async () => {
    const name = freshName('period')
    const nowMs = Date.now()
    const config = { ...clients.ioredis(), manualWallMs: nowMs, share: { name, leaseUnits: 10, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS }, quota: { limit: 200, period: { unit: 'day', timeZone: 'UTC' } } }
    const instances = await Promise.all([startInstance(config), startInstance(config)])
    const today = await Promise.all(instances.map((instance) => instance.call('drain', { key: 'k' })))
    assert.equal(sum(today.map((drain) => drain.admitted)), 200)
    await Promise.all(instances.map((instance) => instance.call('advance', { ms: DAY_MS })))
    const tomorrow = await Promise.all(instances.map((instance) => instance.call('drain', { key: 'k' })))
    assert.equal(sum(tomorrow.map((drain) => drain.admitted)), 200)
    const day = (ms) => new Date(ms).toISOString().slice(0, 10)
    const recordKey = (periodId) => `qcs:{${name.length}:${name}:1:k}:${periodId}`
    assert.equal(await admin.hget(recordKey(day(nowMs)), 'c'), '200')
    assert.equal(await admin.hget(recordKey(day(nowMs + DAY_MS)), 'c'), '200')
    const tomorrowEndMs = Date.parse(`${day(nowMs + DAY_MS)}T00:00:00Z`) + DAY_MS
    assert.equal(Number(await admin.call('PEXPIRETIME', recordKey(day(nowMs + DAY_MS)))), tomorrowEndMs, 'the record expires when its period ends')
    await Promise.all(instances.map((instance) => instance.exit()))
  })

  for (const clientKind of ['ioredis', 'mongo']) {
    test(`per-key limits from policy are shared exactly (${clientKind})`, { timeout: 60_000 }, async () => {
      const name = freshName('policy')
      const policy = { gold: { quota: { limit: 300, period: MONTH } }, free: { quota: { limit: 30, period: MONTH } }, local: { quota: null } }
      const config = { ...clients[clientKind](), policy, share: { name, leaseUnits: 10, idleMs: 60_000, timeoutMs: HEALTHY_TIMEOUT_MS }, quota: { limit: 100, period: MONTH } }
      const instances = await Promise.all([startInstance(config), startInstance(config)])
      for (const [key, limit] of [['gold', 300], ['free', 30], ['plain', 100]]) {
        const drains = await Promise.all(instances.map((instance) => instance.call('drain', { key })))
        assert.equal(sum(drains.map((drain) => drain.admitted)), limit, key)
        assert.equal(await storeCount(clientKind, name, key), limit, key)
      }
      // A key without a quota is decided locally: no record.
      assert.equal((await instances[0].call('drain', { key: 'local', max: 50 })).admitted, 50)
      assert.equal(await storeCount(clientKind, name, 'local'), undefined)
      await Promise.all(instances.map((instance) => instance.exit()))
    })
  }

  test('a plan change: two limits for one name, each reservation judged against the reserving instance’s limit', { timeout: 60_000 }, async () => {
    const name = freshName('plan')
    const share = { name, leaseUnits: 10, idleMs: 60_000 }
    const oldPlan = await startInstance({ ...clients.ioredis(), share, quota: { limit: 100, period: MONTH } })
    const newPlan = await startInstance({ ...clients['node-redis'](), share, quota: { limit: 250, period: MONTH } })
    // The old plan's instance first: it admits up to its limit; the new plan's instance the rest of its own.
    assert.equal((await oldPlan.call('drain', { key: 'first' })).admitted, 100)
    assert.equal((await newPlan.call('drain', { key: 'first' })).admitted, 150)
    // The new plan's instance first, past the old limit: the old plan's instance gets nothing.
    assert.equal((await newPlan.call('drain', { key: 'second', max: 120 })).admitted, 120)
    await newPlan.call('close')
    const refused = await oldPlan.call('drain', { key: 'second' })
    assert.equal(refused.admitted, 0)
    assert.equal(refused.denial.retryAfterBasis, 'wall-period')
    assert.equal((await newPlan.call('drain', { key: 'second' })).admitted, 130)
    assert.equal(await storeCount('ioredis', name, 'second'), 250)
    await Promise.all([oldPlan.exit(), newPlan.exit()])
  })
})
