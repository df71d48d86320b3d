'use strict'
// a handler that is async or returns a rejecting promise never breaks the process (its
// error becomes a warning), and deliveries waiting are bounded (10,000 per thread), past which
// they are dropped and one QUOTA_CLOCK_ANOMALIES_DROPPED warning says how many.
const test = require('node:test')
const assert = require('node:assert/strict')
const { runScript, runScriptRepeatedly } = require('./helpers/child.js')

const PRELUDE = `
const { QuotaClock, manualClock } = require(ROOT)
const warnings = []
process.on('warning', (warning) => warnings.push({ code: warning.code, message: warning.message }))
const base = { capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' }
/** A limiter on a manual clock whose wall steps back before every call: one anomaly each. */
function stepper(onAnomaly) {
  const clock = manualClock()
  const limiter = new QuotaClock({ ...base, clock, onAnomaly })
  return { limiter, step() { clock.stepWall(-1000); return limiter.tryConsume() } }
}
`

test('an async onAnomaly that throws, or one returning a rejected promise or a hostile thenable, becomes a warning; the process lives (3 runs)', () => {
  const runs = runScriptRepeatedly(
    3,
    `${PRELUDE}
    const handlers = {
      asyncThrow: async () => { throw new Error('async boom') },
      rejected: () => Promise.reject(new Error('rejected boom')),
      rejectedWithUndefined: () => Promise.reject(undefined),
      thenableThrows: () => ({ then() { throw new Error('then boom') } }),
      thenGetterThrows: () => ({ get then() { throw new Error('getter boom') } }),
      revokedProxy: () => { const p = Proxy.revocable({}, {}); p.revoke(); return p.proxy },
    }
    let calls = 0
    for (const handler of Object.values(handlers)) {
      const { step } = stepper((a) => { calls++; return handler(a) })
      step()
      step()
    }
    // Until every handler ran and each failure was reported (a generous deadline for a loaded machine).
    const threw = () => warnings.filter((w) => w.code === 'QUOTA_CLOCK_ON_ANOMALY_THREW').map((w) => w.message)
    const until = Date.now() + 10000
    const report = () => (calls >= 12 && threw().length >= 12) || Date.now() > until ? console.log(JSON.stringify({ calls, warnings: threw() })) : setTimeout(report, 10)
    setTimeout(report, 10)`,
  )
  for (const { result } of runs) {
    assert.equal(result.calls, 12, 'every handler was called for each anomaly')
    assert.equal(result.warnings.length, 12, 'each failure became one warning')
    for (const word of ['async boom', 'rejected boom', 'then boom', 'getter boom']) assert.ok(result.warnings.some((w) => w.includes(word)), `a warning names ${word}`)
  }
})

test('deliveries waiting are bounded at 10,000 per thread: the rest are dropped, one warning counts them, memory stays flat, delivery resumes', () => {
  const { result } = runScript(
    `${PRELUDE}
    let calls = 0
    // Two limiters (the bound is per thread, not per limiter).
    const a = stepper(() => { calls++ })
    const b = stepper(() => { calls++ })
    const rssBefore = process.memoryUsage().rss
    let onDecisions = 0
    for (let i = 0; i < 150000; i++) onDecisions += a.step().anomalies.length + b.step().anomalies.length
    const rssGrowthMb = (process.memoryUsage().rss - rssBefore) / 2 ** 20
    const dropped = () => warnings.filter((w) => w.code === 'QUOTA_CLOCK_ANOMALIES_DROPPED').map((w) => w.message)
    // Each wait: until the deliveries and the warning came (a generous deadline for a loaded
    // machine), then 50 ms more for any that should not come.
    const after = (done, then) => {
      const until = Date.now() + 10000
      const check = () => (done() || Date.now() > until ? setTimeout(then, 50) : setTimeout(check, 10))
      setTimeout(check, 10)
    }
    after(() => calls >= 10000 && dropped().length >= 1, () => {
      const afterFlood = { calls, dropped: dropped() }
      a.step()
      after(() => calls >= 10001, () => {
        console.log(JSON.stringify({ onDecisions, rssGrowthMb, afterFlood, callsLater: calls, droppedWarnings: dropped().length }))
      })
    })`,
  )
  assert.equal(result.onDecisions, 300000, 'every anomaly is still on its decision')
  assert.equal(result.afterFlood.calls, 10000, 'exactly 10,000 were delivered')
  assert.equal(result.afterFlood.dropped.length, 1, 'one warning')
  assert.match(result.afterFlood.dropped[0], /290000|290,000/, 'it says how many were dropped')
  assert.equal(result.callsLater, 10001, 'delivery resumes once the backlog has drained')
  assert.equal(result.droppedWarnings, 1, 'and no further warning without further drops')
  assert.ok(result.rssGrowthMb < 40, `memory stays bounded (${result.rssGrowthMb.toFixed(1)} MB for 300,000 anomalies; unbounded it was ~120 MB)`)
})
