'use strict'

// Unavailable means unavailable: calls racing for a key on a healthy store are never
// reported as ERR_STORE_UNAVAILABLE, however many. Here the calls come as one burst made in a single
// synchronous loop, so the process itself is busy for longer than timeoutMs before it can read the
// store's answer: that time is not the store's, and the store did answer at once. Real
// redis-server (ioredis, node-redis) and the MongoDB wire server, the default timeoutMs (300 ms).

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { useStoreServers, limiterOn } = require('./helpers/shared-fleet.js')

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`

/** Starts `count` consume calls in one synchronous loop; the outcomes counted by kind. */
async function burst(limiter, count, keyOf) {
  const calls = []
  for (let i = 0; i < count; i++) {
    calls.push(limiter.consume(keyOf(i)).then((decision) => (decision.allowed ? 'allowed' : 'denied'), (error) => error.code))
  }
  const outcomes = {}
  for (const outcome of await Promise.all(calls)) outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
  return outcomes
}

describe('a burst of calls on a healthy store is decided, never ERR_STORE_UNAVAILABLE', () => {
  const servers = useStoreServers('shared_burst')
  for (const kind of ['ioredis', 'node-redis', 'mongo']) {
    test(`20,000 calls at once for one key (${kind})`, { timeout: 120_000 }, async () => {
      const limiter = limiterOn(await servers.makeStore(kind), freshName(kind), { limit: 15_000 })
      // (The connection made and, on MongoDB, the collection: a new database's first write makes it,
      // which a loaded machine's server can take longer than timeoutMs over; not what this is about.)
      assert.equal((await limiter.consume('warm-up')).allowed, true)
      const outcomes = await burst(limiter, 20_000, () => 'hot')
      const { store } = limiter.stats()
      assert.deepEqual(outcomes, { allowed: 15_000, denied: 5_000 }, `store counters ${JSON.stringify(store)}`)
      assert.deepEqual([store.errors, store.timeouts], [0, 0])
      await limiter.close()
    })
  }
})
