'use strict'

// One instance of a service with a shared KeyedQuotaClock, as a child process of the
// multi-process tests (__test__/share-processes.test.js): it connects its own client to the real
// store, makes the limiter, and answers the parent's commands over IPC.
//
//   fork(__filename, [JSON.stringify(config)])  config: { client: 'ioredis' | 'node-redis' | 'mongo',
//     url, dbName?, share: { name, leaseUnits?, idleMs?, timeoutMs?, failOpen? },
//     quota: { limit, period }, policy?: { [key]: KeyPolicy }, manualWallMs?: number }
//
// Commands ({ id, op, ... }; every reply is { id, ... }):
//   drain { key, n?, max?, file?, pauseEvery?, concurrency?, maxErrors? }  consume until a quota
//       denial (or max admitted, or more than maxErrors (default 1000) errors, each followed by a
//       1 ms pause); with `file`, one byte is written to it per admitted call, synchronously, so a
//       SIGKILL loses none; pauseEvery: a 1 ms pause after that many calls (a slower drain);
//       concurrency: that many such loops at once (each ends at its own quota denial)
//       -> { admitted, denial: decision | null, errors: { code: count } }
//   consume { key, n? }   -> { decision, elapsedMs } or { error: { code, message, cause }, elapsedMs }
//   consumeMany { key, n?, count }  that many calls at once -> { results: [ { allowed } | { code }, ... ], elapsedMs: [...] }
//   status { key }        -> { status }
//   stats                 -> { stats } (the limiter's stats())
//   advance { ms }        the manual clock moves (needs manualWallMs)
//   block { key, forMs }, unblock { key }   the limiter's block and unblock -> { answer }
//   close                 -> { closed: true } or { error }
//   exit                  closes the client and exits (no close() of the limiter)
// The worker sends { ready: true } once it can take commands.

const fs = require('node:fs')
const { performance } = require('node:perf_hooks')
const { KeyedQuotaClock, manualClock } = require('../../index.js')
const { redisStore, mongoStore } = require('../../lib/shared.js')
const { errorInfo, serveCommands } = require('./worker-commands.js')

const config = JSON.parse(process.argv[2])

async function connect() {
  if (config.client === 'ioredis') {
    const Redis = require('ioredis')
    const client = new Redis(config.url, { lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    client.on('error', () => {}) // reconnects by itself; the limiter reports unavailability
    await client.connect()
    return { store: redisStore(client, config.storeOptions), quit: () => client.disconnect() }
  }
  if (config.client === 'ioredis-cluster') {
    const Redis = require('ioredis')
    const client = new Redis.Cluster(config.nodes, { lazyConnect: true, redisOptions: { maxRetriesPerRequest: null } })
    client.on('error', () => {})
    await client.connect()
    return { store: redisStore(client, config.storeOptions), quit: () => client.disconnect() }
  }
  if (config.client === 'node-redis') {
    const { createClient } = require('redis')
    const client = createClient({ url: config.url, socket: { reconnectStrategy: () => 50 } })
    client.on('error', () => {})
    await client.connect()
    return { store: redisStore(client, config.storeOptions), quit: () => client.destroy() }
  }
  if (config.client === 'mongo') {
    const { MongoClient } = require('mongodb')
    const client = new MongoClient(config.url, { serverSelectionTimeoutMS: 2_000 })
    await client.connect()
    return { store: mongoStore(client.db(config.dbName), config.storeOptions), quit: () => client.close(true) }
  }
  throw new Error(`unknown client ${config.client}`)
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

;(async () => {
  const { store, quit } = await connect()
  const clock = config.manualWallMs === undefined ? undefined : manualClock({ wallMs: config.manualWallMs })
  const policy = config.policy === undefined ? undefined : (key) => config.policy[key]
  const limiter = new KeyedQuotaClock({
    capacity: 1_000_000,
    refillPerSecond: 1_000_000,
    suspendPolicy: 'ignore',
    quota: config.quota,
    ...(clock === undefined ? {} : { clock }),
    ...(policy === undefined ? {} : { policy }),
    share: { store, ...config.share },
    ...(config.block === undefined ? {} : { block: config.block }),
  })

  const commands = {
    async drain({ key, n = 1, max = Infinity, file, pauseEvery, concurrency = 1, maxErrors = 1000 }) {
      const fd = file === undefined ? undefined : fs.openSync(file, 'a')
      const errors = {}
      let admitted = 0
      let denial = null
      let calls = 0
      const loop = async () => {
        while (admitted < max) {
          if (pauseEvery !== undefined && ++calls % pauseEvery === 0) await sleep(1)
          let decision
          try {
            decision = await limiter.consume(key, n)
          } catch (error) {
            errors[error.code] = (errors[error.code] ?? 0) + 1
            if (Object.values(errors).reduce((a, b) => a + b, 0) > maxErrors) break
            await sleep(1)
            continue
          }
          if (decision.allowed) {
            admitted += n
            if (fd !== undefined) fs.writeSync(fd, 'x'.repeat(n))
          } else if (decision.retryAfterBasis === 'wall-period') {
            denial = decision
            break
          }
        }
      }
      await Promise.all(Array.from({ length: concurrency }, loop))
      if (fd !== undefined) fs.closeSync(fd)
      return { admitted, denial, errors }
    },
    async consume({ key, n = 1 }) {
      const started = performance.now()
      try {
        const decision = await limiter.consume(key, n)
        return { decision, elapsedMs: performance.now() - started }
      } catch (error) {
        return { error: errorInfo(error), elapsedMs: performance.now() - started }
      }
    },
    async consumeMany({ key, n = 1, count }) {
      const started = performance.now()
      const elapsedMs = []
      const results = await Promise.all(
        Array.from({ length: count }, () =>
          limiter.consume(key, n).then(
            (decision) => {
              elapsedMs.push(performance.now() - started)
              return { allowed: decision.allowed, basis: decision.retryAfterBasis }
            },
            (error) => {
              elapsedMs.push(performance.now() - started)
              return { code: error.code }
            },
          ),
        ),
      )
      return { results, elapsedMs }
    },
    async block({ key, forMs }) {
      return { answer: limiter.block(key, forMs) ?? null }
    },
    async unblock({ key }) {
      return { answer: limiter.unblock(key) }
    },
    async advance({ ms }) {
      clock.advance(ms)
      return {}
    },
  }

  serveCommands(limiter, quit, commands)
})().catch((error) => {
  console.error(error)
  process.exit(1)
})
