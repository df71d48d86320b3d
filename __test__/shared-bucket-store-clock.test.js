'use strict'

// A shared bucket on a real redis-server whose wall clock the test steps (TIME moves, the host's
// clocks do not): the limiter compares the store's clock with its own elapsed time at every store
// call and reports a step as a store-clock-step anomaly; nothing refills from the store's clock.

const { after, before, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { KeyedQuotaClock } = require('quota-clock-source')
const { redisStore } = require('quota-clock-source/shared')
const { startRedisServer } = require('./helpers/redis-server.js')

let redis
let client

before(async () => {
  redis = await startRedisServer({ fakeTime: true })
  client = new Redis({ host: redis.host, port: redis.port })
})

after(async () => {
  client?.disconnect()
  await redis?.stop()
})

/** Waits (on the event loop) until `condition()` holds, for at most `ms`. */
async function until(condition, what, ms = 20_000) {
  const deadline = performance.now() + ms
  while (!condition()) {
    if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

for (const stepMs of [60_000, -60_000]) {
  test(`the store's clock stepped ${stepMs > 0 ? 'forward' : 'back'} a minute is a store-clock-step anomaly, and credits nothing`, async () => {
    const seen = []
    const limiter = new KeyedQuotaClock({
      capacity: 5,
      refillPerSecond: 0.001,
      suspendPolicy: 'ignore',
      onAnomaly: (anomaly) => seen.push(anomaly),
      share: { store: redisStore(client), name: `clock-${process.pid}-${stepMs}`, bucket: true, leaseMs: 1_000, timeoutMs: 2_000 },
    })
    try {
      for (let i = 0; i < 5; i++) assert.equal((await limiter.consume('k')).allowed, true)
      // A renewal (every leaseMs / 8) before the step: no anomaly from a steady store clock.
      const renewalsBefore = limiter.stats().store.calls
      await until(() => limiter.stats().store.calls >= renewalsBefore + 2, 'two renewals')
      assert.deepEqual(seen.filter((anomaly) => anomaly.kind === 'store-clock-step'), [])
      redis.stepClock(stepMs)
      await until(() => seen.some((anomaly) => anomaly.kind === 'store-clock-step'), 'the anomaly')
      const anomaly = seen.find((one) => one.kind === 'store-clock-step')
      assert.match(anomaly.detail, /store/)
      assert.ok(Math.sign(anomaly.wallDeltaMs - anomaly.monotonicDeltaMs) === Math.sign(stepMs), JSON.stringify(anomaly))
      assert.ok(limiter.stats().anomalies['store-clock-step'] >= 1, JSON.stringify(limiter.stats().anomalies))
      // The bucket is as empty as before: a minute of the store's clock refilled nothing.
      assert.equal((await limiter.consume('k')).allowed, false)
    } finally {
      await limiter.close()
      redis.stepClock(-stepMs)
    }
  })
}
