'use strict'
// Values at the edges: wall readings outside the calendar's range, rates whose waits
// could not be finite, numbers and BigInts in messages, and options inherited from a polluted
// Object.prototype (only own properties are options).
const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, QuotaClockError, manualClock, periodFor } = require('..')
const { runScript } = require('./helpers/child.js')

const { PLAIN_OPTIONS: base } = require('./helpers/limiters')
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

function codeOf(fn) {
  try {
    fn()
    return 'no throw'
  } catch (error) {
    return { type: error.constructor.name, code: error.code, message: error.message, quotaClockError: error instanceof QuotaClockError }
  }
}

for (const [name, wallMs, earliestPlausibleWallMs] of [
  ['past +8.64e15', 8.64e15 + 1, undefined],
  ['far past it (1e300)', 1e300, undefined],
  ['before -8.64e15 (plausibility check off)', -8.64e15 - 1, null],
]) {
  test(`with a quota, a wall reading ${name} throws ERR_CLOCK_READING from tryConsume and status and changes no state`, () => {
    const clock = manualClock({ wallMs: Math.sign(wallMs) * 8.64e15 - Math.sign(wallMs) * 10_000 })
    const limiter = new QuotaClock({ ...base, clock, quota: { limit: 3, period: UTC_DAY }, ...(earliestPlausibleWallMs === undefined ? {} : { earliestPlausibleWallMs }) })
    assert.equal(limiter.tryConsume().quotaRemaining, 2)
    const before = limiter.status()
    const lastWall = clock.wallMs()
    clock.advance(1_000)
    clock.set({ wallMs })
    for (let i = 0; i < 3; i++) {
      for (const call of [() => limiter.tryConsume(), () => limiter.status()]) {
        const outcome = codeOf(call)
        assert.equal(outcome.code, 'ERR_CLOCK_READING', JSON.stringify(outcome))
        assert.ok(outcome.quotaClockError)
        assert.match(outcome.message, /8\.64e\+?15/, 'the message names the range')
      }
    }
    // Nothing changed: back inside the range, the limiter is where it was (the 1 s of refill is
    // credited now, against the readings it had before).
    clock.set({ wallMs: lastWall + 1_000 })
    const after = limiter.status()
    assert.equal(after.quotaUsed, before.quotaUsed)
    assert.equal(after.period.id, before.period.id)
    assert.equal(after.tokens, 5)
    assert.deepEqual(limiter.tryConsume().anomalies, [], 'the readings were not re-anchored on the refused wall reading')
  })
}

test('a wall reading outside the range at construction opens no period; the first reading inside it does', () => {
  const clock = manualClock({ wallMs: 9e15 })
  const limiter = new QuotaClock({ ...base, clock, quota: { limit: 3, period: UTC_DAY } })
  assert.equal(codeOf(() => limiter.tryConsume()).code, 'ERR_CLOCK_READING')
  clock.set({ wallMs: Date.UTC(2024, 0, 15) })
  const decision = limiter.tryConsume()
  assert.equal(decision.quotaRemaining, 2)
  assert.equal(limiter.status().period.id, '2024-01-15')
})

test('without a quota, a wall reading far outside the range is only a wall step', () => {
  const clock = manualClock()
  const limiter = new QuotaClock({ ...base, clock })
  clock.set({ wallMs: 1e300 })
  const decision = limiter.tryConsume()
  assert.equal(decision.allowed, true)
  assert.deepEqual(decision.anomalies.map((a) => a.kind), ['ambiguous-wall-jump'])
  assert.ok(decision.anomalies[0].detail.length < 400, `a readable detail: ${decision.anomalies[0].detail}`)
  assert.match(decision.anomalies[0].detail, /1e\+300/)
})

test('a refillPerSecond so small that the wait overflows (5e-324) gives the largest finite wait, never Infinity', () => {
  for (const [capacity, refillPerSecond, n, expected] of [
    [5, 5e-324, 1, Number.MAX_VALUE],
    [1, 1e-306, 1, Number.MAX_VALUE],
    [Number.MAX_VALUE, 1e-300, Number.MAX_SAFE_INTEGER, Number.MAX_VALUE],
    // Where the formula is finite, it is the formula.
    [5, 1e-300, 1, Math.ceil((1 / 1e-300) * 1000)],
    [5, 0.001, 2, 2_000_000],
  ]) {
    const limiter = new QuotaClock({ ...base, capacity, refillPerSecond, initialTokens: 0, clock: manualClock() })
    const decision = limiter.tryConsume(n)
    assert.equal(decision.allowed, false)
    assert.equal(decision.retryAfterMs, expected, `${capacity}/${refillPerSecond}`)
    assert.equal(decision.retryAfterBasis, 'monotonic-refill')
  }
})

test('messages print numbers as JavaScript does (1e+308, not 309 digits) and BigInts with their n', () => {
  const cases = [
    [() => new QuotaClock({ ...base, capacity: 10n }), 'received 10n'],
    [() => new QuotaClock({ ...base, capacity: -1e308 }), '-1e+308'],
    [() => new QuotaClock({ ...base, quota: { limit: 1e308, period: UTC_DAY } }), '1e+308'],
    [() => new QuotaClock({ ...base, quota: { limit: 5, period: { unit: 'month', timeZone: 'UTC', anchorDay: 1e308 } } }), '1e+308'],
    [() => new QuotaClock({ ...base, quota: { limit: 5, period: { unit: 'year', timeZone: 'UTC', anchorMonth: 1.5e-7 } } }), '1.5e-7'],
    [() => periodFor(UTC_DAY, 1e308), '1e+308'],
    [() => periodFor(UTC_DAY, 10n), '10n'],
    [() => new QuotaClock(base).tryConsume(10n), '10n'],
    [() => manualClock().advance(10n), '10n'],
    [() => manualClock().set({ wallMs: 2n ** 64n }), '18446744073709551616n'],
    [() => new QuotaClock({ ...base, clock: { monotonicMs: () => 1n, wallMs: () => 0 } }), '1n'],
  ]
  for (const [call, expected] of cases) {
    const outcome = codeOf(call)
    assert.ok(outcome.code, `coded: ${JSON.stringify(outcome)}`)
    assert.ok(outcome.message.includes(expected), `message includes ${expected}: ${outcome.message}`)
    assert.ok(outcome.message.length < 600, `short: ${outcome.message}`)
  }
  // Anomaly details with huge deltas.
  const clock = manualClock()
  const limiter = new QuotaClock({ ...base, clock })
  clock.stepWall(-1e308)
  const [anomaly] = limiter.tryConsume().anomalies
  assert.ok(anomaly.detail.includes('1e+308') && anomaly.detail.length < 400, anomaly.detail)
})

test('options are read from own properties only: a polluted Object.prototype is ignored (child process)', () => {
  const { result } = runScript(`
    const lib = require(ROOT)
    const period = { unit: 'day', timeZone: 'UTC' }
    const pollute = {
      suspendPolicy: 'credit', quota: { limit: 0, period }, capacity: 1, refillPerSecond: 1, initialTokens: 0,
      clock: { monotonicMs: () => 0, wallMs: () => 0 }, onAnomaly: () => { throw new Error('inherited handler called') },
      earliestPlausibleWallMs: 9e15, limit: 0, period, unit: 'hour', timeZone: 'Nowhere/Else', anchorDay: 40, anchorTime: '99:99',
      anchorMonth: 13, elapsedRealtimeMs: () => 0, monotonicMs: 5, wallMs: 5,
    }
    for (const [key, value] of Object.entries(pollute)) Object.prototype[key] = value
    const out = {}
    const attempt = (name, fn) => { try { out[name] = fn() } catch (error) { out[name] = { threw: error.code, message: error.message } } }
    attempt('missing suspendPolicy', () => new lib.QuotaClock({ capacity: 5, refillPerSecond: 2 }) && 'constructed')
    attempt('decision', () => {
      const clock = lib.manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15) })
      const limiter = new lib.QuotaClock({ capacity: 5, refillPerSecond: 2, suspendPolicy: 'ignore', clock })
      clock.stepWall(-5000)
      const d = limiter.tryConsume()
      return { allowed: d.allowed, tokens: d.tokens, quotaRemaining: d.quotaRemaining, status: limiter.status().quotaUsed }
    })
    attempt('quota period', () => {
      const limiter = new lib.QuotaClock({ capacity: 5, refillPerSecond: 2, suspendPolicy: 'ignore', quota: { limit: 3, period: { unit: 'day', timeZone: 'UTC' } } })
      const d = limiter.tryConsume()
      return { allowed: d.allowed, quotaRemaining: d.quotaRemaining, id: limiter.status().period.id.length }
    })
    attempt('periodFor', () => lib.periodFor({ unit: 'month', timeZone: 'UTC' }, Date.UTC(2024, 1, 10)).id)
    attempt('manual clock', () => { const c = lib.manualClock({}); return [c.monotonicMs(), Object.hasOwn(c, 'elapsedRealtimeMs')] })
    attempt('system clock', () => { const c = lib.systemClock({}); return [typeof c.elapsedRealtimeMs, Object.hasOwn(c, 'elapsedRealtimeMs')] })
    attempt('plain clock without a reader', () => {
      let reads = 0
      const limiter = new lib.QuotaClock({ capacity: 5, refillPerSecond: 2, suspendPolicy: 'refuse', clock: { monotonicMs: () => 0, wallMs: () => (reads++ === 0 ? Date.UTC(2024, 0, 15) : Date.UTC(2024, 0, 16)) } })
      try { limiter.tryConsume(); return 'no throw' } catch (error) { return error.code }
    })
    setTimeout(() => console.log(JSON.stringify(out)), 50)
  `)
  assert.equal(result['missing suspendPolicy'].threw, 'ERR_INVALID_OPTION')
  assert.match(result['missing suspendPolicy'].message, /suspendPolicy/)
  assert.deepEqual(result.decision, { allowed: true, tokens: 4, quotaRemaining: null, status: null })
  assert.deepEqual(result['quota period'], { allowed: true, quotaRemaining: 2, id: 10 })
  assert.equal(result.periodFor, '2024-02')
  assert.deepEqual(result['manual clock'], [0, false])
  assert.deepEqual(result['system clock'], ['function', false], "the inherited reader is not the clock's own")
  assert.equal(result['plain clock without a reader'], 'ERR_AMBIGUOUS_WALL_JUMP', 'an inherited elapsedRealtimeMs is not a reader')
})
