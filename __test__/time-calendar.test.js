'use strict'
// The calendar, the fixed cases: real zones, real DST gaps and repeats, and the limiter's open period
// (held on a backwards step, advanced and counted on a forward one). Expected instants are worked
// out by hand from the zones' rules (see the comments); the random cases are in
// time-calendar-oracle.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, manualClock, periodFor } = require('..')
const { TIME_SCALE } = require('./helpers/time-scale.js')

const H = 3_600_000
const utc = (iso) => Date.parse(iso)

function assertPeriod(actual, expected) {
  assert.deepEqual(
    { id: actual.id, start: new Date(actual.startMs).toISOString(), end: new Date(actual.endMs).toISOString(), startKind: actual.startKind },
    expected,
  )
}

test('New York, daily reset 02:30 on spring-forward day: the start snaps to 03:00 EDT and the day is 23.5 h', () => {
  const spec = { unit: 'day', timeZone: 'America/New_York', anchorTime: '02:30' }
  const p = periodFor(spec, utc('2024-03-10T12:00:00Z'))
  // 02:00 EST jumps to 03:00 EDT at 07:00Z; the next day's 02:30 EDT is 06:30Z.
  assertPeriod(p, { id: '2024-03-10', start: '2024-03-10T07:00:00.000Z', end: '2024-03-11T06:30:00.000Z', startKind: 'gap' })
  assert.equal(p.endMs - p.startMs, 23.5 * H)
  assert.equal(p.timeZone, 'America/New_York')
})

test('New York, daily reset 01:30 on fall-back day: the first 01:30 (EDT) and a 25 h day', () => {
  const p = periodFor({ unit: 'day', timeZone: 'America/New_York', anchorTime: '01:30' }, utc('2024-11-03T12:00:00Z'))
  assertPeriod(p, { id: '2024-11-03', start: '2024-11-03T05:30:00.000Z', end: '2024-11-04T06:30:00.000Z', startKind: 'repeat' })
  assert.equal(p.endMs - p.startMs, 25 * H)
})

test('a month anchored on the 31st clamps to 29 Feb, and the next slot is back on 31 Mar', () => {
  const spec = { unit: 'month', timeZone: 'UTC', anchorDay: 31 }
  assertPeriod(periodFor(spec, utc('2024-02-15T00:00:00Z')), { id: '2024-01', start: '2024-01-31T00:00:00.000Z', end: '2024-02-29T00:00:00.000Z', startKind: 'exact' })
  assertPeriod(periodFor(spec, utc('2024-03-01T00:00:00Z')), { id: '2024-02', start: '2024-02-29T00:00:00.000Z', end: '2024-03-31T00:00:00.000Z', startKind: 'exact' })
  assertPeriod(periodFor(spec, utc('2024-04-10T00:00:00Z')), { id: '2024-03', start: '2024-03-31T00:00:00.000Z', end: '2024-04-30T00:00:00.000Z', startKind: 'exact' })
})

test('Los Angeles monthly: March 2024 is 31 days minus the hour DST took', () => {
  const p = periodFor({ unit: 'month', timeZone: 'America/Los_Angeles' }, utc('2024-03-15T00:00:00Z'))
  assertPeriod(p, { id: '2024-03', start: '2024-03-01T08:00:00.000Z', end: '2024-04-01T07:00:00.000Z', startKind: 'exact' })
  assert.equal(p.endMs - p.startMs, (31 * 24 - 1) * H)
})

test('ISO weeks in Berlin start on Monday 00:00 local; the id is that Monday; a DST week is 167 h', () => {
  const spec = { unit: 'week', timeZone: 'Europe/Berlin' }
  assertPeriod(periodFor(spec, utc('2024-03-13T12:00:00Z')), { id: '2024-03-11', start: '2024-03-10T23:00:00.000Z', end: '2024-03-17T23:00:00.000Z', startKind: 'exact' })
  const dst = periodFor(spec, utc('2024-03-28T12:00:00Z'))
  assertPeriod(dst, { id: '2024-03-25', start: '2024-03-24T23:00:00.000Z', end: '2024-03-31T22:00:00.000Z', startKind: 'exact' })
  assert.equal(dst.endMs - dst.startMs, 167 * H)
  // anchorDay 7: weeks run Sunday to Sunday.
  assert.equal(periodFor({ ...spec, anchorDay: 7 }, utc('2024-03-13T12:00:00Z')).id, '2024-03-10')
})

test('a UK tax year: 6 April in Europe/London, which is 5 April 23:00Z under BST', () => {
  const p = periodFor({ unit: 'year', timeZone: 'Europe/London', anchorMonth: 4, anchorDay: 6 }, utc('2024-12-25T00:00:00Z'))
  assertPeriod(p, { id: '2024', start: '2024-04-05T23:00:00.000Z', end: '2025-04-05T23:00:00.000Z', startKind: 'exact' })
  assert.equal(periodFor({ unit: 'year', timeZone: 'Europe/London', anchorMonth: 4, anchorDay: 6 }, utc('2024-04-05T22:59:59.999Z')).id, '2023')
})

test('Pacific/Apia skipped 2011-12-30: the 29th (UTC-10) is followed directly by the 31st (UTC+14)', () => {
  const spec = { unit: 'day', timeZone: 'Pacific/Apia' }
  const the29th = periodFor(spec, utc('2011-12-29T12:00:00Z'))
  assertPeriod(the29th, { id: '2011-12-29', start: '2011-12-29T10:00:00.000Z', end: '2011-12-30T10:00:00.000Z', startKind: 'exact' })
  const the31st = periodFor(spec, the29th.endMs)
  assertPeriod(the31st, { id: '2011-12-31', start: '2011-12-30T10:00:00.000Z', end: '2011-12-31T10:00:00.000Z', startKind: 'exact' })
})

test("Sao Paulo's missing midnight: 2018-11-04 starts at 01:00 (-02), a 23 h day", () => {
  const p = periodFor({ unit: 'day', timeZone: 'America/Sao_Paulo' }, utc('2018-11-04T12:00:00Z'))
  assertPeriod(p, { id: '2018-11-04', start: '2018-11-04T03:00:00.000Z', end: '2018-11-05T02:00:00.000Z', startKind: 'gap' })
})

test("Lord Howe's half-hour DST: 02:15 falls in the October gap, 01:45 repeats in April", () => {
  // +10:30 standard, +11 summer; 02:00 → 02:30 on 2024-10-06, 02:00 → 01:30 on 2024-04-07.
  const spring = periodFor({ unit: 'day', timeZone: 'Australia/Lord_Howe', anchorTime: '02:15' }, utc('2024-10-06T00:00:00Z'))
  assertPeriod(spring, { id: '2024-10-06', start: '2024-10-05T15:30:00.000Z', end: '2024-10-06T15:15:00.000Z', startKind: 'gap' })
  const autumn = periodFor({ unit: 'day', timeZone: 'Australia/Lord_Howe', anchorTime: '01:45' }, utc('2024-04-07T00:00:00Z'))
  assertPeriod(autumn, { id: '2024-04-07', start: '2024-04-06T14:45:00.000Z', end: '2024-04-07T15:15:00.000Z', startKind: 'repeat' })
})

test('periods tile: each period starts where the previous one ended, across a year of DST in several zones', () => {
  for (const timeZone of ['America/New_York', 'Europe/London', 'Australia/Lord_Howe', 'America/Sao_Paulo', 'Asia/Kolkata']) {
    for (const unit of ['day', 'week', 'month']) {
      let p = periodFor({ unit, timeZone, anchorTime: '02:30' }, utc('2024-01-01T00:00:00Z'))
      for (let i = 0; i < (unit === 'day' ? 370 : 60); i++) {
        const next = periodFor({ unit, timeZone, anchorTime: '02:30' }, p.endMs)
        assert.equal(next.startMs, p.endMs, `${timeZone} ${unit} after ${p.id}`)
        assert.ok(next.endMs > next.startMs)
        assert.equal(periodFor({ unit, timeZone, anchorTime: '02:30' }, p.endMs - 1).id, p.id)
        p = next
      }
    }
  }
})

function dailyLimiter(clock, options = {}) {
  return new QuotaClock({
    capacity: 100,
    refillPerSecond: 100,
    suspendPolicy: 'credit',
    clock,
    quota: { limit: 3, period: { unit: 'day', timeZone: 'UTC', ...options.period } },
    ...options.limiter,
  })
}

test('a backwards step across a boundary holds the period with its consumption; period-regression once per episode', () => {
  const clock = manualClock({ wallMs: utc('2024-01-15T00:30:00Z') })
  const limiter = dailyLimiter(clock)
  assert.equal(limiter.tryConsume(2).quotaRemaining, 1)
  clock.stepWall(-H)
  const held = limiter.tryConsume()
  assert.equal(held.allowed, true)
  assert.equal(held.quotaRemaining, 0)
  assert.deepEqual(held.anomalies.map((a) => a.kind), ['wall-step-back', 'period-regression'])
  assert.equal(held.anomalies[1].periodId, '2024-01-15')
  const denied = limiter.tryConsume()
  assert.equal(denied.allowed, false)
  assert.equal(denied.retryAfterBasis, 'wall-period')
  assert.equal(denied.retryAfterMs, 24.5 * H) // until the held period's end, from 23:30 the day before
  assert.deepEqual(denied.anomalies, [], 'still the same episode')
  assert.equal(limiter.status().period.id, '2024-01-15')
  clock.stepWall(H) // back inside the period: the episode ends
  assert.deepEqual(limiter.tryConsume().anomalies.map((a) => a.kind), ['ambiguous-wall-jump'])
  clock.stepWall(-H)
  assert.deepEqual(limiter.tryConsume().anomalies.map((a) => a.kind), ['wall-step-back', 'period-regression'])
})

test('forward across boundaries the period advances with fresh consumption; period-skip counts whole periods', () => {
  const clock = manualClock({ wallMs: utc('2024-01-15T23:00:00Z') })
  const limiter = dailyLimiter(clock)
  limiter.tryConsume(3)
  clock.advance(2 * H) // an ordinary boundary: no anomaly
  const next = limiter.tryConsume()
  assert.deepEqual(next.anomalies, [])
  assert.equal(next.quotaRemaining, 2)
  clock.stepWall(3 * 24 * H) // an NTP step over three days: 16th → 19th, skipping 17th and 18th
  const skipped = limiter.tryConsume()
  const skip = skipped.anomalies.find((a) => a.kind === 'period-skip')
  assert.equal(skip.skipped, 2)
  assert.equal(skip.periodId, '2024-01-19')
  assert.equal(skipped.quotaRemaining, 2)
})

test('period-skip is exact and O(1) for a jump of a thousand years', () => {
  const clock = manualClock({ wallMs: utc('2024-01-15T12:00:00Z') })
  const limiter = dailyLimiter(clock)
  const target = utc('3024-01-15T12:00:00Z')
  clock.set({ wallMs: target })
  const started = process.hrtime.bigint()
  const decision = limiter.tryConsume()
  let elapsedMs = Number(process.hrtime.bigint() - started) / 1e6
  const skip = decision.anomalies.find((a) => a.kind === 'period-skip')
  assert.equal(skip.skipped, (target - utc('2024-01-15T12:00:00Z')) / (24 * H) - 1)
  // The fastest of five jumps on fresh limiters: a loaded machine may preempt one call, not all five.
  for (let i = 0; i < 4 && elapsedMs >= 50 * TIME_SCALE; i++) {
    const again = manualClock({ wallMs: utc('2024-01-15T12:00:00Z') })
    const other = dailyLimiter(again)
    again.set({ wallMs: target })
    const from = process.hrtime.bigint()
    other.tryConsume()
    elapsedMs = Math.min(elapsedMs, Number(process.hrtime.bigint() - from) / 1e6)
  }
  assert.ok(elapsedMs < 50 * TIME_SCALE, `took ${elapsedMs} ms`)
})

test("a skip across Apia's missing day does not count it", () => {
  const clock = manualClock({ wallMs: utc('2011-12-28T12:00:00Z') }) // 28 Dec, 02:00 local
  const limiter = dailyLimiter(clock, { period: { timeZone: 'Pacific/Apia' }, limiter: { earliestPlausibleWallMs: null } })
  clock.stepWall(utc('2011-12-30T22:00:00Z') - clock.wallMs()) // 31 Dec, 12:00 local
  const skip = limiter.tryConsume().anomalies.find((a) => a.kind === 'period-skip')
  assert.deepEqual({ skipped: skip.skipped, periodId: skip.periodId }, { skipped: 1, periodId: '2011-12-31' })
})

test('the first period opens at the first plausible wall reading, construction included', () => {
  const clock = manualClock({ wallMs: Date.UTC(1970, 0, 1) })
  const limiter = dailyLimiter(clock)
  clock.set({ wallMs: utc('2024-01-15T10:00:00Z') })
  const decision = limiter.tryConsume()
  assert.equal(decision.quotaRemaining, 2)
  assert.deepEqual(decision.anomalies.map((a) => a.kind), ['ambiguous-wall-jump'], 'no period anomaly for the first period')
  assert.equal(limiter.status().period.id, '2024-01-15')
})

test("limiter.periodFor applies the limiter's own spec; status() reports the open period", () => {
  const clock = manualClock({ wallMs: utc('2024-03-10T12:00:00Z') })
  const limiter = dailyLimiter(clock, { period: { timeZone: 'America/New_York', anchorTime: '02:30' } })
  assert.deepEqual(limiter.periodFor(utc('2024-03-10T12:00:00Z')), periodFor({ unit: 'day', timeZone: 'America/New_York', anchorTime: '02:30' }, utc('2024-03-10T12:00:00Z')))
  assert.equal(limiter.status().period.startKind, 'gap')
  assert.equal(new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock }).periodFor(0), null)
})
