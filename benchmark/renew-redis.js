'use strict'
// A fleet bucket's renewal on Redis (`node benchmark/renew-redis.js`, not part of npm test): one
// instance holds 100,000 keys of one shared bucket (one local redis-server, started here); one
// `cellsRenew` of all of them, as the renewal tick sends it. Reported per run: Redis's own time for
// the renewal scripts (INFO commandstats, usec of evalsha), the wall time of the call, and the
// longest PING of a second client sent every 5 ms while it runs. BENCH_KEYS sets the key count,
// BENCH_RUNS the number of renewals (the median and the worst are printed), BENCH_CLIENT=node-redis
// runs the store on a node-redis client instead of ioredis.

const Redis = require('ioredis')
const { createClient } = require('redis')
const { redisStore } = require('../lib/shared.js')
const { storeOperations } = require('../lib/quota-store.js')
const { RENEW_CHUNK } = require('../lib/shared/redis-cells.js')
const { startRedis } = require('./shared.js')

const KEYS = Number(process.env.BENCH_KEYS || 100_000)
const RUNS = Number(process.env.BENCH_RUNS || 5)
const LEASE_MS = 10_000

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

async function evalshaUsec(client) {
  const info = await client.info('commandstats')
  const match = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(info)
  return match ? { calls: Number(match[1]), usec: Number(match[2]) } : { calls: 0, usec: 0 }
}

/** Pings every 5 ms until stopped; resolves to the longest round trip in ms. */
function pinger(client) {
  let stopped = false
  let longest = 0
  const done = (async () => {
    while (!stopped) {
      const started = process.hrtime.bigint()
      await client.ping()
      longest = Math.max(longest, Number(process.hrtime.bigint() - started) / 1e6)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    return longest
  })()
  return async () => {
    stopped = true
    return done
  }
}

async function main() {
  const redis = await startRedis()
  const client = new Redis({ port: redis.port, host: '127.0.0.1' })
  const other = new Redis({ port: redis.port, host: '127.0.0.1' })
  try {
    let storeClient = client
    if (process.env.BENCH_CLIENT === 'node-redis') {
      storeClient = createClient({ url: `redis://127.0.0.1:${redis.port}` })
      await storeClient.connect()
    }
    const ops = storeOperations(redisStore(storeClient))
    const name = 'renew-bench'
    const keys = []
    for (let at = 0; at < KEYS; at += 5_000) {
      const batch = []
      for (let i = at; i < Math.min(KEYS, at + 5_000); i++) {
        batch.push(ops.cellsAcquire({ name, key: `k${i}`, capacity: 4, refillPerSecond: 1, initial: 4, instance: 'A', leaseMs: LEASE_MS, held: 0, recordId: 0 }))
      }
      for (const [i, a] of (await Promise.all(batch)).entries()) keys.push({ key: `k${at + i}`, held: a.held, tokens: 0, recordId: a.recordId })
    }
    await ops.cellsRenew({ name, instance: 'A', leaseMs: LEASE_MS, keys: keys.slice(0, 2) }) // the script loaded
    const runs = []
    for (let run = 0; run < RUNS; run++) {
      const before = await evalshaUsec(client)
      const stop = pinger(other)
      await new Promise((resolve) => setTimeout(resolve, 20))
      const started = process.hrtime.bigint()
      const answer = await ops.cellsRenew({ name, instance: 'A', leaseMs: LEASE_MS, keys })
      const wallMs = Number(process.hrtime.bigint() - started) / 1e6
      const pingMs = await stop()
      const after = await evalshaUsec(client)
      if (answer.keys.some((one) => one.held !== 4 || one.waiting !== 0 || one.fair !== 4)) throw new Error('a renewal answered a wrong share')
      runs.push({ redisMs: (after.usec - before.usec) / 1000, scripts: after.calls - before.calls, wallMs, pingMs })
      console.log(`run ${run + 1}: Redis ${runs[run].redisMs.toFixed(0)} ms in ${runs[run].scripts} scripts, wall ${wallMs.toFixed(0)} ms, longest PING ${pingMs.toFixed(0)} ms`)
    }
    const of = (field) => `${median(runs.map((one) => one[field])).toFixed(0)} ms (worst ${Math.max(...runs.map((one) => one[field])).toFixed(0)})`
    console.log(`${KEYS.toLocaleString('en')} keys, chunks of ${RENEW_CHUNK.toLocaleString('en')}, median of ${RUNS}:`)
    console.log(`  Redis time ${of('redisMs')} = ${((median(runs.map((one) => one.redisMs)) * 1000) / KEYS).toFixed(1)} µs a key; wall ${of('wallMs')}; longest PING ${of('pingMs')}`)
    if (storeClient !== client) await storeClient.close()
  } finally {
    client.disconnect()
    other.disconnect()
    redis.stop()
  }
}

if (require.main === module) {
  main().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
