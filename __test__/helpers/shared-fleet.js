'use strict'
// What the tests of shared quotas with several limiters share:
//
//   const servers = useStoreServers('label')  // in a describe(): starts redis-server and the
//       MongoDB server before its tests and stops them (and every client made) after;
//       servers.redis, servers.mongo, servers.mongoClient, servers.dbName,
//       servers.makeStore(kind): a store on a new client of its own ('ioredis' | 'node-redis' | 'mongo')
//   limiterOn(store, name, { limit, leaseUnits?, idleMs? })  a shared limiter: a big bucket, a monthly (UTC) quota
//   drain(limiter, key, max?)  consumes one unit at a time until a quota denial (or max); the units admitted
//   startInstance(config)  a child process running helpers/shared-worker.js (startWorker(script,
//       config): another worker script, e.g. helpers/fleet-worker.js); resolves to
//       { pid, exited, call(op, args), kill(), exit() } once it is ready; killInstances() kills those left

const { after, before } = require('node:test')
const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { MongoClient } = require('mongodb')
const { KeyedQuotaClock } = require('../..')
const { redisStore, mongoStore } = require('../../lib/shared.js')
const { startRedisServer } = require('./redis-server.js')
const { startMongoServer } = require('./mongo-server.js')

const MONTH = { unit: 'month', timeZone: 'UTC' }
const WORKER = path.join(__dirname, 'shared-worker.js')

function useStoreServers(label) {
  const closers = []
  const servers = {
    redis: undefined,
    mongo: undefined,
    mongoClient: undefined,
    dbName: `${label}_${process.pid}`,
    async makeStore(kind) {
      if (kind === 'ioredis') {
        const client = new Redis({ host: servers.redis.host, port: servers.redis.port, lazyConnect: true })
        await client.connect()
        closers.push(() => client.quit())
        return redisStore(client)
      }
      if (kind === 'node-redis') {
        const client = createClient({ url: servers.redis.url })
        await client.connect()
        closers.push(() => client.close())
        return redisStore(client)
      }
      const client = new MongoClient(servers.mongo.uri, { serverSelectionTimeoutMS: 10_000 })
      await client.connect()
      closers.push(() => client.close())
      return mongoStore(client.db(servers.dbName))
    },
  }
  before(async () => {
    ;[servers.redis, servers.mongo] = await Promise.all([startRedisServer(), startMongoServer()])
    servers.mongoClient = new MongoClient(servers.mongo.uri, { serverSelectionTimeoutMS: 10_000 })
    await servers.mongoClient.connect()
  })
  after(async () => {
    await Promise.allSettled(closers.map((close) => close()))
    await servers.mongoClient?.close()
    await Promise.allSettled([servers.redis?.stop(), servers.mongo?.stop()])
  })
  return servers
}

function limiterOn(store, name, { limit, leaseUnits, idleMs = 60_000 }) {
  return new KeyedQuotaClock({
    capacity: 1_000_000,
    refillPerSecond: 1_000_000,
    suspendPolicy: 'ignore',
    quota: { limit, period: MONTH },
    share: { store, name, leaseUnits, idleMs },
  })
}

async function drain(limiter, key, max = Infinity) {
  let admitted = 0
  while (admitted < max) {
    const decision = await limiter.consume(key)
    if (!decision.allowed) {
      assert.equal(decision.retryAfterBasis, 'wall-period')
      break
    }
    admitted++
  }
  return admitted
}

const children = new Set()

/** (One argument: `configs.map(startInstance)` passes an index second.) */
function startInstance(config) {
  return startWorker(WORKER, config)
}

function startWorker(worker, config) {
  const child = fork(worker, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  children.add(child)
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  exited.then(() => children.delete(child))
  const waiting = new Map()
  let nextId = 0
  child.on('message', (message) => {
    const resolve = waiting.get(message.id)
    if (resolve) {
      waiting.delete(message.id)
      resolve(message)
    }
  })
  const instance = {
    pid: child.pid,
    exited,
    call(op, args = {}) {
      const id = ++nextId
      return new Promise((resolve, reject) => {
        waiting.set(id, resolve)
        exited.then(({ code, signal }) => reject(new Error(`instance ${child.pid} exited (${code ?? signal}) during ${op}`)))
        child.send({ id, op, ...args })
      })
    },
    async kill() {
      child.kill('SIGKILL')
      await exited
    },
    async exit() {
      child.send({ id: 0, op: 'exit' })
      await exited
    },
  }
  return new Promise((resolve, reject) => {
    child.once('message', (message) => (message.ready ? resolve(instance) : reject(new Error(`unexpected ${JSON.stringify(message)}`))))
    exited.then(({ code, signal }) => reject(new Error(`instance exited before it was ready (${code ?? signal})`)))
  })
}

function killInstances() {
  for (const child of children) child.kill('SIGKILL')
}

/**
 * The end of a file of multi-process tests: its workers killed, a paused redis-server and MongoDB
 * server resumed, the admin clients closed, every server stopped, the work folder removed.
 */
async function stopFleet({ redis, mongo, servers = [], admin, mongoClient, work }) {
  killInstances()
  redis?.resume()
  try {
    if (mongo) process.kill(mongo.serverPid(), 'SIGCONT')
  } catch {}
  admin?.disconnect()
  await mongoClient?.close()
  await Promise.allSettled([redis, mongo, ...servers].map((server) => server?.stop()))
  if (work) fs.rmSync(work, { recursive: true, force: true })
}

module.exports = { MONTH, useStoreServers, limiterOn, drain, startInstance, startWorker, killInstances, stopFleet }
