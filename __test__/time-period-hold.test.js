'use strict'
// A backwards hold lasts at most the held period's own length of real elapsed time: one bogus
// far-future wall reading (a year-2100 RTC, or the calendar's last instant) must not freeze a
// quota for decades. When the hold ends that way, the period follows the wall clock again and a
// period-regression anomaly says the hold ended.

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, KeyedQuotaClock, manualClock, periodFor } = require('..')

const DAY_MS = 86_400_000
const JUNE_10_2025 = Date.UTC(2025, 5, 10, 12)
const month = { unit: 'month', timeZone: 'UTC' }
const BOGUS_READINGS = [Date.UTC(2100, 0, 1), 8.64e15]

for (const bogus of BOGUS_READINGS) {
  test(`QuotaClock: after a wall reading of ${new Date(bogus).toISOString()}, the period is the right one again once the held period's length has passed`, () => {
    const clock = manualClock({ wallMs: JUNE_10_2025 })
    const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 10, suspendPolicy: 'ignore', quota: { limit: 100, period: month }, clock })
    clock.advance(1_000)
    clock.set({ wallMs: bogus })
    assert.equal(limiter.tryConsume().allowed, true)
    const held = limiter.status().period
    assert.equal(held.id, periodFor(month, bogus).id)
    // The right time again: the bogus period is held, with its use.
    clock.set({ wallMs: JUNE_10_2025 + 2_000 })
    const back = limiter.tryConsume()
    assert.equal(back.quotaRemaining, 98)
    assert.ok(back.anomalies.some((a) => a.kind === 'period-regression'))
    const heldLengthMs = held.endMs - held.startMs
    clock.advance(heldLengthMs - 60_000)
    assert.equal(limiter.status().period.id, held.id, 'held for less than its own length')
    clock.advance(120_000)
    const decision = limiter.tryConsume()
    const ended = decision.anomalies.filter((a) => a.kind === 'period-regression')
    assert.equal(ended.length, 1, JSON.stringify(decision.anomalies))
    assert.match(ended[0].detail, /hold/)
    assert.match(ended[0].detail, /ended/)
    const right = periodFor(month, clock.wallMs())
    assert.equal(ended[0].periodId, right.id)
    assert.equal(decision.quotaRemaining, 99, 'the right period starts at zero use')
    assert.deepEqual(limiter.status().period, right)
  })

  test(`KeyedQuotaClock: every key of the spec leaves the held period of ${new Date(bogus).toISOString()} after its length of real time`, () => {
    const clock = manualClock({ wallMs: JUNE_10_2025 })
    const anomalies = []
    const limiter = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 10, suspendPolicy: 'ignore', quota: { limit: 100, period: month }, clock })
    clock.advance(1_000)
    clock.set({ wallMs: bogus })
    limiter.tryConsume('a', 3)
    const held = limiter.status('a').period
    clock.set({ wallMs: JUNE_10_2025 + 2_000 })
    anomalies.push(...limiter.tryConsume('b').anomalies)
    assert.equal(limiter.status('a').quotaUsed, 3)
    assert.equal(limiter.status('a').period.id, held.id)
    // Real time passes in steps, calls made for another key (the limiter's timeline is one).
    const steps = Math.ceil((held.endMs - held.startMs) / DAY_MS) + 1
    for (let i = 0; i < steps; i++) {
      clock.advance(DAY_MS)
      anomalies.push(...limiter.tryConsume('b').anomalies)
    }
    const right = periodFor(month, clock.wallMs())
    const status = limiter.status('a')
    assert.equal(status.period.id, right.id)
    assert.equal(status.quotaUsed, 0, "a's use was in the held period")
    const ended = anomalies.filter((a) => a.kind === 'period-regression' && /ended/.test(a.detail))
    assert.equal(ended.length, 1, JSON.stringify(anomalies))
  })
}

test('an honest step back across a boundary is still held until the wall clock comes back', () => {
  const clock = manualClock({ wallMs: Date.UTC(2025, 6, 1, 0, 10) })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 10, suspendPolicy: 'ignore', quota: { limit: 100, period: month }, clock })
  limiter.tryConsume(4)
  clock.stepWall(-3_600_000)
  for (let minute = 0; minute < 49; minute++) {
    clock.advance(60_000)
    const status = limiter.status()
    assert.equal(status.period.id, '2025-07')
    assert.equal(status.quotaUsed, 4)
  }
})
