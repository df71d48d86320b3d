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

const path = require('node:path')
const { startWorker } = require('./shared-fleet.js')
const { readCalls, admittedUnits } = require('./fleet-check.js')

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

module.exports = { startFleet, roundRobin, waitUntil, nowMs, sleep }
