'use strict'
// A scenario run: QuotaClock against the naive four-line Date.now() bucket, both driven by the
// same manual clock through an NTP step back, an NTP step forward and a host suspend; then a
// monthly quota in Los Angeles across the DST change.
const { QuotaClock, manualClock, periodFor } = require('..')

/** The naive bucket everyone writes: refill from the wall clock's delta. */
class NaiveBucket {
  constructor(capacity, refillPerSecond, nowMs) {
    Object.assign(this, { capacity, refillPerSecond, tokens: 0, last: nowMs })
  }
  tryConsume(n, nowMs) {
    this.tokens = Math.min(this.capacity, this.tokens + ((nowMs - this.last) * this.refillPerSecond) / 1000)
    this.last = nowMs
    if (this.tokens < n) return false
    this.tokens -= n
    return true
  }
}

/** Runs `script` on a fresh manual clock, QuotaClock and naive bucket, printing each request. */
function scenario(title, clockInit, suspendPolicy, script) {
  console.log(`\n${title}`)
  const clock = manualClock(clockInit)
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, initialTokens: 0, suspendPolicy, clock })
  const naive = new NaiveBucket(10, 1, clock.wallMs())
  const request = (n) => {
    const decision = limiter.tryConsume(n)
    const naiveAllowed = naive.tryConsume(n, clock.wallMs())
    const ours = decision.allowed ? 'allowed' : `denied, retry in ${decision.retryAfterMs} ms (${decision.retryAfterBasis})`
    console.log(`  ask for ${n}: QuotaClock ${ours}; naive bucket ${naiveAllowed ? 'allowed' : 'denied'} (holds ${naive.tokens.toFixed(0)})`)
    for (const a of decision.anomalies) console.log(`    anomaly ${a.kind}: ${a.detail}`)
  }
  script(clock, request)
}

console.log('Bucket: capacity 10, refill 1 token/s, starts empty. Same manual clock for both.')
scenario('1. Idle 5 s, then NTP sets the wall clock back 1 h:', {}, 'ignore', (clock, request) => {
  clock.advance(5_000)
  clock.stepWall(-3_600_000)
  request(5) // 5 s of real refill is owed; the naive bucket subtracts an hour instead
})
scenario('2. 1 s after start, NTP sets the wall clock forward 1 h:', {}, 'ignore', (clock, request) => {
  clock.advance(1_000)
  clock.stepWall(3_600_000)
  request(10) // only 1 s really passed; the naive bucket hands out an hour of refill
})
scenario("3. The host sleeps 30 min; a reader of CLOCK_BOOTTIME tells a suspend from a step:", { elapsedRealtimeMs: 0 }, 'ignore', (clock, request) => {
  clock.suspend(30 * 60_000)
  request(10) // the suspend is real time: credited, and reported
})
scenario("4. The same sleep without a reader, suspendPolicy 'ignore':", {}, 'ignore', (clock, request) => {
  clock.suspend(30 * 60_000)
  request(10) // a suspend and a step look alike: credit only the monotonic time, and say so
})

console.log('\nA monthly quota in America/Los_Angeles, resetting at local midnight on the 1st:')
const spec = { unit: 'month', timeZone: 'America/Los_Angeles' }
for (const when of [Date.UTC(2024, 2, 15), Date.UTC(2024, 10, 15)]) {
  const p = periodFor(spec, when)
  const hours = (p.endMs - p.startMs) / 3_600_000
  console.log(`  ${p.id}: ${new Date(p.startMs).toISOString()} → ${new Date(p.endMs).toISOString()} (${hours} h, start ${p.startKind})`)
}
const gap = periodFor({ unit: 'day', timeZone: 'America/New_York', anchorTime: '02:30' }, Date.UTC(2024, 2, 10, 12))
console.log(`  New York, daily reset at 02:30 on 2024-03-10 (a DST gap): starts ${new Date(gap.startMs).toISOString()} (${gap.startKind}), ${(gap.endMs - gap.startMs) / 3_600_000} h long`)
