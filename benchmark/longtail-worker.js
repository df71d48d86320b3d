'use strict'
// A child process of benchmark/fleet-longtail.js: one instance of a service limiting "100 per 15
// minutes per client address" with one library, on its own ioredis connection, called directly
// (no HTTP). `arrivals()` is the seeded traffic every run shares; run as a child, messages:
//   { op: 'one', key }      one request -> { op: 'one', admitted }
//   { op: 'warm' }          one request on every address, 500 at a time (starting at this process's
//                           third of them) -> { op: 'warmed', ms, counts }
//   { op: 'run', startNs }  this process's part of the arrivals, each at its time after startNs
//                           (process.hrtime, the same clock in every process), not awaited one by
//                           one -> once every call has settled { op: 'ran', marks, counts, lag,
//                           latency (of the window's calls), loop (event-loop delay in the window) }
//   { op: 'stats' }         -> { op: 'stats', store } (ours: stats().store; the peers: null)
// Every reply goes to the parent with process.send; the parent kills the process at the end.

const { monitorEventLoopDelay } = require('node:perf_hooks')

const C = 100
const WINDOW_S = 900

/** A seeded uniform generator on [0, 1) (mulberry32). */
function seeded(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** Client address number a as an IPv4 address in 198.18.0.0/15 (the benchmarking range). */
const address = (a) => `198.${18 + (a >>> 16)}.${(a >>> 8) & 255}.${a & 255}`

/**
 * The arrivals of a run: each address starts at a random phase of `periodMs`, then sends one
 * request every 0.8 to 1.2 × `periodMs`, each to a process drawn at random, until `durationMs`.
 * The same seed gives the same arrivals to every process and every library.
 * -> { at: Float64Array (ms after the start, ascending), who: Int32Array (address), to: Uint8Array (process) }
 */
function arrivals({ seed, addresses, periodMs, durationMs, processes }) {
  const random = seeded(seed)
  const at = []
  const who = []
  const to = []
  for (let a = 0; a < addresses; a++) {
    for (let t = random() * periodMs; t < durationMs; t += periodMs * (0.8 + 0.4 * random())) {
      at.push(t)
      who.push(a)
      to.push(Math.floor(random() * processes))
    }
  }
  const order = Array.from(at.keys()).sort((i, j) => at[i] - at[j] || i - j)
  return {
    at: Float64Array.from(order, (i) => at[i]),
    who: Int32Array.from(order, (i) => who[i]),
    to: Uint8Array.from(order, (i) => to[i]),
  }
}

/** `consume(key)` for one library, resolving to true (admitted) or what it said (denied); rejects on a store error. */
async function makeLimiter(library, client) {
  if (library === 'ours' || library === 'ours-single') {
    const { KeyedQuotaClock } = require('..')
    const { redisStore } = require('../lib/shared.js')
    // ours-single: the client as a Cluster's, for which the store sends each take alone.
    const given = library === 'ours' ? client : new Proxy(client, { get: (target, property) => (property === 'isCluster' ? true : Reflect.get(target, property)) })
    // The docs' recipe ("100 per 15 minutes per IP, across instances"), with a longer timeoutMs so
    // that a loaded benchmark machine makes no ERR_STORE_UNAVAILABLE (the peers have no timeout).
    const limiter = new KeyedQuotaClock({
      capacity: C,
      refillPerSecond: C / WINDOW_S,
      suspendPolicy: 'ignore',
      maxKeys: 1_000_000,
      share: { store: redisStore(given), name: 'per-ip', bucket: true, timeoutMs: 10_000 },
    })
    const consume = async (key) => {
      const decision = await limiter.consume(key)
      return decision.allowed || { ...decision, status: limiter.status(key) }
    }
    return { consume, stats: () => limiter.stats().store }
  }
  if (library === 'express-rate-limit') {
    // What express-rate-limit's middleware does with its store: init once, then one increment a
    // request, admitted while the hits are at most the limit.
    const { RedisStore } = require('rate-limit-redis')
    const store = new RedisStore({ sendCommand: (...args) => client.call(...args) })
    await store.init({ windowMs: WINDOW_S * 1000, limit: C })
    const consume = async (key) => {
      const hits = await store.increment(key)
      return hits.totalHits <= C || hits
    }
    return { consume, stats: () => null }
  }
  if (library === 'rate-limiter-flexible') {
    const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible')
    const limiter = new RateLimiterRedis({ storeClient: client, points: C, duration: WINDOW_S })
    return {
      consume: (key) =>
        limiter.consume(key).then(
          () => true,
          (rejection) => {
            if (rejection instanceof RateLimiterRes) return { ...rejection }
            throw rejection
          },
        ),
      stats: () => null,
    }
  }
  throw new Error(`unknown library ${library}`)
}

async function child() {
  const Redis = require('ioredis')
  const config = JSON.parse(process.argv[2])
  const client = new Redis(config.url, { lazyConnect: true })
  await client.connect()
  // Every command the client sends is one round trip (no pipelining): counted by name.
  const sent = {}
  // The keys the script calls name (a batch of takes names several), and the most in one.
  const scripted = { calls: 0, keys: 0, most: 0 }
  const sendCommand = client.sendCommand
  client.sendCommand = function (command, stream) {
    sent[command.name] = (sent[command.name] ?? 0) + 1
    if (/^eval(sha)?$/i.test(command.name)) {
      const keys = Number(command.args[1])
      scripted.calls++
      scripted.keys += keys
      scripted.most = Math.max(scripted.most, keys)
    }
    return sendCommand.call(this, command, stream)
  }
  const limiter = await makeLimiter(config.library, client)
  const counts = { calls: 0, admitted: 0, denied: 0, errors: 0, firstError: undefined, firstDenied: [] }
  const tally = (promise, key) => {
    counts.calls++
    return promise.then(
      (answer) => {
        if (answer === true) return counts.admitted++
        counts.denied++
        if (counts.firstDenied.length < 5) counts.firstDenied.push({ key, atMs: Math.round(performance.now()), answer })
      },
      (error) => {
        counts.errors++
        counts.firstError ??= String(error?.stack ?? error)
      },
    )
  }
  const reset = () => Object.assign(counts, { calls: 0, admitted: 0, denied: 0, errors: 0, firstError: undefined, firstDenied: [] })

  async function warm() {
    reset()
    const started = performance.now()
    const n = config.addresses
    const from = Math.floor((config.index * n) / config.processes)
    for (let i = 0; i < n; i += 500) {
      const batch = []
      for (let j = i; j < Math.min(i + 500, n); j++) batch.push(tally(limiter.consume(address((from + j) % n)), address((from + j) % n)))
      await Promise.all(batch)
    }
    return { ms: performance.now() - started, counts: { ...counts } }
  }

  /**
   * Runs this process's arrivals; a mark (CPU, commands sent, calls issued) at each of
   * config.marksMs after the start, by a timer: the parent reads Redis's counters at the same
   * times, so both count the same stretch of time even when calls start late.
   */
  function run(startNs) {
    reset()
    const all = arrivals(config)
    const mine = []
    for (let i = 0; i < all.at.length; i++) if (all.to[i] === config.index) mine.push(i)
    const start = Number(startNs) / 1e6
    const now = () => Number(process.hrtime.bigint()) / 1e6 - start
    const marks = []
    const latencies = []
    const lag = { max: 0, sum: 0, n: 0 }
    const inFlight = new Set()
    const loopDelay = monitorEventLoopDelay({ resolution: 10 })
    let next = 0
    let marked
    const allMarked = new Promise((resolve) => (marked = resolve))
    for (const markMs of config.marksMs) {
      setTimeout(() => {
        marks.push({ cpu: process.cpuUsage(), sent: { ...sent }, scripted: { ...scripted }, issued: counts.calls, atMs: now() })
        if (marks.length === 1) loopDelay.enable()
        if (marks.length === config.marksMs.length) {
          loopDelay.disable()
          marked()
        }
      }, Math.max(0, markMs - now()))
    }
    return new Promise((resolve) => {
      const tick = () => {
        const t = now()
        while (next < mine.length && all.at[mine[next]] <= t) {
          const i = mine[next++]
          const late = t - all.at[i]
          lag.max = Math.max(lag.max, late)
          lag.sum += late
          lag.n++
          const measured = marks.length === 1
          const issued = performance.now()
          const call = tally(limiter.consume(address(all.who[i])), address(all.who[i])).then(() => {
            if (measured) latencies.push(performance.now() - issued)
            inFlight.delete(call)
          })
          inFlight.add(call)
        }
        if (next < mine.length) {
          setTimeout(tick, Math.max(1, all.at[mine[next]] - now()))
          return
        }
        Promise.all([allMarked, ...inFlight]).then(() => {
          latencies.sort((a, b) => a - b)
          const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN
          const loop = { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 }
          resolve({ marks, counts: { ...counts }, lag: { maxMs: lag.max, meanMs: lag.sum / Math.max(1, lag.n) }, latency: { p50: at(0.5), p99: at(0.99) }, loop })
        })
      }
      setTimeout(tick, Math.max(0, -now()))
    })
  }

  process.on('message', async (message) => {
    if (message.op === 'one') {
      reset()
      await tally(limiter.consume(message.key), message.key)
      process.send({ op: 'one', admitted: counts.admitted === 1, error: counts.firstError, denied: counts.firstDenied[0] })
    } else if (message.op === 'warm') {
      process.send({ op: 'warmed', ...(await warm()) })
    } else if (message.op === 'run') {
      process.send({ op: 'ran', ...(await run(message.startNs)) })
    } else if (message.op === 'stats') {
      process.send({ op: 'stats', store: limiter.stats() })
    }
  })
  process.send({ op: 'ready' })
}

module.exports = { arrivals, address }

if (require.main === module) {
  child().catch((error) => {
    console.error(error)
    process.exit(1)
  })
}
