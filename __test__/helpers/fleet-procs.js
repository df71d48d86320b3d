'use strict'

// The parent's side of the fleet-bucket scenarios: several child processes running
// helpers/fleet-worker.js against one real store, each logging its calls to a file of its own.
//
//   const fleet = await startFleet({ count, store, limiter, share, policy?, dir, label })
//     store: { client, url?, nodes?, dbName? } (fleet-worker.js's config fields)
//     -> { name, share, workers, logs, add(overrides?) (one more worker: the config's fields
//          overridden, e.g. { share: { ...fleet.share, failOpen: true } }), calls(), units(key?),
//          stopAll(), killAll() }
//   await roundRobin(workers, key, perSecond, { delayMs?, n? })  arrivals at perSecond in all,
//       dealt to the workers in turn (worker p takes arrivals p, p + N, ...); resolves to the start (ns)
//   nowMs()  process.hrtime.bigint() in ms (the clock of the logs)
//   waitUntil(check, { timeoutMs, what })  polls check() every 20 ms
//
// A test file's servers and fleets, in a describe():
//   const servers = useFleetServers(label, { mongo?, cluster?, stepped?, admin?, limiter, share? })
//     before its tests: servers.redis (a redis-server), servers.work (a folder for the logs), and
//     as asked servers.mongo (the MongoDB server, servers.dbName), servers.cluster (a three-node
//     Redis Cluster), servers.stepped (a redis-server whose clock the tests step), servers.admin
//     (the operator's ioredis client of servers.redis); after them, all stopped (stopFleet)
//   servers.store(kind, url?)  a worker's store: 'ioredis' | 'node-redis' (on servers.redis, or
//     on url), 'ioredis-cluster' | 'node-redis-cluster', 'mongo'
//   servers.freshName(label)  a name no other test of the run uses
//   servers.fleetOf(store, label, { count, limiter?, share?, policy? })  startFleet under a fresh
//     name; store: a kind or a store; limiter and share over the file's, over idleMs 60,000 and
//     timeoutMs 3,000 (a healthy store is never that slow, a loaded machine and the Python
//     MongoDB server included, so an ERR_STORE_UNAVAILABLE in a healthy scenario is a defect)

const { after, before } = require('node:test')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { startWorker, stopFleet } = require('./shared-fleet.js')
const { readCalls, admittedUnits } = require('./fleet-check.js')
const { startRedisServer, startRedisCluster } = require('./redis-server.js')
const { startMongoServer } = require('./mongo-server.js')

const WORKER = path.join(__dirname, 'fleet-worker.js')
const nowMs = () => Number(process.hrtime.bigint()) / 1e6
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

async function startFleet({ count, store, limiter, share, policy, dir, label }) {
  const workers = []
  const logs = []
  const fleet = {
    name: share?.name,
    share,
    workers,
    logs,
    async add(overrides = {}) {
      const index = logs.length // workers[i] writes logs[i], whichever is ready first
      const log = path.join(dir, `${label}-${index}.log`)
      logs.push(log)
      const worker = await startWorker(WORKER, { ...store, limiter, share, policy, log, ...overrides })
      worker.exited.then(() => (worker.gone = true))
      worker.log = log
      workers[index] = worker
      return worker
    },
    calls: () => readCalls(logs),
    units: (key) => admittedUnits(readCalls(logs), key),
    /** Stops every live worker's traffic; resolves to each one's counts (undefined for one gone). */
    stopAll: () => Promise.all(workers.map((worker) => (worker.gone ? undefined : worker.call('stop').then(({ counts }) => counts, () => undefined)))),
    async killAll() {
      await Promise.all(workers.map((worker) => worker.kill()))
    },
  }
  await Promise.all(Array.from({ length: count }, () => fleet.add()))
  return fleet
}

async function roundRobin(workers, key, perSecond, { delayMs = 300, n = 1 } = {}) {
  const startNs = process.hrtime.bigint() + BigInt(delayMs) * 1_000_000n
  const each = perSecond / workers.length
  await Promise.all(workers.map((worker, p) => worker.call('traffic', { key, n, perSecond: each, phase: p / workers.length, startNs: String(startNs) })))
  return Number(startNs) / 1e6
}

async function waitUntil(check, { timeoutMs = 10_000, what = 'the condition' } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)
    await sleep(20)
  }
}

function useFleetServers(label, { mongo = false, cluster = false, stepped = false, admin = false, limiter, share = {} }) {
  let unique = 0
  const servers = {
    redis: undefined,
    mongo: undefined,
    cluster: undefined,
    stepped: undefined,
    admin: undefined,
    work: undefined,
    dbName: `fleet_${label}_${process.pid}`,
    freshName: (name) => `${label}-${name}-${process.pid}-${++unique}`,
    store(kind, url = servers.redis.url) {
      if (kind === 'ioredis' || kind === 'node-redis') return { client: kind, url }
      if (kind === 'mongo') return { client: kind, url: servers.mongo.uri, dbName: servers.dbName }
      return { client: kind, nodes: servers.cluster.rootNodes }
    },
    fleetOf(store, name, { count, limiter: limits = limiter, share: terms = {}, policy } = {}) {
      const fresh = servers.freshName(name)
      return startFleet({
        count,
        store: typeof store === 'string' ? servers.store(store) : store,
        limiter: limits,
        policy,
        share: { name: fresh, idleMs: 60_000, timeoutMs: 3_000, ...share, ...terms },
        dir: servers.work,
        label: fresh,
      })
    },
  }
  before(async () => {
    const asked = (wanted, start) => (wanted ? start() : undefined)
    ;[servers.redis, servers.mongo, servers.cluster, servers.stepped] = await Promise.all([
      startRedisServer(),
      asked(mongo, startMongoServer),
      asked(cluster, startRedisCluster),
      asked(stepped, () => startRedisServer({ fakeTime: true })),
    ])
    if (admin) {
      servers.admin = new Redis({ host: servers.redis.host, port: servers.redis.port, maxRetriesPerRequest: null, retryStrategy: () => 50 })
      servers.admin.on('error', () => {})
    }
    servers.work = fs.mkdtempSync(path.join(os.tmpdir(), `qcs-fleet-${label}-`))
  })
  after(() => stopFleet({ ...servers, servers: [servers.cluster, servers.stepped] }))
  return servers
}

module.exports = { startFleet, roundRobin, waitUntil, nowMs, sleep, useFleetServers }
