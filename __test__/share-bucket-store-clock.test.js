'use strict'

// A shared bucket on a real redis-server whose wall clock the test steps (TIME moves, the host's
// clocks do not): the limiter compares the store's clock with its own elapsed time at every store
// call and reports a step as a store-clock-step anomaly; nothing refills from the store's clock
// alone (the fleet clock takes the lesser of the store's elapsed time and the caller's).

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
    // A key denied on an empty bucket asks the store again at most once a second: a call
    // every 50 ms makes a store call about every second.
    let admitted = 0
    const poll = async () => {
      const decision = await limiter.consume('k')
      if (decision.allowed) admitted++
      return decision
    }
    const pollUntil = async (condition, what) => {
      const deadline = performance.now() + 20_000
      while (!condition()) {
        if (performance.now() > deadline) assert.fail(`timed out waiting for ${what}`)
        await poll()
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    }
    try {
      for (let i = 0; i < 5; i++) assert.equal((await poll()).allowed, true)
      // Two store calls on a steady store clock: no anomaly.
      const callsBefore = limiter.stats().store.calls
      await pollUntil(() => limiter.stats().store.calls >= callsBefore + 2, 'two store calls')
      assert.deepEqual(seen.filter((anomaly) => anomaly.kind === 'store-clock-step'), [])
      redis.stepClock(stepMs)
      await pollUntil(() => seen.some((anomaly) => anomaly.kind === 'store-clock-step'), 'the anomaly')
      const anomaly = seen.find((one) => one.kind === 'store-clock-step')
      assert.match(anomaly.detail, /store/)
      assert.ok(Math.sign(anomaly.wallDeltaMs - anomaly.monotonicDeltaMs) === Math.sign(stepMs), JSON.stringify(anomaly))
      assert.ok(limiter.stats().anomalies['store-clock-step'] >= 1, JSON.stringify(limiter.stats().anomalies))
      // A minute of the store's clock refilled nothing: the fleet clock took this process's elapsed
      // time (a few seconds at 0.001/s), so the bucket stayed empty.
      const callsAfter = limiter.stats().store.calls
      await pollUntil(() => limiter.stats().store.calls >= callsAfter + 2, 'two store calls after the step')
      assert.equal(admitted, 5, 'the step refilled the bucket')
      assert.equal((await limiter.consume('k')).allowed, false)
      assert.ok(limiter.status('k').fleetTokens < 1, JSON.stringify(limiter.status('k')))
    } finally {
      await limiter.close()
      redis.stepClock(-stepMs)
    }
  })
}
