'use strict'
// anomalies: shape, delivery on decision.anomalies and to onAnomaly (asynchronously, on the
// JS thread that created the limiter, never inside tryConsume), a throwing handler becomes a
// process.emitWarning warning, and a pending callback does not keep the process alive.

const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { Worker, isMainThread, threadId } = require('node:worker_threads')

const PKG = path.resolve(__dirname, '..')
const DAY = 86_400_000
const { NOON, UTC_DAY, manualLimiter } = require('./helpers/limiters')
const { TIME_SCALE } = require('./helpers/time-scale.js')

// A generous deadline: deliveries are asynchronous, and a loaded machine runs them late.
async function waitFor(predicate, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs
  while (!predicate()) {
    if (Date.now() > until) return false
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  return true
}

// A bucket that never runs dry and starts empty: only the reconciliation shows.
const make = (options = {}) => manualLimiter({ capacity: 1e6, refillPerSecond: 1000, initialTokens: 0, ...options })

const CORE_KEYS = ['kind', 'detail', 'monotonicDeltaMs', 'wallDeltaMs', 'creditedMs']
const KINDS = ['wall-step-back', 'wall-step-forward', 'suspend', 'ambiguous-wall-jump', 'period-regression', 'period-skip', 'store-clock-step']

function assertAnomalyShape(a) {
  for (const key of CORE_KEYS) assert.ok(key in a, `anomaly has ${key}`)
  assert.ok(KINDS.includes(a.kind), `kind ${a.kind}`)
  assert.equal(typeof a.detail, 'string')
  assert.ok(a.detail.length > 0)
  assert.ok(!/[\r\n]/.test(a.detail.trim()), `detail is one line: ${JSON.stringify(a.detail)}`)
  assert.match(a.detail, /\d/, `detail has the numbers: ${a.detail}`)
  for (const key of ['monotonicDeltaMs', 'wallDeltaMs', 'creditedMs']) assert.ok(Number.isFinite(a[key]), `${key} is a finite number`)
  const allowed = new Set([...CORE_KEYS, 'suspendedMs', 'stepMs', 'skipped', 'periodId'])
  for (const key of Object.keys(a)) assert.ok(allowed.has(key), `unexpected anomaly field ${key}`)
}

const mentions = (detail, ms) => {
  const s = String(Math.abs(ms))
  const withCommas = Math.abs(ms).toLocaleString('en-US')
  const seconds = `${Math.abs(ms) / 1000}`
  return detail.includes(s) || detail.includes(withCommas) || new RegExp(`\\b${seconds.replace('.', '\\.')}\\s?s`).test(detail)
}

// ---------------------------------------------------------------------------------------------
// shape

test('Anomaly shape: wall-step-back has kind, detail, monotonicDeltaMs, wallDeltaMs, creditedMs and a signed stepMs', () => {
  const { clock, limiter } = make()
  clock.advance(1000)
  clock.stepWall(-60_000)
  const [a] = limiter.tryConsume().anomalies
  assertAnomalyShape(a)
  assert.equal(a.kind, 'wall-step-back')
  assert.equal(a.monotonicDeltaMs, 1000)
  assert.equal(a.wallDeltaMs, -59_000)
  assert.equal(a.creditedMs, 1000)
  assert.equal(a.stepMs, -60_000)
  assert.ok(mentions(a.detail, 60_000) || mentions(a.detail, 59_000), `detail has the numbers: ${a.detail}`)
})

test('Anomaly shape: wall-step-forward has a signed positive stepMs (the unexplained part)', () => {
  const { clock, limiter } = make({ reader: true })
  clock.suspend(10_000)
  clock.stepWall(45_000)
  const d = limiter.tryConsume()
  const a = d.anomalies.find((x) => x.kind === 'wall-step-forward')
  assertAnomalyShape(a)
  assert.equal(a.stepMs, 45_000)
  assert.equal(a.monotonicDeltaMs, 0)
  assert.equal(a.wallDeltaMs, 55_000)
  assert.equal(a.creditedMs, 10_000)
  assert.ok(mentions(a.detail, 45_000), `detail has the step: ${a.detail}`)
})

test('Anomaly shape: suspend has suspendedMs', () => {
  const { clock, limiter } = make({ reader: true })
  clock.advance(500)
  clock.suspend(120_000)
  const [a] = limiter.tryConsume().anomalies
  assertAnomalyShape(a)
  assert.equal(a.kind, 'suspend')
  assert.equal(a.suspendedMs, 120_000)
  assert.equal(a.monotonicDeltaMs, 500)
  assert.equal(a.wallDeltaMs, 120_500)
  assert.equal(a.creditedMs, 120_500)
  assert.ok(mentions(a.detail, 120_000), `detail has the suspended time: ${a.detail}`)
})

test('Anomaly shape: ambiguous-wall-jump carries what was credited on this call', () => {
  for (const [policy, credited] of [['ignore', 0], ['credit', 30_000]]) {
    const { clock, limiter } = make({ policy })
    clock.stepWall(30_000)
    const [a] = limiter.tryConsume().anomalies
    assertAnomalyShape(a)
    assert.equal(a.kind, 'ambiguous-wall-jump')
    assert.equal(a.monotonicDeltaMs, 0)
    assert.equal(a.wallDeltaMs, 30_000)
    assert.equal(a.creditedMs, credited, policy)
    assert.ok(mentions(a.detail, 30_000), `detail has the jump: ${a.detail}`)
  }
})

test('Anomaly shape: period-skip carries skipped and periodId (UTC day quota, 3 days forward skips 2 whole days)', () => {
  const { clock, limiter } = make({ quota: { limit: 10, period: UTC_DAY } })
  clock.advance(3 * DAY) // awake: no clock anomaly, but two whole UTC days were jumped over
  const d = limiter.tryConsume()
  const a = d.anomalies.find((x) => x.kind === 'period-skip')
  assert.ok(a, `a period-skip anomaly: ${JSON.stringify(d.anomalies)}`)
  assertAnomalyShape(a)
  assert.equal(a.skipped, 2)
  assert.equal(typeof a.periodId, 'string')
  assert.equal(a.periodId, limiter.status().period.id, 'periodId is the period now open')
  assert.equal(a.monotonicDeltaMs, 3 * DAY)
  assert.equal(a.wallDeltaMs, 3 * DAY)
  assert.equal(a.creditedMs, 3 * DAY)
})

test('Anomaly shape: period-regression carries periodId (the period now open, i.e. held)', () => {
  const { clock, limiter } = make({ quota: { limit: 10, period: UTC_DAY }, wallMs: Date.UTC(2024, 0, 15, 0, 0, 30) })
  limiter.tryConsume()
  const open = limiter.status().period
  clock.stepWall(-60_000) // back across midnight
  const d = limiter.tryConsume()
  const a = d.anomalies.find((x) => x.kind === 'period-regression')
  assert.ok(a, `a period-regression anomaly: ${JSON.stringify(d.anomalies)}`)
  assertAnomalyShape(a)
  assert.equal(a.periodId, open.id)
  assert.ok(d.anomalies.some((x) => x.kind === 'wall-step-back'))
})

// ---------------------------------------------------------------------------------------------
// delivery

test('each anomaly is on decision.anomalies and is also delivered to onAnomaly', async () => {
  const seen = []
  const { clock, limiter } = make({ reader: true, onAnomaly: (a) => seen.push(a) })
  clock.suspend(30_000)
  clock.stepWall(20_000)
  const d = limiter.tryConsume()
  assert.equal(d.anomalies.length, 2)
  assert.ok(await waitFor(() => seen.length >= 2), 'delivered')
  await new Promise((r) => setTimeout(r, 20))
  assert.equal(seen.length, 2, 'each anomaly delivered once')
  const byKind = (list) => [...list].sort((x, y) => x.kind.localeCompare(y.kind))
  assert.deepEqual(byKind(seen), byKind(d.anomalies))
})

test('onAnomaly is called asynchronously: not before tryConsume returns', async () => {
  const seen = []
  const { clock, limiter } = make({ onAnomaly: (a) => seen.push(a) })
  clock.stepWall(-10_000)
  const d = limiter.tryConsume()
  assert.equal(d.anomalies.length, 1)
  assert.equal(seen.length, 0, 'not delivered synchronously')
  await Promise.resolve()
  assert.ok(await waitFor(() => seen.length === 1), 'delivered later')
  assert.equal(seen[0].kind, 'wall-step-back')
})

test('onAnomaly is never called inside tryConsume (nor inside status)', async () => {
  let inside = false
  let calledInside = 0
  let calls = 0
  const { clock, limiter } = make({
    reader: true,
    onAnomaly: () => {
      calls++
      if (inside) calledInside++
    },
  })
  for (let i = 0; i < 20; i++) {
    clock.stepWall(i % 2 ? 60_000 : -60_000)
    if (i % 3 === 0) clock.suspend(5000)
    inside = true
    try {
      if (i % 4 === 0) limiter.status()
      else limiter.tryConsume()
    } finally {
      inside = false
    }
  }
  assert.equal(calls, 0, 'nothing delivered while the synchronous loop runs')
  assert.ok(await waitFor(() => calls >= 20))
  assert.equal(calledInside, 0)
})

test('onAnomaly runs on the JS thread that created the limiter (main thread)', async () => {
  const threads = []
  const { clock, limiter } = make({ onAnomaly: () => threads.push({ isMainThread, threadId }) })
  clock.stepWall(-10_000)
  limiter.tryConsume()
  assert.ok(await waitFor(() => threads.length === 1))
  assert.deepEqual(threads, [{ isMainThread: true, threadId: 0 }])
})

test('onAnomaly runs on the JS thread that created the limiter (a worker thread)', async () => {
  const code = `
    const { parentPort, threadId } = require('node:worker_threads')
    const { QuotaClock, manualClock } = require(${JSON.stringify(PKG)})
    const clock = manualClock({ wallMs: ${NOON} })
    const limiter = new QuotaClock({
      capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock,
      onAnomaly: (a) => parentPort.postMessage({ kind: a.kind, deliveredOn: require('node:worker_threads').threadId, createdOn: threadId }),
    })
    clock.stepWall(-10000)
    const d = limiter.tryConsume()
    parentPort.postMessage({ sync: d.anomalies.length })
    setTimeout(() => {}, 3000) // a pending callback does not keep a thread alive: keep this one alive to see delivery
  `
  const worker = new Worker(code, { eval: true })
  const messages = []
  let error = null
  worker.on('message', (m) => messages.push(m))
  worker.on('error', (e) => {
    error = e
  })
  try {
    const ok = await waitFor(() => error || messages.some((m) => m.kind), 5000)
    assert.equal(error, null, `worker failed: ${error && error.stack}`)
    assert.ok(ok, `delivered in the worker: ${JSON.stringify(messages)}`)
    const delivered = messages.find((m) => m.kind)
    assert.equal(delivered.kind, 'wall-step-back')
    assert.equal(delivered.deliveredOn, delivered.createdOn)
    assert.notEqual(delivered.deliveredOn, threadId, 'not delivered on the main thread')
  } finally {
    await worker.terminate()
  }
})

test('status() anomalies are delivered to onAnomaly', async () => {
  const seen = []
  const { clock, limiter } = make({ reader: true, onAnomaly: (a) => seen.push(a) })
  clock.suspend(9000)
  limiter.status()
  assert.ok(await waitFor(() => seen.length === 1))
  assert.equal(seen[0].kind, 'suspend')
  assert.equal(seen[0].suspendedMs, 9000)
})

// ---------------------------------------------------------------------------------------------
// a throwing handler

test('a throwing onAnomaly never breaks the limiter or the process: its error is reported with process.emitWarning', async () => {
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  try {
    let calls = 0
    const { clock, limiter } = make({
      onAnomaly: () => {
        calls++
        throw new Error(`handler exploded #${calls}`)
      },
    })
    clock.stepWall(-10_000)
    limiter.tryConsume()
    assert.ok(await waitFor(() => warnings.some((w) => String(w && w.message).includes('handler exploded #1'))), `a warning with the handler's error: ${warnings.map((w) => w.message).join(' | ')}`)
    // the limiter keeps working and keeps delivering
    clock.advance(1000)
    const d = limiter.tryConsume()
    assert.equal(d.allowed, true)
    clock.stepWall(-10_000)
    assert.equal(limiter.tryConsume().anomalies.length, 1)
    assert.ok(await waitFor(() => calls === 2), 'the handler is called again after it threw')
    assert.ok(await waitFor(() => warnings.some((w) => String(w && w.message).includes('handler exploded #2'))))
    assert.equal(limiter.status().tokens >= 0, true)
  } finally {
    process.off('warning', onWarning)
  }
})

function runChild(script, timeout = 10_000 * TIME_SCALE) {
  const started = Date.now()
  const result = spawnSync(process.execPath, ['-e', script], { cwd: PKG, encoding: 'utf8', timeout })
  return { ...result, elapsed: Date.now() - started }
}

function throwingHandlerChild(throwsExpr) {
  return `
    const { QuotaClock, manualClock } = require(${JSON.stringify(PKG)})
    const throws = ${throwsExpr}
    let i = 0
    let calls = 0
    const clock = manualClock({ wallMs: ${NOON} })
    const limiter = new QuotaClock({ capacity: 100, refillPerSecond: 1, suspendPolicy: 'ignore', clock, onAnomaly: () => { calls++; throw throws[i++ % throws.length] } })
    for (let k = 0; k < throws.length; k++) { clock.stepWall(-10000); limiter.tryConsume() }
    setTimeout(() => {
      const d = limiter.tryConsume()
      process.stdout.write(JSON.stringify({ calls, expected: throws.length, allowed: d.allowed }))
    }, 300)
  `
}

test('a handler that throws non-Error values (a string, undefined, null, a symbol, a number) never crashes the process', () => {
  const r = runChild(throwingHandlerChild("['plain string 777', undefined, null, Symbol('sym'), 42]"))
  assert.equal(r.signal, null, `killed by ${r.signal}; stderr: ${r.stderr}`)
  assert.equal(r.status, 0, `stderr: ${r.stderr}`)
  const out = JSON.parse(r.stdout)
  assert.equal(out.calls, out.expected)
  assert.equal(out.allowed, true)
  assert.match(r.stderr, /Warning/, 'reported as a process warning')
  assert.match(r.stderr, /plain string 777/)
})

test('a handler that throws an object whose toString and message getter throw never crashes the process', () => {
  const r = runChild(throwingHandlerChild("[{ toString() { throw new Error('evil toString') }, get message() { throw new Error('evil message') } }, Object.create(null), new Proxy({}, { get() { throw new Error('evil proxy') }, getPrototypeOf() { throw new Error('evil proto') } })]"))
  assert.equal(r.signal, null, `killed by ${r.signal}; stderr: ${r.stderr}`)
  assert.equal(r.status, 0, `the process crashed; stderr: ${r.stderr}`)
  const out = JSON.parse(r.stdout)
  assert.equal(out.calls, out.expected)
  assert.equal(out.allowed, true)
  assert.match(r.stderr, /Warning/, 'reported as a process warning')
})

test('a throwing handler is reported as a process warning (visible on stderr) and the exit status stays 0', () => {
  const script = `
    const { QuotaClock, manualClock } = require(${JSON.stringify(PKG)})
    const clock = manualClock({ wallMs: ${NOON} })
    const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, onAnomaly: () => { throw new Error('kaboom-42') } })
    clock.stepWall(-10000)
    limiter.tryConsume()
    setTimeout(() => {}, 200)
  `
  const r = runChild(script)
  assert.equal(r.signal, null, `stderr: ${r.stderr}`)
  assert.equal(r.status, 0, `stderr: ${r.stderr}`)
  assert.match(r.stderr, /Warning/)
  assert.match(r.stderr, /kaboom-42/)
})

// ---------------------------------------------------------------------------------------------
// process lifetime

test('a limiter with a pending callback does not keep the process alive (child exits promptly with status 0)', () => {
  const script = `
    const { QuotaClock, manualClock } = require(${JSON.stringify(PKG)})
    const clock = manualClock({ wallMs: ${NOON} })
    const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, onAnomaly: (a) => {} })
    clock.stepWall(-10000)
    const d = limiter.tryConsume()
    if (d.anomalies.length !== 1) process.exit(3)
    globalThis.keep = limiter
  `
  const r = runChild(script)
  assert.equal(r.signal, null, `the child was killed after ${r.elapsed} ms (it did not exit by itself); stderr: ${r.stderr}`)
  assert.equal(r.status, 0, `stderr: ${r.stderr}`)
  assert.ok(r.elapsed < 3000 * TIME_SCALE, `exited after ${r.elapsed} ms`)
})

test('a limiter with onAnomaly and no anomaly yet does not keep the process alive', () => {
  const script = `
    const { QuotaClock, manualClock, systemClock } = require(${JSON.stringify(PKG)})
    globalThis.a = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock(), onAnomaly: () => {} })
    globalThis.b = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'refuse', clock: systemClock(), onAnomaly: () => {} })
    globalThis.a.tryConsume(); globalThis.b.tryConsume()
  `
  const r = runChild(script)
  assert.equal(r.signal, null, `the child was killed after ${r.elapsed} ms; stderr: ${r.stderr}`)
  assert.equal(r.status, 0, `stderr: ${r.stderr}`)
  assert.ok(r.elapsed < 3000 * TIME_SCALE, `exited after ${r.elapsed} ms`)
})

test('many pending callbacks from many limiters do not keep the process alive', () => {
  const script = `
    const { QuotaClock, manualClock } = require(${JSON.stringify(PKG)})
    globalThis.all = []
    for (let i = 0; i < 50; i++) {
      const clock = manualClock({ wallMs: ${NOON} })
      const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'credit', clock, onAnomaly: () => { throw new Error('x') } })
      for (let k = 0; k < 5; k++) { clock.stepWall(k % 2 ? 60000 : -60000); limiter.tryConsume() }
      globalThis.all.push(limiter)
    }
  `
  const r = runChild(script)
  assert.equal(r.signal, null, `the child was killed after ${r.elapsed} ms; stderr: ${r.stderr}`)
  assert.equal(r.status, 0, `stderr: ${r.stderr}`)
  assert.ok(r.elapsed < 3000 * TIME_SCALE, `exited after ${r.elapsed} ms`)
})
