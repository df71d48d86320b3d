'use strict'

// One instance of a service whose keys share one bucket for the fleet (`share.bucket`),
// as a child process of __test__/share-fleet-bucket.test.js and benchmark/fleet.js: it connects
// its own client to the real store, makes the limiter, sends it the traffic the parent asks for and
// logs every call.
//
//   fork(__filename, [JSON.stringify(config)])  config: {
//     client: 'ioredis' | 'node-redis' | 'ioredis-cluster' | 'node-redis-cluster' | 'mongo',
//     url (standalone Redis, MongoDB), nodes: [{ host, port }] (a cluster), dbName (MongoDB),
//     limiter: { capacity, refillPerSecond, initialTokens?, quota? }, policy?: { [key]: KeyPolicy },
//     share: { name, leaseMs?, idleMs?, timeoutMs?, failOpen? } (bucket: true unless it says), or null
//       with client 'none': a local limiter, each process its own bucket (the check must fail it),
//     log: a file: one line per call, appended with a synchronous write as the call settles, so a
//       SIGKILL loses at most the calls still waiting for their answer }
//
// A log line: `<key, as JSON in base64url (lone surrogates included)> <lo ns> <hi ns> <n> <outcome> .` — lo is process.hrtime.bigint()
// read just before `consume`, hi just after it settled (the host's one monotonic clock, the same in
// every process); outcome `A` admitted, `D` denied, or the error's code; the final `.` marks a
// line written whole. helpers/fleet-check.js reads them.
//
// Commands ({ id, op, ... }; every reply is { id, ... }):
//   traffic { key, perSecond, n?, startNs?, phase?, durationMs? }  calls consume(key, n) at
//       startNs + (k + phase) / perSecond s for k = 0, 1, ... (startNs: a process.hrtime.bigint()
//       as a string, default now; one clock for every process of the host, so the parent can
//       interleave processes: round-robin is phase p/N in each of N processes at rate/N), without
//       waiting for earlier calls to settle, until stopped (or durationMs) -> {}
//   stop { key? }        stops the traffic (of one key, or all) and waits for its calls to settle
//                        -> { counts }
//   counts               -> { counts: { [key]: { calls, admitted, denied, bases: { retryAfterBasis: n },
//                           errors: { code: n } } } }
//   consume { key, n? }  one call, logged -> { decision } or { error: { code, message } }
//   burst { key, count, n? }  count calls of consume(key, n) at once (none awaited before the
//                        next is made), logged -> { admitted }
//   busy { ms }          blocks the event loop for ms (a busy wait) -> {}
//   status { key }       -> { status }
//   stats                -> { stats } (the limiter's stats())
//   close                -> { closed: true } or { error }
//   exit                 exits at once (no close(): its slices stay out until written off)
// The worker sends { ready: true } once it can take commands.

const fs = require('node:fs')
const { KeyedQuotaClock } = require('../../index.js')
const { redisStore, mongoStore } = require('../../lib/shared.js')
const { errorInfo, serveCommands } = require('./worker-commands.js')

const config = JSON.parse(process.argv[2])
const now = () => process.hrtime.bigint()

const CLIENTS = {
  async ioredis({ url }) {
    const Redis = require('ioredis')
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: null, retryStrategy: () => 50 })
    client.on('error', () => {}) // it reconnects by itself; the limiter reports the outage
    await client.connect()
    return { client, quit: () => client.disconnect() }
  },
  async 'ioredis-cluster'({ nodes }) {
    const Redis = require('ioredis')
    const client = new Redis.Cluster(nodes, { lazyConnect: true, clusterRetryStrategy: () => 50, redisOptions: { maxRetriesPerRequest: null } })
    client.on('error', () => {})
    await client.connect()
    return { client, quit: () => client.disconnect() }
  },
  async 'node-redis'({ url }) {
    const { createClient } = require('redis')
    const client = createClient({ url, socket: { reconnectStrategy: () => 50 } })
    client.on('error', () => {})
    await client.connect()
    return { client, quit: () => client.destroy() }
  },
  async 'node-redis-cluster'({ nodes }) {
    const { createCluster } = require('redis')
    const client = createCluster({ rootNodes: nodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })), defaults: { socket: { reconnectStrategy: () => 50 } } })
    client.on('error', () => {})
    await client.connect()
    return { client, quit: () => client.destroy() }
  },
  async mongo({ url, dbName }) {
    const { MongoClient } = require('mongodb')
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 2_000 })
    await client.connect()
    return { store: mongoStore(client.db(dbName)), quit: () => client.close(true) }
  },
}

/** `bucket: true` unless the config says `bucket: false` (then the option is left out: the quota alone is shared). */
function shareOptions(store, { bucket = true, ...share }) {
  return { store, ...share, ...(bucket ? { bucket } : {}) }
}

async function connect() {
  if (config.client === 'none') return { store: undefined, quit: async () => {} }
  const open = CLIENTS[config.client]
  if (!open) throw new Error(`unknown client ${config.client}`)
  const { client, store, quit } = await open(config)
  return { store: store ?? redisStore(client), quit }
}

;(async () => {
  const { store, quit } = await connect()
  const policy = config.policy === undefined ? undefined : (key) => config.policy[key]
  const limiter = new KeyedQuotaClock({
    suspendPolicy: 'ignore',
    ...config.limiter,
    ...(policy === undefined ? {} : { policy }),
    ...(config.share === null ? {} : { share: shareOptions(store, config.share) }),
  })
  const log = fs.openSync(config.log, 'a')
  const counts = {}
  const countsOf = (key) => (counts[key] ??= { calls: 0, admitted: 0, denied: 0, bases: {}, errors: {} })

  /** One logged call; resolves to { decision } or { error }. */
  function call(key, n) {
    const lo = now()
    const tally = countsOf(key)
    tally.calls++
    const settled = (outcome, result) => {
      fs.writeSync(log, `${Buffer.from(JSON.stringify(key)).toString('base64url')} ${lo} ${now()} ${n} ${outcome} .\n`)
      return result
    }
    let pending
    try {
      pending = limiter.consume(key, n)
    } catch (error) {
      pending = Promise.reject(error)
    }
    return pending.then(
      (decision) => {
        if (decision.allowed) tally.admitted += n
        else {
          tally.denied++
          tally.bases[decision.retryAfterBasis] = (tally.bases[decision.retryAfterBasis] ?? 0) + 1
        }
        return settled(decision.allowed ? 'A' : 'D', { decision })
      },
      (error) => {
        const code = String(error?.code ?? error?.name ?? 'Error')
        tally.errors[code] = (tally.errors[code] ?? 0) + 1
        return settled(code, { error: { ...errorInfo(error), code } })
      },
    )
  }

  const flows = new Map() // key -> { timer, pending: Set<Promise>, stopped }

  function startTraffic({ key, perSecond, n = 1, startNs, phase = 0, durationMs }) {
    stopFlow(key)
    const start = startNs === undefined ? now() : BigInt(startNs)
    const periodNs = 1e9 / perSecond
    const end = durationMs === undefined ? Infinity : Number(start) + durationMs * 1e6
    const flow = { timer: undefined, pending: new Set(), stopped: false }
    flows.set(key, flow)
    let k = 0
    const dueAt = () => Number(start) + (k + phase) * periodNs
    const tick = () => {
      if (flow.stopped) return
      const t = Number(now())
      while (dueAt() <= t && dueAt() < end) {
        k++
        const p = call(key, n)
        flow.pending.add(p)
        p.then(() => flow.pending.delete(p))
      }
      if (dueAt() >= end) return
      flow.timer = setTimeout(tick, Math.max(0, Math.min(50, (dueAt() - Number(now())) / 1e6)))
    }
    tick()
  }

  function stopFlow(key) {
    const flow = flows.get(key)
    if (!flow) return []
    flow.stopped = true
    clearTimeout(flow.timer)
    flows.delete(key)
    return [...flow.pending]
  }

  const commands = {
    async traffic(args) {
      startTraffic(args)
      return {}
    },
    async stop({ key }) {
      const keys = key === undefined ? [...flows.keys()] : [key]
      await Promise.all(keys.flatMap(stopFlow))
      return { counts }
    },
    async counts() {
      return { counts }
    },
    async consume({ key, n = 1 }) {
      return call(key, n)
    },
    async burst({ key, count, n = 1 }) {
      const results = await Promise.all(Array.from({ length: count }, () => call(key, n)))
      return { admitted: results.filter((result) => result.decision?.allowed).length * n }
    },
    async busy({ ms }) {
      const until = performance.now() + ms
      while (performance.now() < until) {
        // the event loop blocked, as a long synchronous task would block it
      }
      return {}
    },
  }

  serveCommands(limiter, quit, commands)
})().catch((error) => {
  console.error(error)
  process.exit(1)
})
