'use strict'
// The native side of a limiter lives exactly as long as its JS object, on its own thread.
const test = require('node:test')
const assert = require('node:assert/strict')
const { skipWithoutProbes } = require('./helpers/probes.js')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const root = JSON.stringify(path.join(__dirname, '..'))

function runNode(args, script) {
  const child = spawnSync(process.execPath, [...args, '-e', script], { encoding: 'utf8', timeout: 30_000 })
  assert.equal(child.status, 0, `child failed:\n${child.stdout}\n${child.stderr}`)
  return child.stdout.trim()
}

test('a collected limiter frees its native slot, and slots are reused', { skip: skipWithoutProbes }, () => {
  const out = runNode(
    ['--expose-gc'],
    `
    const { QuotaClock } = require(${root})
    const native = require(${root} + '/binding.js')
    const make = () => new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })
    const kept = make()
    for (let i = 0; i < 20000; i++) make().tryConsume()
    const before = native.liveLimiters()
    const settle = (rounds) => new Promise((resolve) => {
      gc()
      if (rounds === 0 || native.liveLimiters() <= 1) return resolve()
      setTimeout(() => settle(rounds - 1).then(resolve), 10)
    })
    settle(100).then(() => {
      const after = native.liveLimiters()
      const fresh = make()
      if (fresh.tryConsume().allowed !== true || kept.tryConsume().allowed !== true) throw new Error('limiters broken')
      console.log(JSON.stringify({ before, after, withFresh: native.liveLimiters() }))
    })
    `,
  )
  const { before, after, withFresh } = JSON.parse(out)
  assert.ok(before > 1000, `expected many live limiters before GC, saw ${before}`)
  assert.equal(after, 1, 'only the kept limiter survives')
  assert.equal(withFresh, 2)
})

const workerPath = JSON.stringify(path.join(__dirname, 'helpers', 'lifecycle-worker.js'))

test('a limiter works in a worker thread and delivers its anomalies there', () => {
  const out = runNode(
    [],
    `
    const { Worker } = require('node:worker_threads')
    const worker = new Worker(${workerPath}, { workerData: 'anomaly' })
    const messages = []
    worker.on('message', (m) => messages.push(m))
    worker.on('exit', (code) => console.log(JSON.stringify({ code, messages })))
    `,
  )
  const { code, messages } = JSON.parse(out)
  assert.equal(code, 0)
  assert.deepEqual(messages[0], { allowed: true, anomalies: 1, threadId: 1 })
  assert.deepEqual(messages[1], { kind: 'wall-step-back', threadId: 1 })
})

test('limiters on the main thread keep working after a worker that used the addon has exited', () => {
  const out = runNode(
    [],
    `
    const { Worker } = require('node:worker_threads')
    const { QuotaClock } = require(${root})
    const main = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })
    const worker = new Worker(${workerPath}, { workerData: 'many' })
    worker.on('exit', (code) => console.log(JSON.stringify({ code, allowed: main.tryConsume().allowed })))
    `,
  )
  assert.deepEqual(JSON.parse(out), { code: 0, allowed: true })
})

test('a module loaded again (as test runners do) gets limiters of its own, and the first keeps working', () => {
  const out = runNode(
    [],
    `
    const first = require(${root})
    const a = new first.QuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 5, period: { unit: 'day', timeZone: 'UTC' } } })
    for (const key of Object.keys(require.cache)) delete require.cache[key]
    const second = require(${root})
    const b = new second.QuotaClock({ capacity: 3, refillPerSecond: 1, suspendPolicy: 'ignore' })
    const clock = second.manualClock()
    const c = new second.QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
    clock.set({ monotonicMs: -1 })
    let code
    try { c.tryConsume() } catch (error) { code = error.code }
    console.log(JSON.stringify({
      a: [a.tryConsume().quotaRemaining, a.status().quotaUsed, a.tryConsume(2).allowed],
      b: [b.tryConsume(3).tokens, b.status().quotaUsed],
      code,
      distinct: first.QuotaClock !== second.QuotaClock,
    }))
    `,
  )
  assert.deepEqual(JSON.parse(out), { a: [4, 1, false], b: [0, null], code: 'ERR_MONOTONIC_REGRESSION', distinct: true })
})

test("each limiter's onAnomaly receives its own anomalies, however many limiters share the dispatcher", async () => {
  const { QuotaClock, manualClock } = require('..')
  const received = new Map()
  const limiters = []
  for (let i = 0; i < 50; i++) {
    const clock = manualClock()
    const limiter = new QuotaClock({
      capacity: 5,
      refillPerSecond: 1,
      suspendPolicy: 'ignore',
      clock,
      onAnomaly: (a) => received.set(i, [...(received.get(i) || []), a.stepMs]),
    })
    limiters.push({ clock, limiter })
  }
  limiters.forEach(({ clock, limiter }, i) => {
    clock.stepWall(-1000 * (i + 1))
    limiter.tryConsume()
  })
  // Delivered asynchronously: wait until every limiter heard (a loaded machine may take longer than
  // any fixed sleep), then a little longer, for a delivery that should not come.
  const deadline = Date.now() + 10_000
  while (received.size < 50 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  await new Promise((resolve) => setTimeout(resolve, 20))
  for (let i = 0; i < 50; i++) assert.deepEqual(received.get(i), [-1000 * (i + 1)], `limiter ${i}`)
})

test('a limiter with its own onAnomaly closure stays far below a threadsafe function per limiter (~3 KiB)', () => {
  const out = runNode(
    ['--expose-gc'],
    `
    const { QuotaClock } = require(${root})
    const make = () => new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', onAnomaly() {} })
    const keep = []
    for (let i = 0; i < 1000; i++) keep.push(make())
    keep.length = 0
    gc(); gc()
    const before = process.memoryUsage().rss
    for (let i = 0; i < 50000; i++) keep.push(make())
    gc(); gc()
    console.log((process.memoryUsage().rss - before) / 50000)
    `,
  )
  assert.ok(Number(out) < 1536, `${out} bytes per limiter`)
})

test('an onAnomaly handler that refers to its own limiter does not keep it alive', { skip: skipWithoutProbes }, () => {
  const out = runNode(
    ['--expose-gc'],
    `
    const { QuotaClock } = require(${root})
    const native = require(${root} + '/binding.js')
    for (let i = 0; i < 5000; i++) {
      const limiter = new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', onAnomaly: () => limiter.status() })
    }
    const settle = (rounds) => new Promise((resolve) => {
      gc()
      if (rounds === 0 || native.liveLimiters() === 0) return resolve()
      setTimeout(() => settle(rounds - 1).then(resolve), 10)
    })
    settle(100).then(() => console.log(native.liveLimiters()))
    `,
  )
  assert.equal(Number(out), 0)
})
