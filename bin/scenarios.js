'use strict'
// The scenarios of `quota-clock-source simulate` (SPEC §12): the classic naive Date.now() bucket
// and a QuotaClock, both read from one manual clock, through the clock events a real host sees.

const { QuotaClock, manualClock } = require('../index.js')

const HOUR = 3_600_000

/**
 * The classic naive bucket, as it is usually written: refill from the wall clock's delta,
 * clamped at 0 so a backwards step cannot put it in debt. `now` is `Date.now` in real code; here it
 * reads the scenario's manual clock.
 */
function naiveBucket({ capacity, refillPerSecond, initialTokens, now }) {
  let tokens = initialTokens
  let last = now()
  return {
    tryConsume(n) {
      const t = now()
      tokens = Math.min(capacity, tokens + (Math.max(0, t - last) / 1000) * refillPerSecond)
      last = t
      if (tokens < n) return false
      tokens -= n
      return true
    },
    get tokens() {
      return tokens
    },
  }
}

const BUCKET = { capacity: 10, refillPerSecond: 1, initialTokens: 10 }

/**
 * Each scenario: a bucket, a clock, a limiter's options and a script of clock events and requests.
 * `lesson` says what the run shows; the tests check the numbers behind each one.
 */
const SCENARIOS = [
  {
    name: 'step-back',
    title: 'NTP sets the wall clock back 1 h after 8 s idle',
    bucket: BUCKET,
    suspendPolicy: 'ignore',
    script({ request, advance, stepWall, every }) {
      request(10) // drain the bucket
      advance(8_000) // 8 s idle: 8 tokens are owed
      stepWall(-HOUR)
      request(5)
      every(1_000, 6, 1)
      advance(1_000)
      request(4)
      advance(12_000)
      request(10)
    },
    lesson: [
      'The naive bucket clamps the negative delta to 0 and moves its anchor to the new wall time: the 8 tokens owed for the 8 s before the step are lost, so it denies the request of 5 at 8 s and the request of 4 at 15 s, and stays short until it fills up again.',
      'QuotaClock credits the 8 s the monotonic clock measured and reports wall-step-back.',
    ],
  },
  {
    name: 'step-forward',
    title: 'NTP sets the wall clock forward 1 h, 1 s after the bucket was drained',
    bucket: BUCKET,
    suspendPolicy: 'ignore',
    script({ request, advance, stepWall, every }) {
      request(10)
      advance(1_000)
      stepWall(HOUR)
      request(10)
      every(1_000, 8, 1)
    },
    lesson: [
      'The naive bucket credits the hour the wall clock jumped: it refills completely for 1 s of real time and lets a burst of 10 through.',
      "QuotaClock credits the 1 s that passed ('ignore': nothing tells it the host slept) and reports ambiguous-wall-jump.",
    ],
  },
  {
    name: 'suspend',
    title: "The host sleeps 20 s; no CLOCK_BOOTTIME reader, suspendPolicy 'ignore'",
    bucket: BUCKET,
    suspendPolicy: 'ignore',
    script({ request, advance, suspend, every }) {
      request(10)
      advance(2_000)
      suspend(20_000)
      request(10)
      every(1_000, 8, 1)
    },
    lesson: [
      'To the naive bucket a suspend and a forward step are the same wall jump: here crediting it is right, in step-forward it is wrong, and it cannot know which.',
      "Neither can QuotaClock without a reader: 'ignore' credits the 2 s awake and reports ambiguous-wall-jump ('credit' would trust the wall, 'refuse' throws ERR_AMBIGUOUS_WALL_JUMP). On Linux, procUptimeElapsedRealtime() settles it: see suspend-with-reader.",
    ],
  },
  {
    name: 'suspend-with-reader',
    title: 'The host sleeps 20 s, later NTP sets the wall forward 1 h; a CLOCK_BOOTTIME reader tells them apart',
    bucket: BUCKET,
    suspendPolicy: 'ignore',
    clock: { elapsedRealtimeMs: 0 },
    script({ request, advance, suspend, stepWall, every }) {
      request(10)
      advance(2_000)
      suspend(20_000)
      request(10)
      advance(3_000)
      stepWall(HOUR)
      request(10)
      every(1_000, 6, 1)
    },
    lesson: [
      'The naive bucket credits both wall jumps alike: the sleep (right) and the step (10 tokens for 3 s of real time).',
      'QuotaClock asks the elapsed-realtime reader: the 20 s asleep are credited (suspend), the hour of step is not (wall-step-forward).',
    ],
  },
  {
    name: 'dst-gap',
    title: 'A daily quota of 3 in America/New_York resetting at 02:30, on 2024-03-10 when 02:30 never happened',
    bucket: BUCKET,
    suspendPolicy: 'ignore',
    clock: { wallMs: Date.UTC(2024, 2, 10, 6, 59, 50) }, // 01:59:50 EST, 10 s before the clocks spring ahead
    quota: { limit: 3, period: { unit: 'day', timeZone: 'America/New_York', anchorTime: '02:30' } },
    script({ every }) {
      every(2_000, 9, 1, { first: true })
    },
    lesson: [
      'The naive bucket has no calendar, so it has no daily quota to reset.',
      "QuotaClock's day 2024-03-09 ends and 2024-03-10 starts at 03:00 EDT (07:00Z), the instant the gap closes (startKind 'gap'); each denial waits exactly until then (basis wall-period).",
    ],
  },
  {
    name: 'month-end',
    title: 'A monthly quota of 3 in America/Los_Angeles across the end of February 2024, then NTP steps the wall back 10 s',
    bucket: BUCKET,
    suspendPolicy: 'ignore',
    clock: { wallMs: Date.UTC(2024, 2, 1, 7, 59, 56) }, // 23:59:56 PST on 29 February, 4 s before March
    quota: { limit: 3, period: { unit: 'month', timeZone: 'America/Los_Angeles' } },
    script({ request, advance, stepWall, every }) {
      every(2_000, 6, 1, { first: true }) // two in February, March opens at 08:00Z, three in March, one denied
      advance(1_000)
      stepWall(-10_000) // back to 23:59:57 PST on 29 February
      every(1_000, 5, 1, { first: true })
    },
    lesson: [
      "QuotaClock's March opens at midnight in Los Angeles (08:00Z), not at midnight UTC; a denial waits for the end of the month (basis wall-period).",
      "When NTP sets the wall back into February, QuotaClock holds March with its use (period-regression) instead of reopening February, which had a unit left; the naive bucket's clamp loses the second of refill owed before the step.",
    ],
  },
]

const NAMES = SCENARIOS.map((scenario) => scenario.name)

/**
 * Runs one scenario. Returns the §12 JSON (`scenario`, `steps`) and, for the text and the plot,
 * `timeline` (clock events and requests in order) and `meta` (the scenario's setup).
 */
function runScenario(name) {
  const scenario = SCENARIOS.find((candidate) => candidate.name === name)
  if (!scenario) throw new Error(`no scenario named ${name}`)
  const { capacity, refillPerSecond, initialTokens } = scenario.bucket
  const clock = manualClock(scenario.clock)
  const limiter = new QuotaClock({
    capacity,
    refillPerSecond,
    initialTokens,
    suspendPolicy: scenario.suspendPolicy,
    quota: scenario.quota,
    clock,
  })
  const naive = naiveBucket({ capacity, refillPerSecond, initialTokens, now: () => clock.wallMs() })

  let atMs = 0 // scenario time: real time since the start, awake or asleep; wall steps do not move it
  let awakeMs = 0 // the part of it the host was awake (what the monotonic clock counts)
  const steps = []
  const timeline = []
  // Where the clock is after each clock event, for the plot to draw the buckets between requests.
  const sample = () => timeline.push({ type: 'clock', atMs, awakeMs, wallMs: clock.wallMs() })
  sample()

  const request = (n = 1) => {
    const wallMs = clock.wallMs()
    const decision = limiter.tryConsume(n)
    const naiveAllowed = naive.tryConsume(n)
    const step = {
      atMs,
      n,
      naive: { allowed: naiveAllowed, tokens: naive.tokens },
      quotaClock: {
        allowed: decision.allowed,
        tokens: decision.tokens,
        retryAfterMs: decision.retryAfterMs,
        retryAfterBasis: decision.retryAfterBasis,
        anomalies: decision.anomalies,
      },
    }
    steps.push(step)
    const period = scenario.quota ? limiter.status().period : null // after the decision: reads the clock again, but it has not moved
    timeline.push({ type: 'request', step, atMs, awakeMs, wallMs, quotaRemaining: decision.quotaRemaining, periodId: period && period.id })
  }
  const advance = (ms) => {
    clock.advance(ms)
    atMs += ms
    awakeMs += ms
    sample()
  }
  const suspend = (ms) => {
    timeline.push({ type: 'suspend', atMs, ms })
    clock.suspend(ms)
    atMs += ms
    sample()
  }
  const stepWall = (deltaMs) => {
    timeline.push({ type: 'step', atMs, deltaMs })
    clock.stepWall(deltaMs)
    sample()
  }
  /** `count` requests of `n`, `intervalMs` apart (the first after one interval, or at once with `first`). */
  const every = (intervalMs, count, n, { first = false } = {}) => {
    for (let i = 0; i < count; i++) {
      if (i > 0 || !first) advance(intervalMs)
      request(n)
    }
  }
  scenario.script({ request, advance, suspend, stepWall, every })

  return {
    result: { scenario: scenario.name, steps },
    timeline,
    meta: {
      name: scenario.name,
      title: scenario.title,
      lesson: scenario.lesson,
      capacity,
      refillPerSecond,
      initialTokens,
      suspendPolicy: scenario.suspendPolicy,
      reader: typeof (scenario.clock && scenario.clock.elapsedRealtimeMs) === 'number',
      quota: scenario.quota || null,
      startWallMs: manualClock(scenario.clock).wallMs(),
      durationMs: atMs,
    },
  }
}

module.exports = { NAMES, SCENARIOS, runScenario, naiveBucket }
