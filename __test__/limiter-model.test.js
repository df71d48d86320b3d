'use strict'
// A property test of the public API against a small JS model of the calendar quota: random limiters
// (policy, reader, quota on UTC days or months, plausibility) on a manual clock, driven through
// random clock histories (awake time, suspends, NTP steps both ways, monotonic regressions,
// readings outside the calendar's range). After every call, the limiter and the model must agree
// exactly: allowed, retryAfterMs and its basis, tokens, quotaRemaining, the anomalies (kind and
// numbers), the error code, and what status() reports. fast-check shrinks any disagreement to a
// minimal history; the seed is printed so that it can be replayed.
const test = require('node:test')
const assert = require('node:assert/strict')
const fc = require('fast-check')
const { QuotaClock, manualClock } = require('..')

const DAY_MS = 86_400_000
const MAX_WALL_MS = 8.64e15
const JAN_15_2024 = Date.UTC(2024, 0, 15)
const EARLIEST = Date.UTC(2020, 0, 1)

// ---------------------------------------------------------------------------------------------
// The model: the decision, the reconciliation and the open period, written from the documented rules.

/** UTC day or month slots, from the wall reading alone. */
function utcPeriod(unit, wallMs) {
  if (unit === 'day') {
    const slot = Math.floor(wallMs / DAY_MS)
    return { slot, startMs: slot * DAY_MS, endMs: (slot + 1) * DAY_MS }
  }
  const date = new Date(wallMs)
  const slot = date.getUTCFullYear() * 12 + date.getUTCMonth()
  // Not Date.UTC: the month after the last one a Date can hold still has a start.
  const startOf = (k) => daysFromCivil(Math.floor(k / 12), (((k % 12) + 12) % 12) + 1, 1) * DAY_MS
  return { slot, startMs: startOf(slot), endMs: startOf(slot + 1) }
}

/** Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
function daysFromCivil(year, month, day) {
  const y = month <= 2 ? year - 1 : year
  const era = Math.floor(y / 400)
  const yearOfEra = y - era * 400
  const dayOfYear = Math.floor((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5) + day - 1
  const dayOfEra = yearOfEra * 365 + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100) + dayOfYear
  return era * 146097 + dayOfEra - 719468
}

class Model {
  constructor(setup, clock) {
    Object.assign(this, setup)
    this.tokens = setup.initialTokens
    this.lastM = clock.monotonicMs
    this.lastW = clock.wallMs
    this.baseline = setup.reader ? { er: clock.readElapsed(), m: clock.monotonicMs } : null
    this.latched = false
    this.open = null
    this.used = 0
    this.regressionReported = false
    // Real time credited so far, and where on it the open period was entered (a hold lasts at
    // most the held period's own length of it).
    this.timeline = 0
    this.enteredAt = 0
    if (this.quota && this.plausible(clock.wallMs)) this.open = utcPeriod(this.quota.unit, clock.wallMs)
  }

  plausible(wallMs) {
    return Math.abs(wallMs) <= MAX_WALL_MS && (this.earliest === null || wallMs >= this.earliest)
  }

  observe(clock) {
    if (this.latched) return { error: 'ERR_MONOTONIC_REGRESSION' }
    const m = clock.monotonicMs
    const w = clock.wallMs
    const dm = m - this.lastM
    if (dm < 0) {
      this.latched = true
      return { error: 'ERR_MONOTONIC_REGRESSION' }
    }
    if (this.quota) {
      if (!(Math.abs(w) <= MAX_WALL_MS)) return { error: 'ERR_CLOCK_READING' }
      if (this.earliest !== null && w < this.earliest) return { error: 'ERR_IMPLAUSIBLE_WALL_CLOCK' }
    }
    const dw = w - this.lastW
    const tol = 250 + 0.0005 * dm
    const anomalies = []
    const raise = (kind, credited, extra = {}) => anomalies.push({ kind, monotonicDeltaMs: dm, wallDeltaMs: dw, creditedMs: credited, ...extra })
    let credited = dm
    let refused = false
    if (dw < dm - tol) {
      raise('wall-step-back', dm, { stepMs: dw - dm })
    } else if (dw > dm + tol) {
      if (this.baseline) {
        const er = clock.readElapsed()
        const suspended = Math.max(0, er - this.baseline.er - (m - this.baseline.m))
        this.baseline = { er, m }
        credited = dm + suspended
        const step = dw - dm - suspended
        if (suspended > 0) raise('suspend', credited, { suspendedMs: suspended })
        if (step > tol || step < -tol) raise(step < 0 ? 'wall-step-back' : 'wall-step-forward', credited, { stepMs: step })
      } else if (this.policy === 'refuse') {
        refused = true
      } else {
        credited = this.policy === 'credit' ? dw : dm
        raise('ambiguous-wall-jump', credited)
      }
    }
    const refill = (credited * this.refillPerSecond) / 1000
    if (refill > 0) this.tokens = Math.min(this.tokens + refill, this.capacity)
    this.lastM = m
    this.lastW = w
    this.timeline += credited
    if (refused) return { error: 'ERR_AMBIGUOUS_WALL_JUMP' }
    if (this.quota) {
      const deltas = { monotonicDeltaMs: dm, wallDeltaMs: dw, creditedMs: credited }
      if (this.open === null) {
        this.open = utcPeriod(this.quota.unit, w)
        this.enteredAt = this.timeline
      } else if (w >= this.open.startMs && w < this.open.endMs) {
        this.regressionReported = false
      } else if (w < this.open.startMs && this.timeline - this.enteredAt >= this.open.endMs - this.open.startMs) {
        // The hold is over: the period follows the wall clock again.
        anomalies.push({ kind: 'period-regression', ...deltas })
        this.open = utcPeriod(this.quota.unit, w)
        this.enteredAt = this.timeline
        this.used = 0
        this.regressionReported = false
      } else if (w < this.open.startMs) {
        if (!this.regressionReported) {
          this.regressionReported = true
          anomalies.push({ kind: 'period-regression', ...deltas })
        }
      } else {
        const next = utcPeriod(this.quota.unit, w)
        const skipped = next.slot - this.open.slot - 1
        if (skipped > 0) anomalies.push({ kind: 'period-skip', ...deltas, skipped })
        this.open = next
        this.enteredAt = this.timeline
        this.used = 0
        this.regressionReported = false
      }
    }
    return { anomalies, wallMs: w }
  }

  tryConsume(n, clock) {
    const observed = this.observe(clock)
    if (observed.error) return observed
    const bucketAdmits = this.tokens >= n
    const quotaAdmits = !this.quota || n <= this.quota.limit - this.used
    const quotaRemaining = () => (this.quota ? this.quota.limit - this.used : null)
    if (bucketAdmits && quotaAdmits) {
      this.tokens -= n
      if (this.quota) this.used += n
      return { decision: { allowed: true, retryAfterMs: 0, retryAfterBasis: null, tokens: this.tokens, quotaRemaining: quotaRemaining() }, anomalies: observed.anomalies }
    }
    const bucketWait = bucketAdmits ? 0 : Math.min(Math.ceil(((n - this.tokens) / this.refillPerSecond) * 1000), Number.MAX_VALUE)
    const quotaWait = quotaAdmits ? null : Math.max(0, Math.ceil(this.open.endMs - observed.wallMs))
    const [retryAfterMs, retryAfterBasis] = quotaWait !== null && quotaWait >= bucketWait ? [quotaWait, 'wall-period'] : [bucketWait, 'monotonic-refill']
    return { decision: { allowed: false, retryAfterMs, retryAfterBasis, tokens: this.tokens, quotaRemaining: quotaRemaining() }, anomalies: observed.anomalies }
  }

  status(clock) {
    const observed = this.observe(clock)
    if (observed.error) return observed
    return { status: { tokens: this.tokens, quotaUsed: this.quota ? this.used : null, quotaRemaining: this.quota ? this.quota.limit - this.used : null }, anomalies: observed.anomalies }
  }
}

/** The model's view of the manual clock (same moves, same numbers). */
class ModelClock {
  constructor(init) {
    this.monotonicMs = init.monotonicMs
    this.wallMs = init.wallMs
    this.elapsedMs = init.elapsedRealtimeMs
  }
  readElapsed() {
    this.reads = (this.reads ?? 0) + 1
    return this.elapsedMs
  }
  apply([kind, value]) {
    if (kind === 'advance') {
      this.monotonicMs += value
      this.wallMs += value
      if (this.elapsedMs !== undefined) this.elapsedMs += value
    } else if (kind === 'suspend') {
      this.wallMs += value
      if (this.elapsedMs !== undefined) this.elapsedMs += value
    } else if (kind === 'stepWall') {
      this.wallMs += value
    } else if (kind === 'setMonotonic') {
      this.monotonicMs = value
    } else if (kind === 'setWall') {
      this.wallMs = value
    }
  }
}

function applyToManual(clock, [kind, value]) {
  if (kind === 'setMonotonic') clock.set({ monotonicMs: value })
  else if (kind === 'setWall') clock.set({ wallMs: value })
  else clock[kind](value)
}

// ---------------------------------------------------------------------------------------------
// Random setups and histories.

const setupArbitrary = fc.record({
  capacity: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.double({ min: 1, max: 1e6, noNaN: true })),
  refillPerSecond: fc.oneof(fc.double({ min: 1e-3, max: 1e4, noNaN: true }), fc.constantFrom(5e-324, 1e-300, 1e300)),
  initialFraction: fc.double({ min: 0, max: 1, noNaN: true }),
  policy: fc.constantFrom('ignore', 'credit', 'refuse'),
  reader: fc.boolean(),
  quota: fc.option(fc.record({ limit: fc.integer({ min: 0, max: 30 }), unit: fc.constantFrom('day', 'month') }), { nil: null }),
  earliest: fc.constantFrom(EARLIEST, null),
})

const duration = fc.oneof(
  { weight: 5, arbitrary: fc.double({ min: 0, max: 2_000, noNaN: true }) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 3 * DAY_MS }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 100 * DAY_MS }) },
)
const moveArbitrary = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(fc.constant('advance'), duration) },
  { weight: 2, arbitrary: fc.tuple(fc.constant('suspend'), duration) },
  { weight: 3, arbitrary: fc.tuple(fc.constant('stepWall'), fc.oneof(duration, duration.map((d) => -d), fc.integer({ min: -260, max: 260 }))) },
  // Awake time, then a wall step at the edge of the tolerance for the monotonic time since the last call.
  { weight: 2, arbitrary: fc.tuple(fc.constant('edge'), fc.tuple(fc.integer({ min: 0, max: 2_000_000 }), fc.constantFrom(-1, 1), fc.double({ min: -2, max: 2, noNaN: true }))) },
  { weight: 1, arbitrary: fc.tuple(fc.constant('setWall'), fc.constantFrom(0, MAX_WALL_MS, MAX_WALL_MS + 1, -MAX_WALL_MS - 1, 1e300, EARLIEST - 1, JAN_15_2024 + 40 * DAY_MS)) },
)
const stepArbitrary = fc.record({
  move: moveArbitrary,
  call: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 3 }) }, { weight: 1, arbitrary: fc.constant('status') }),
  regress: fc.oneof({ weight: 30, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
})

function outcomeOf(fn) {
  try {
    return { value: fn() }
  } catch (error) {
    return { error: error.code ?? `uncoded ${error}` }
  }
}

/** The anomaly fields the model computes (detail is a sentence for people, not compared). */
function comparable(anomalies) {
  return anomalies.map(({ detail, periodId: _periodId, ...rest }) => {
    assert.equal(typeof detail, 'string')
    return rest
  })
}

function run(setup, steps) {
  const init = { monotonicMs: 10_000, wallMs: JAN_15_2024 + 10_000, ...(setup.reader ? { elapsedRealtimeMs: 10_000 } : {}) }
  const clock = manualClock(init)
  const modelClock = new ModelClock(init)
  const capacity = setup.capacity
  const options = {
    capacity,
    refillPerSecond: setup.refillPerSecond,
    initialTokens: capacity * setup.initialFraction,
    suspendPolicy: setup.policy,
    earliestPlausibleWallMs: setup.earliest,
    clock,
    ...(setup.quota ? { quota: { limit: setup.quota.limit, period: { unit: setup.quota.unit, timeZone: 'UTC' } } } : {}),
  }
  const limiter = new QuotaClock(options)
  const model = new Model({ capacity, refillPerSecond: setup.refillPerSecond, initialTokens: options.initialTokens, policy: setup.policy, reader: setup.reader, quota: setup.quota, earliest: setup.earliest }, modelClock)
  for (const [index, step] of steps.entries()) {
    let { move } = step
    const { call, regress } = step
    const where = `step ${index}: ${JSON.stringify(move)} then ${call}`
    if (move[0] === 'edge') {
      const [awakeMs, sign, offsetMs] = move[1]
      applyToManual(clock, ['advance', awakeMs])
      modelClock.apply(['advance', awakeMs])
      const dm = modelClock.monotonicMs - model.lastM
      move = ['stepWall', sign * (250 + 0.0005 * dm) + offsetMs]
    }
    const effective = regress ? ['setMonotonic', clock.monotonicMs() - 1] : move
    applyToManual(clock, effective)
    modelClock.apply(effective)
    if (call === 'status') {
      const actual = outcomeOf(() => limiter.status())
      const expected = model.status(modelClock)
      assert.equal(actual.error, expected.error, `${where}: error`)
      if (expected.error) continue
      const { tokens, quotaUsed, quotaRemaining } = actual.value
      assert.deepEqual({ tokens, quotaUsed, quotaRemaining }, expected.status, where)
      continue
    }
    const n = Math.min(call, Math.floor(capacity))
    const actual = outcomeOf(() => limiter.tryConsume(n))
    const expected = model.tryConsume(n, modelClock)
    assert.equal(actual.error, expected.error, `${where}: error`)
    if (expected.error) continue
    const { anomalies, ...decision } = actual.value
    assert.deepEqual(decision, expected.decision, `${where}: decision`)
    assert.deepEqual(comparable(anomalies), expected.anomalies, `${where}: anomalies`)
  }
  // the reader is called at construction and only in the wall-ahead row.
  assert.equal(clock.elapsedRealtimeReads, modelClock.reads ?? 0, 'elapsed-realtime reads')
}

test('the public API decides exactly as a JS model of the contract, over random clock histories', () => {
  fc.assert(fc.property(setupArbitrary, fc.array(stepArbitrary, { minLength: 1, maxLength: 40 }), run), { numRuns: 3000, seed: 0x5eed })
})

test('the same with fresh seeds (a regression found here is printed with its seed)', () => {
  fc.assert(fc.property(setupArbitrary, fc.array(stepArbitrary, { minLength: 1, maxLength: 40 }), run), { numRuns: 1500 })
})
