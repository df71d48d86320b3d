'use strict'
// Worker body for limiter-lifecycle.test.js: a limiter on a worker thread, with an anomaly to deliver.
const { parentPort, threadId, workerData } = require('node:worker_threads')
const { QuotaClock, manualClock } = require('../..')

if (workerData === 'anomaly') {
  const clock = manualClock()
  const limiter = new QuotaClock({
    capacity: 2,
    refillPerSecond: 1,
    suspendPolicy: 'ignore',
    clock,
    onAnomaly: (a) => parentPort.postMessage({ kind: a.kind, threadId }),
  })
  clock.stepWall(-10_000)
  const decision = limiter.tryConsume()
  parentPort.postMessage({ allowed: decision.allowed, anomalies: decision.anomalies.length, threadId })
  setTimeout(() => {}, 200)
} else {
  for (let i = 0; i < 100; i++) {
    new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', onAnomaly() {} }).tryConsume()
  }
}
