'use strict'
// A naive Date.now()-style token bucket, driven by the same manual clock's wallMs() readings as a
// QuotaClock on that clock, to show where the naive one goes wrong and QuotaClock does not
// (real elapsed time e is credited from the monotonic delta, reconciled with the wall).

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, manualClock, QuotaClockError } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)
const CAP = 100
const RATE = 1 // token per second

/** The four-line naive bucket, reading the wall clock. */
function naiveBucket(clock, tokens) {
  let last = clock.wallMs()
  const refill = () => {
    const now = clock.wallMs()
    tokens = Math.min(CAP, tokens + ((now - last) * RATE) / 1000)
    last = now
  }
  return {
    get tokens() {
      refill()
      return tokens
    },
    tryConsume(n = 1) {
      refill()
      if (tokens >= n) {
        tokens -= n
        return true
      }
      return false
    },
  }
}

function pair({ policy = 'ignore', reader = false } = {}) {
  const clock = manualClock(reader ? { monotonicMs: 0, wallMs: NOON, elapsedRealtimeMs: 0 } : { monotonicMs: 0, wallMs: NOON })
  const limiter = new QuotaClock({ capacity: CAP, refillPerSecond: RATE, initialTokens: 0, suspendPolicy: policy, clock })
  const naive = naiveBucket(clock, 0)
  return { clock, limiter, naive }
}

const near = (a, b) => Math.abs(a - b) < 1e-9
const kinds = (d) => d.anomalies.map((a) => a.kind).sort()

/** How many n = 1 requests each bucket grants right now, in a burst. */
function burst(limiter, naive, max = CAP + 1) {
  let q = 0
  let n = 0
  for (let i = 0; i < max; i++) if (limiter.tryConsume().allowed) q++
  for (let i = 0; i < max; i++) if (naive.tryConsume()) n++
  return { quotaClock: q, naive: n }
}

test('control: on a sane clock (awake time only) the naive bucket and QuotaClock agree', () => {
  const { clock, limiter, naive } = pair()
  clock.advance(1500)
  assert.ok(near(naive.tokens, 1.5))
  assert.ok(near(limiter.status().tokens, 1.5))
  clock.advance(10_000)
  assert.deepEqual(burst(limiter, naive), { quotaClock: 11, naive: 11 })
})

test('(a) a backwards wall step erases the refill owed for the idle time before it: naive now − last is negative', () => {
  const { clock, limiter, naive } = pair()
  clock.advance(5000) // 5 s idle: 5 tokens are owed
  clock.stepWall(-60_000) // then NTP sets the wall back a minute
  // naive: tokens = 0 + (5000 − 60000) / 1000 = −55: the 5 owed tokens are gone and it is 55 in debt
  assert.ok(near(naive.tokens, -55))
  // QuotaClock (the reconciliation row dw < dm − tol): credits the full monotonic delta, 5000 ms, and says so
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
  assert.ok(near(d.tokens, 4))
  assert.deepEqual(kinds(d), ['wall-step-back'])
  assert.equal(naive.tryConsume(), false)
})

test('(a) after a backwards step the naive bucket stays empty for the length of the step; QuotaClock refills from real time', () => {
  const { clock, limiter, naive } = pair()
  clock.stepWall(-60_000)
  let naiveFirstAllowedAt = null
  let quotaClockFirstAllowedAt = null
  for (let s = 1; s <= 70; s++) {
    clock.advance(1000)
    if (naiveFirstAllowedAt === null && naive.tryConsume()) naiveFirstAllowedAt = s
    if (quotaClockFirstAllowedAt === null && limiter.tryConsume().allowed) quotaClockFirstAllowedAt = s
  }
  assert.equal(quotaClockFirstAllowedAt, 1, 'one real second refills one token')
  assert.equal(naiveFirstAllowedAt, 61, 'naive: 60 s of debt, then 1 s for the token')
})

test('(b) a forward wall step: the naive bucket hands out refill that never elapsed', () => {
  const { clock, naive, limiter } = pair({ policy: 'ignore' })
  clock.stepWall(60_000) // no time passes
  const d = limiter.tryConsume()
  assert.equal(d.allowed, false, "QuotaClock 'ignore' credits dm = 0")
  assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
  assert.equal(burst(limiter, naive).naive, 60, 'naive grants 60 requests for 0 ms of real time')
})

test('(b) a forward wall step with an elapsed-realtime reader: QuotaClock credits nothing (the stepped part never), reports wall-step-forward', () => {
  for (const policy of ['ignore', 'credit', 'refuse']) {
    const { clock, naive, limiter } = pair({ policy, reader: true })
    clock.stepWall(60_000)
    const d = limiter.tryConsume()
    assert.equal(d.allowed, false, policy)
    assert.deepEqual(kinds(d), ['wall-step-forward'], policy)
    assert.equal(d.anomalies[0].stepMs, 60_000)
    assert.equal(burst(limiter, naive).naive, 60, policy)
  }
})

test("(b) a forward wall step with 'refuse' and no reader: QuotaClock throws ERR_AMBIGUOUS_WALL_JUMP and credits only dm (0)", () => {
  const { clock, naive, limiter } = pair({ policy: 'refuse' })
  clock.stepWall(60_000)
  assert.throws(() => limiter.tryConsume(), (e) => e instanceof QuotaClockError && e.code === 'ERR_AMBIGUOUS_WALL_JUMP')
  assert.deepEqual(burst(limiter, naive), { quotaClock: 0, naive: 60 })
})

test("(b) a forward wall step with 'credit' and no reader: QuotaClock credits dw like the naive bucket, but flags ambiguous-wall-jump", () => {
  const { clock, naive, limiter } = pair({ policy: 'credit' })
  clock.stepWall(60_000)
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
  assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
  assert.equal(d.anomalies[0].creditedMs, 60_000)
  assert.ok(near(d.tokens, 59))
  assert.ok(near(naive.tokens, 60))
})

test('(c) a suspend looks exactly like a forward step to the naive bucket: it credits the 60 s in both cases', () => {
  const stepped = pair()
  stepped.clock.stepWall(60_000)
  const slept = pair()
  slept.clock.suspend(60_000)
  assert.equal(stepped.clock.wallMs(), slept.clock.wallMs())
  assert.ok(near(stepped.naive.tokens, 60))
  assert.ok(near(slept.naive.tokens, 60), 'naive: same wall readings, same answer; it cannot tell a suspend from a step')
})

test('(c) a suspend with a reader: QuotaClock credits the suspended 60 s (as the naive one does) yet credits 0 for the equal-looking step', () => {
  const slept = pair({ reader: true })
  slept.clock.suspend(60_000)
  const d = slept.limiter.tryConsume()
  assert.deepEqual(kinds(d), ['suspend'])
  assert.equal(d.anomalies[0].suspendedMs, 60_000)
  assert.ok(near(d.tokens, 59))
  assert.equal(slept.naive.tryConsume(), true)
  assert.ok(near(slept.naive.tokens, 59), 'here both are right: the host really slept 60 s')

  const stepped = pair({ reader: true })
  stepped.clock.stepWall(60_000)
  assert.ok(near(stepped.limiter.status().tokens, 0), 'QuotaClock tells the two apart')
  assert.ok(near(stepped.naive.tokens, 60), 'the naive bucket does not')
})

test("(c) a suspend with policy 'ignore' and no reader: the naive bucket hands out 60 s of refill, QuotaClock credits dm (0) and reports ambiguous-wall-jump", () => {
  const { clock, naive, limiter } = pair({ policy: 'ignore' })
  clock.advance(2000)
  clock.suspend(60_000)
  const d = limiter.tryConsume()
  assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
  assert.equal(d.anomalies[0].creditedMs, 2000)
  assert.ok(near(d.tokens, 1), 'only the 2 s awake are credited')
  assert.ok(near(naive.tokens, 62))
})

test('(d) a suspend hidden by an equal backwards wall step: the naive bucket loses it for good; QuotaClock with a reader claims it at the next forward divergence', () => {
  const { clock, naive, limiter } = pair({ reader: true })
  clock.suspend(60_000) // the host really slept a minute…
  clock.stepWall(-60_000) // …and NTP then set the wall back by the same minute
  assert.ok(near(naive.tokens, 0), 'naive: the wall did not move, so the 60 s sleep is lost')
  assert.ok(near(limiter.status().tokens, 0), 'QuotaClock: readings agree, nothing to claim yet')
  clock.stepWall(1000) // a later forward divergence (a 1 s step, no real time)
  assert.ok(near(naive.tokens, 1), 'naive: credits the 1 s step that never elapsed, still not the sleep')
  const d = limiter.tryConsume()
  assert.deepEqual(kinds(d), ['suspend', 'wall-step-back'])
  assert.ok(near(d.tokens, 59), 'QuotaClock: the 60 s really slept are credited, the step is not')
})
