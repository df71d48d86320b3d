'use strict'
// All-or-nothing holds even when a clock cannot be read at rollback time: what an earlier limit
// took for a denied request is given back without reading its clock again. Real Express servers;
// the wall jump (which suspendPolicy 'refuse' throws for) and the clock that throws happen between
// the two limits' calls: when the later limit reads its own (JS) clock, after the earlier ones took.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')
const { serve } = require('./helpers/http-servers.js')

const month = { unit: 'month', timeZone: 'UTC' }
const JUNE_10_2025 = Date.UTC(2025, 5, 10, 12)
const HOUR_MS = 3_600_000

/**
 * A limit that denies every request (an empty bucket that refills once in ~17 minutes), on a JS
 * clock that runs `duringCall` when the limit reads it: after the earlier limits have taken.
 */
function denying(duringCall) {
  let armed = false
  const clock = {
    monotonicMs() {
      if (armed) duringCall()
      return performance.now()
    },
    wallMs: () => Date.now(),
  }
  const limiter = new QuotaClock({ capacity: 1, refillPerSecond: 0.001, initialTokens: 0, suspendPolicy: 'ignore', clock })
  armed = true
  return { limiter, name: 'strict' }
}

/** Sends one request through a real `kind` server with rateLimit(options) and checks it is denied (429). */
async function deniedOnce(kind, options, message) {
  const server = await serve(kind, rateLimit(options))
  try {
    const response = await server.get()
    assert.equal(response.status, 429, message)
    await response.arrayBuffer()
  } finally {
    await server.close()
  }
}

/** Status after the jump: the first reading after it is refused once (policy 'refuse'), then the limiter goes on. */
function statusAfterJump(read) {
  try {
    return read()
  } catch (error) {
    assert.equal(error.code, 'ERR_AMBIGUOUS_WALL_JUMP')
    return read()
  }
}

/** A JS clock (read in JS on every call) that can be made to throw. */
function breakableClock() {
  const clock = {
    broken: false,
    monotonicMs: () => performance.now(),
    wallMs() {
      if (this.broken) throw new Error('the clock is unreadable now')
      return JUNE_10_2025 + performance.now()
    },
  }
  return clock
}

for (const kind of ['Express 5', 'Express 4']) {
  describe(`${kind}: the earlier limit gets back what a denied request took, whatever its clock does`, () => {
    it('a QuotaClock with suspendPolicy refuse and a wall jump between the two limits', async () => {
      const clock = manualClock({ wallMs: JUNE_10_2025 })
      const earlier = new QuotaClock({ capacity: 5, refillPerSecond: 0.001, suspendPolicy: 'refuse', quota: { limit: 10, period: month }, clock })
      const limits = [{ limiter: earlier, name: 'tenant' }, denying(() => clock.stepWall(HOUR_MS))]
      await deniedOnce(kind, { limits })
      const status = statusAfterJump(() => earlier.status())
      assert.equal(status.tokens, 5, 'the token came back')
      assert.equal(status.quotaUsed, 0, 'the quota unit came back')
    })

    it('a KeyedQuotaClock with suspendPolicy refuse and a wall jump between the two limits', async () => {
      const clock = manualClock({ wallMs: JUNE_10_2025 })
      const earlier = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 0.001, suspendPolicy: 'refuse', quota: { limit: 10, period: month }, clock })
      const limits = [{ limiter: earlier, name: 'tenant', key: () => 'tenant-1', cost: () => 2 }, denying(() => clock.stepWall(HOUR_MS))]
      await deniedOnce(kind, { limits })
      const status = statusAfterJump(() => earlier.status('tenant-1'))
      assert.equal(status.tokens, 5)
      assert.equal(status.quotaUsed, 0)
    })

    it('a QuotaClock and a KeyedQuotaClock on a JS clock that throws at rollback time', async () => {
      const clockA = breakableClock()
      const clockB = breakableClock()
      const single = new QuotaClock({ capacity: 5, refillPerSecond: 0.001, suspendPolicy: 'ignore', quota: { limit: 10, period: month }, clock: clockA })
      const keyed = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 0.001, suspendPolicy: 'ignore', quota: { limit: 10, period: month }, clock: clockB })
      const breakBoth = () => {
        clockA.broken = true
        clockB.broken = true
      }
      const limits = [{ limiter: single, name: 'app' }, { limiter: keyed, name: 'tenant', key: () => 'tenant-1' }, denying(breakBoth)]
      await deniedOnce(kind, { limits, headers: false }, 'denied, not an error: the rollback read no clock')
      clockA.broken = false
      clockB.broken = false
      assert.deepEqual([single.status().tokens, single.status().quotaUsed], [5, 0])
      assert.deepEqual([keyed.status('tenant-1').tokens, keyed.status('tenant-1').quotaUsed], [5, 0])
    })
  })
}

describe('a rollback gives quota units back only to the period they were taken in', () => {
  it('units taken before a period boundary are not given to the next period', () => {
    const clock = manualClock({ wallMs: Date.UTC(2025, 5, 30, 23, 59, 59) })
    const limiter = new QuotaClock({ capacity: 100, refillPerSecond: 100, suspendPolicy: 'ignore', quota: { limit: 10, period: month }, clock })
    const keyed = new KeyedQuotaClock({ capacity: 100, refillPerSecond: 100, suspendPolicy: 'ignore', quota: { limit: 10, period: month }, clock })
    // A denial after the boundary by a later limit: the earlier decisions were made in June.
    let periodWhenTaken
    let keyedPeriodWhenTaken
    const later = denying(() => {
      if (periodWhenTaken !== undefined) return
      periodWhenTaken = limiter.status().period.id
      keyedPeriodWhenTaken = keyed.status('k').period.id
      clock.advance(2_000)
      // Another request in July, taking 3 units in the new period.
      limiter.tryConsume(3)
      keyed.tryConsume('k', 3)
    })
    const middleware = rateLimit({ limits: [{ limiter, name: 'app' }, { limiter: keyed, name: 'tenant', key: () => 'k' }, later], headers: false })
    const res = { statusCode: 200, headers: {}, setHeader(name, value) { this.headers[name] = value }, end() { this.ended = true } }
    middleware({ socket: { remoteAddress: '127.0.0.1' }, headers: {} }, res)
    assert.equal(res.statusCode, 429)
    assert.equal(periodWhenTaken, '2025-06')
    assert.equal(keyedPeriodWhenTaken, '2025-06')
    assert.equal(limiter.status().period.id, '2025-07')
    assert.equal(limiter.status().quotaUsed, 3, "July keeps its own use: June's unit is not given to it")
    assert.equal(keyed.status('k').quotaUsed, 3)
  })
})
