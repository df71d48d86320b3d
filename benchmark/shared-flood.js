'use strict'
// `node benchmark/shared-flood.js`: what a flood on an exhausted key costs a shared limiter in
// store calls. Three limiters (three instances of a service, each on its own ioredis connection to
// a local redis-server started here) exhaust a key's quota, then each floods it for FLOOD_SECONDS
// (default 5): one call after another, and CONCURRENCY (default 50) calls at a time. Prints, per
// limiter, the denials, the store calls they cost (stats().store.calls) and the calls per second.
// Each flooding loop yields to the event loop every 100 calls, as a server does between requests.

const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { KeyedQuotaClock } = require('..')
const { redisStore } = require('../lib/shared.js')
const { startRedisServer } = require('../__test__/helpers/redis-server.js')

const FLOOD_SECONDS = Number(process.env.FLOOD_SECONDS || 5)
const CONCURRENCY = Number(process.env.CONCURRENCY || 50)

async function main() {
  const redis = await startRedisServer()
  const clients = []
  try {
    const limiters = []
    for (let i = 0; i < 3; i++) {
      const client = new Redis({ host: redis.host, port: redis.port })
      clients.push(client)
      limiters.push(
        new KeyedQuotaClock({
          capacity: 1e9,
          refillPerSecond: 1e9,
          suspendPolicy: 'ignore',
          quota: { limit: 300, period: { unit: 'month', timeZone: 'UTC' } },
          share: { store: redisStore(client), name: `flood-${process.pid}`, leaseUnits: 10 },
        }),
      )
    }
    // Exhaust the key between the three.
    await Promise.all(limiters.map(async (limiter) => {
      while ((await limiter.consume('tenant')).allowed);
    }))
    for (const mode of ['one after another', `${CONCURRENCY} at a time`]) {
      const rows = await Promise.all(limiters.map(async (limiter) => {
        const calls = limiter.stats().store.calls
        const started = performance.now()
        let denied = 0
        const flood = async () => {
          while (performance.now() - started < FLOOD_SECONDS * 1000) {
            const decision = await limiter.consume('tenant')
            assert.equal(decision.allowed, false)
            // Let I/O in now and then, as a server does between requests (promises alone would
            // starve the store's answers).
            if (++denied % 100 === 0) await new Promise(setImmediate)
          }
        }
        await Promise.all(Array.from({ length: mode === 'one after another' ? 1 : CONCURRENCY }, flood))
        const seconds = (performance.now() - started) / 1000
        const made = limiter.stats().store.calls - calls
        return { denied, made, seconds }
      }))
      console.log(`flood on an exhausted key, ${mode}, ${FLOOD_SECONDS} s:`)
      rows.forEach(({ denied, made, seconds }, at) => {
        console.log(`  limiter ${at + 1}: ${denied.toLocaleString('en-US')} denials, ${made} store calls (${(made / seconds).toFixed(2)} a second)`)
      })
    }
    await Promise.all(limiters.map((limiter) => limiter.close()))
  } finally {
    for (const client of clients) client.disconnect()
    await redis.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
