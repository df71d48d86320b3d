'use strict'
// clock sources: systemClock, hostElapsedRealtime, procUptimeElapsedRealtime, plain JS object clocks, manualClock.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { QuotaClock, manualClock, systemClock, hostElapsedRealtime, procUptimeElapsedRealtime, QuotaClockError } = require('..')
const native = require('../lib/native/native.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const hrtimeMs = () => Number(process.hrtime.bigint()) / 1e6 // CLOCK_MONOTONIC on Linux (libuv)

function assertClockReadingError(fn) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof QuotaClockError, `expected QuotaClockError, got ${error && error.constructor && error.constructor.name}: ${error && error.message}`)
    assert.equal(error.code, 'ERR_CLOCK_READING')
    return true
  })
}

// ---------------------------------------------------------------------------------------------
// systemClock

test('systemClock() is a clock source: monotonicMs() and wallMs() return finite milliseconds', () => {
  const clock = systemClock()
  assert.equal(typeof clock.monotonicMs, 'function')
  assert.equal(typeof clock.wallMs, 'function')
  assert.ok(Number.isFinite(clock.monotonicMs()))
  assert.ok(Number.isFinite(clock.wallMs()))
})

test('systemClock() reads CLOCK_REALTIME: wallMs() agrees with Date.now()', () => {
  const clock = systemClock()
  const before = Date.now()
  const wall = clock.wallMs()
  const after = Date.now()
  assert.ok(wall >= before - 5 && wall <= after + 5, `wall ${wall} not within [${before}, ${after}]`)
})

test('systemClock() reads CLOCK_MONOTONIC: monotonicMs() agrees with process.hrtime (CLOCK_MONOTONIC) and never goes back', { skip: process.platform !== 'linux' && 'hrtime is CLOCK_MONOTONIC only on Linux' }, () => {
  const clock = systemClock()
  const before = hrtimeMs()
  const mono = clock.monotonicMs()
  const after = hrtimeMs()
  assert.ok(mono >= before - 5 && mono <= after + 5, `monotonic ${mono} not within [${before}, ${after}]`)
  let last = clock.monotonicMs()
  for (let i = 0; i < 10_000; i++) {
    const now = clock.monotonicMs()
    assert.ok(now >= last)
    last = now
  }
})

test('systemClock() without options has no elapsed-realtime reader', () => {
  const clock = systemClock()
  assert.notEqual(typeof clock.elapsedRealtimeMs, 'function')
})

test('systemClock({ elapsedRealtimeMs: reader }) adds a suspend-inclusive reader', () => {
  let calls = 0
  const clock = systemClock({ elapsedRealtimeMs: () => (calls++, 123_456) })
  assert.equal(typeof clock.elapsedRealtimeMs, 'function')
  assert.equal(clock.elapsedRealtimeMs(), 123_456)
  assert.equal(calls, 1)
})

test('a QuotaClock on systemClock({ elapsedRealtimeMs: reader }) calls the reader once at construction, then only when readings disagree', () => {
  let calls = 0
  const clock = systemClock({ elapsedRealtimeMs: () => (calls++, hrtimeMs()) })
  const limiter = new QuotaClock({ capacity: 1e6, refillPerSecond: 1, suspendPolicy: 'refuse', clock })
  assert.equal(calls, 1)
  for (let i = 0; i < 1000; i++) limiter.tryConsume()
  assert.equal(calls, 1, 'the system wall and monotonic clocks agree during the test')
})

test('a QuotaClock on systemClock() works (default clock too)', () => {
  const limiter = new QuotaClock({ capacity: 3, refillPerSecond: 0.001, suspendPolicy: 'refuse', clock: systemClock() })
  assert.equal(limiter.tryConsume().allowed, true)
  assert.equal(limiter.tryConsume(2).allowed, true)
  const d = limiter.tryConsume()
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterBasis, 'monotonic-refill')
})

// ---------------------------------------------------------------------------------------------
// procUptimeElapsedRealtime

test('procUptimeElapsedRealtime() returns a reader backed by CLOCK_BOOTTIME (the counter behind /proc/uptime)', { skip: process.platform !== 'linux' && 'Linux only' }, () => {
  const reader = procUptimeElapsedRealtime()
  assert.equal(typeof reader, 'function')
  const value = reader()
  assert.ok(Number.isFinite(value))
  const uptimeMs = Number(fs.readFileSync('/proc/uptime', 'utf8').split(/\s+/)[0]) * 1000
  const again = reader()
  assert.ok(Math.abs(value - uptimeMs) < 1000 && Math.abs(again - uptimeMs) < 1000, `reader ${value} vs /proc/uptime ${uptimeMs}`)
  // CLOCK_BOOTTIME counts everything CLOCK_MONOTONIC counts, plus suspend
  const mono = systemClock().monotonicMs()
  assert.ok(reader() >= mono - 1, 'boottime ≥ monotonic')
  assert.ok(again >= value)
})

test('procUptimeElapsedRealtime(): on other platforms it throws QuotaClockError ERR_UNSUPPORTED_PLATFORM', () => {
  if (process.platform === 'linux') {
    assert.doesNotThrow(() => procUptimeElapsedRealtime())
    return
  }
  assert.throws(() => procUptimeElapsedRealtime(), (e) => e instanceof QuotaClockError && e.code === 'ERR_UNSUPPORTED_PLATFORM')
})

test('the procUptimeElapsedRealtime() reader given to systemClock works with a QuotaClock', { skip: process.platform !== 'linux' && 'Linux only' }, () => {
  const reader = procUptimeElapsedRealtime()
  const clock = systemClock({ elapsedRealtimeMs: reader })
  assert.equal(typeof clock.elapsedRealtimeMs, 'function')
  assert.ok(Number.isFinite(clock.elapsedRealtimeMs()))
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'refuse', clock })
  for (let i = 0; i < 10; i++) assert.equal(limiter.tryConsume().allowed, true)
  assert.equal(limiter.tryConsume().allowed, false)
})

// ---------------------------------------------------------------------------------------------
// hostElapsedRealtime: Linux CLOCK_BOOTTIME, macOS mach_continuous_time, Windows
// QueryInterruptTimePrecise; systemClock()'s monotonic is the clock that stops in suspend.

const HOST_READER = ['linux', 'darwin', 'win32'].includes(process.platform)

/** Spins (no sleep: a timer could fire late on a loaded machine, a spin only runs longer) until `ms` of hrtime passed. */
function spin(ms) {
  const until = hrtimeMs() + ms
  while (hrtimeMs() < until);
}

test('hostElapsedRealtime(): both host clocks move, and the suspend-inclusive one is never behind the monotonic one', { skip: !HOST_READER && 'no host reader on this platform' }, () => {
  const reader = hostElapsedRealtime()
  assert.equal(typeof reader, 'function')
  const monotonic = systemClock().monotonicMs
  const before = [monotonic(), reader()]
  for (const value of before) assert.ok(Number.isFinite(value) && value >= 0, `a finite reading, got ${value}`)
  spin(100)
  const after = [monotonic(), reader()]
  // 20 ms short at most: a clock that ticks (Windows' interrupt time under wine: 15.6 ms) may lag.
  assert.ok(after[0] - before[0] >= 80, `the monotonic clock moved ${after[0] - before[0]} ms in 100 ms`)
  assert.ok(after[1] - before[1] >= 80, `the suspend-inclusive clock moved ${after[1] - before[1]} ms in 100 ms`)
  // Both count from boot; the suspend-inclusive one also counts every suspend since (1 ms: the two reads are not simultaneous).
  assert.ok(before[1] >= before[0] - 1 && after[1] >= after[0] - 1, `suspend-inclusive ${before[1]}, ${after[1]} vs monotonic ${before[0]}, ${after[0]}`)
})

test('hostElapsedRealtime() on Linux reads CLOCK_BOOTTIME (the counter behind /proc/uptime)', { skip: process.platform !== 'linux' && 'Linux only' }, () => {
  const uptimeMs = Number(fs.readFileSync('/proc/uptime', 'utf8').split(/\s+/)[0]) * 1000
  const value = hostElapsedRealtime()()
  assert.ok(Math.abs(value - uptimeMs) < 1000, `reader ${value} vs /proc/uptime ${uptimeMs}`)
  assert.ok(Math.abs(value - procUptimeElapsedRealtime()()) < 1000, 'the same clock as procUptimeElapsedRealtime()')
})

test('hostElapsedRealtime(): elsewhere it throws QuotaClockError ERR_UNSUPPORTED_PLATFORM', () => {
  // Every platform built here has a reader: the binding is made to answer as one without would.
  const supported = native.elapsedRealtimeSupported
  if (!HOST_READER) assert.equal(supported(), false)
  native.elapsedRealtimeSupported = () => false
  try {
    assert.throws(() => hostElapsedRealtime(), (e) => e instanceof QuotaClockError && e.code === 'ERR_UNSUPPORTED_PLATFORM' && /systemClock\(\)/.test(e.message))
  } finally {
    native.elapsedRealtimeSupported = supported
  }
})

test('the hostElapsedRealtime() reader given to systemClock is read natively: the limiter never calls it in JS', { skip: !HOST_READER && 'no host reader on this platform' }, () => {
  const read = native.elapsedRealtimeMs
  let jsReads = 0
  native.elapsedRealtimeMs = () => (jsReads++, read())
  try {
    const reader = hostElapsedRealtime()
    const clock = systemClock({ elapsedRealtimeMs: reader })
    assert.equal(clock.elapsedRealtimeMs, reader)
    const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'refuse', clock })
    for (let i = 0; i < 10; i++) assert.equal(limiter.tryConsume().allowed, true)
    assert.equal(limiter.tryConsume().allowed, false)
    assert.equal(jsReads, 0, 'the limiter read the reader natively (a JS reader is read once at construction)')
    assert.ok(Number.isFinite(reader()))
    assert.equal(jsReads, 1, 'called directly, the reader is an ordinary function')
  } finally {
    native.elapsedRealtimeMs = read
  }
})

// ---------------------------------------------------------------------------------------------
// plain JS object clocks

test('a plain JS object clock works too (one JS call per read)', () => {
  const calls = { m: 0, w: 0 }
  let m = 0
  let w = NOON
  const clock = { monotonicMs: () => (calls.m++, m), wallMs: () => (calls.w++, w) }
  const limiter = new QuotaClock({ capacity: 2, refillPerSecond: 1, initialTokens: 0, suspendPolicy: 'ignore', clock })
  const c0 = { ...calls }
  m += 1500
  w += 1500
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
  assert.ok(Math.abs(d.tokens - 0.5) < 1e-9)
  assert.equal(calls.m - c0.m, 1)
  assert.equal(calls.w - c0.w, 1)
})

test('values are milliseconds as finite numbers, fractions allowed', () => {
  let m = 0.25
  let w = NOON + 0.75
  const clock = { monotonicMs: () => m, wallMs: () => w }
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1000, initialTokens: 0, suspendPolicy: 'ignore', clock })
  m += 0.5
  w += 0.5
  assert.ok(Math.abs(limiter.status().tokens - 0.5) < 1e-9)
})

test('a plain JS clock with an elapsedRealtimeMs method is used as the suspend-inclusive reader', () => {
  let m = 0
  let w = NOON
  let er = 1000
  const clock = { monotonicMs: () => m, wallMs: () => w, elapsedRealtimeMs: () => er }
  const limiter = new QuotaClock({ capacity: 1e6, refillPerSecond: 1000, initialTokens: 0, suspendPolicy: 'ignore', clock })
  w += 30_000
  er += 30_000
  const d = limiter.tryConsume(1e6)
  assert.deepEqual(d.anomalies.map((a) => a.kind), ['suspend'])
  assert.ok(Math.abs(d.tokens - 30_000) < 1e-6)
})

for (const [label, bad] of [
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['a string', '1000'],
  ['undefined', undefined],
  ['null', null],
  ['an object', { valueOf: () => 1000 }],
]) {
  test(`a JS clock reading that is not a finite number (${label}) throws QuotaClockError ERR_CLOCK_READING, and nothing is consumed`, () => {
    let m = 0
    let w = NOON
    let poison = null
    const clock = { monotonicMs: () => (poison === 'm' ? bad : m), wallMs: () => (poison === 'w' ? bad : w) }
    const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 10, period: { unit: 'day', timeZone: 'UTC' } } })
    for (const which of ['m', 'w']) {
      poison = which
      assertClockReadingError(() => limiter.tryConsume(2))
      assertClockReadingError(() => limiter.status())
      poison = null
      const s = limiter.status()
      assert.equal(s.tokens, 5, `${which}: no tokens consumed`)
      assert.equal(s.quotaUsed, 0, `${which}: no quota consumed`)
    }
    assert.equal(limiter.tryConsume(2).tokens, 3)
  })
}

// ---------------------------------------------------------------------------------------------
// manualClock

test('manualClock() defaults: monotonicMs 0, wallMs Date.UTC(2024, 0, 15), no elapsed-realtime reader', () => {
  const clock = manualClock()
  assert.equal(clock.monotonicMs(), 0)
  assert.equal(clock.wallMs(), Date.UTC(2024, 0, 15))
  assert.notEqual(typeof clock.elapsedRealtimeMs, 'function')
})

test('manualClock(init): the given components are used, the others default', () => {
  const clock = manualClock({ monotonicMs: 42 })
  assert.equal(clock.monotonicMs(), 42)
  assert.equal(clock.wallMs(), Date.UTC(2024, 0, 15))
  const clock2 = manualClock({ wallMs: NOON, elapsedRealtimeMs: 7 })
  assert.equal(clock2.monotonicMs(), 0)
  assert.equal(clock2.wallMs(), NOON)
  assert.equal(clock2.elapsedRealtimeMs(), 7)
})

test('manualClock: the clock has an elapsedRealtimeMs reader only when init.elapsedRealtimeMs is a number', () => {
  assert.equal(typeof manualClock({ elapsedRealtimeMs: 0 }).elapsedRealtimeMs, 'function')
  assert.notEqual(typeof manualClock({}).elapsedRealtimeMs, 'function')
  assert.notEqual(typeof manualClock({ elapsedRealtimeMs: undefined }).elapsedRealtimeMs, 'function')
})

test('manualClock without a reader: a QuotaClock on it sees no reader (ambiguous row, reads counter stays 0)', () => {
  const clock = manualClock({ wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  clock.suspend(60_000)
  assert.deepEqual(limiter.tryConsume().anomalies.map((a) => a.kind), ['ambiguous-wall-jump'])
  assert.equal(clock.elapsedRealtimeReads, 0)
})

test('manualClock advance(ms): time passes while awake — monotonic, wall and elapsed-realtime all move by ms', () => {
  const clock = manualClock({ monotonicMs: 10, wallMs: NOON, elapsedRealtimeMs: 100 })
  clock.advance(1234.5)
  assert.equal(clock.monotonicMs(), 1244.5)
  assert.equal(clock.wallMs(), NOON + 1234.5)
  assert.equal(clock.elapsedRealtimeMs(), 1334.5)
})

test('manualClock suspend(ms): the host sleeps — wall and elapsed-realtime move by ms, monotonic does not', () => {
  const clock = manualClock({ monotonicMs: 10, wallMs: NOON, elapsedRealtimeMs: 100 })
  clock.suspend(60_000)
  assert.equal(clock.monotonicMs(), 10)
  assert.equal(clock.wallMs(), NOON + 60_000)
  assert.equal(clock.elapsedRealtimeMs(), 60_100)
})

test('manualClock suspend(ms) without a reader moves only the wall', () => {
  const clock = manualClock({ monotonicMs: 10, wallMs: NOON })
  clock.suspend(5000)
  assert.equal(clock.monotonicMs(), 10)
  assert.equal(clock.wallMs(), NOON + 5000)
})

test('manualClock stepWall(deltaMs): the wall clock is set (NTP step); negative is backwards', () => {
  const clock = manualClock({ monotonicMs: 10, wallMs: NOON, elapsedRealtimeMs: 100 })
  clock.stepWall(3_600_000)
  assert.equal(clock.wallMs(), NOON + 3_600_000)
  clock.stepWall(-7_200_000)
  assert.equal(clock.wallMs(), NOON - 3_600_000)
  assert.equal(clock.monotonicMs(), 10)
  assert.equal(clock.elapsedRealtimeMs(), 100)
})

test('manualClock set({ monotonicMs?, wallMs?, elapsedRealtimeMs? }): move any component to an absolute value', () => {
  const clock = manualClock({ monotonicMs: 10, wallMs: NOON, elapsedRealtimeMs: 100 })
  clock.set({ wallMs: NOON + 5 })
  assert.deepEqual([clock.monotonicMs(), clock.wallMs(), clock.elapsedRealtimeMs()], [10, NOON + 5, 100])
  clock.set({ elapsedRealtimeMs: 900 })
  assert.deepEqual([clock.monotonicMs(), clock.wallMs(), clock.elapsedRealtimeMs()], [10, NOON + 5, 900])
  clock.set({ monotonicMs: 2, wallMs: 7, elapsedRealtimeMs: 3 })
  assert.deepEqual([clock.monotonicMs(), clock.wallMs(), clock.elapsedRealtimeMs()], [2, 7, 3])
})

test('manualClock set(): this is how a test makes the monotonic source regress', () => {
  const clock = manualClock({ monotonicMs: 1000, wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  clock.set({ monotonicMs: 500 })
  assert.equal(clock.monotonicMs(), 500)
  assert.throws(() => limiter.tryConsume(), (e) => e instanceof QuotaClockError && e.code === 'ERR_MONOTONIC_REGRESSION')
})

test('manualClock elapsedRealtimeReads: how many times the elapsed-realtime reader was called', () => {
  const clock = manualClock({ elapsedRealtimeMs: 0 })
  assert.equal(clock.elapsedRealtimeReads, 0)
  clock.elapsedRealtimeMs()
  clock.elapsedRealtimeMs()
  assert.equal(clock.elapsedRealtimeReads, 2)
  clock.monotonicMs()
  clock.wallMs()
  clock.advance(10)
  assert.equal(clock.elapsedRealtimeReads, 2, 'other reads and moves do not count')
})

test('manualClock elapsedRealtimeReads is a read-only number', () => {
  const clock = manualClock({ elapsedRealtimeMs: 0 })
  assert.equal(typeof clock.elapsedRealtimeReads, 'number')
  try {
    clock.elapsedRealtimeReads = 99
  } catch {
    // a throwing setter is a fine way to be read-only
  }
  assert.equal(clock.elapsedRealtimeReads, 0)
})

test('manualClock monotonicMs(), wallMs(), elapsedRealtimeMs() read it like any clock source (fractions kept)', () => {
  const clock = manualClock({ monotonicMs: 0.5, wallMs: NOON + 0.25, elapsedRealtimeMs: 1.75 })
  assert.equal(clock.monotonicMs(), 0.5)
  assert.equal(clock.wallMs(), NOON + 0.25)
  assert.equal(clock.elapsedRealtimeMs(), 1.75)
})

test('a manual clock given to a QuotaClock is read natively: its JS methods are not called per read', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON, elapsedRealtimeMs: 0 })
  let jsCalls = 0
  for (const method of ['monotonicMs', 'wallMs', 'elapsedRealtimeMs']) {
    const original = clock[method].bind(clock)
    try {
      Object.defineProperty(clock, method, { value: () => (jsCalls++, original()), configurable: true, writable: true })
    } catch {
      // a non-configurable own method cannot be spied on this way; the other two still are
    }
  }
  const limiter = new QuotaClock({ capacity: 1e6, refillPerSecond: 1000, initialTokens: 0, suspendPolicy: 'ignore', clock })
  clock.advance(1000)
  limiter.tryConsume()
  clock.suspend(5000)
  const d = limiter.tryConsume()
  assert.equal(jsCalls, 0, 'no JS call per read')
  assert.deepEqual(d.anomalies.map((a) => a.kind), ['suspend'], 'yet the limiter sees the manual clock move')
  assert.equal(clock.elapsedRealtimeReads, 2, 'native reads of the reader are still counted')
})

test('manual clock components move independently and a QuotaClock sees each move', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 1e6, refillPerSecond: 1000, initialTokens: 0, suspendPolicy: 'credit', clock })
  clock.advance(100)
  assert.ok(Math.abs(limiter.status().tokens - 100) < 1e-9)
  clock.stepWall(-10_000)
  assert.deepEqual(limiter.tryConsume(1e6).anomalies.map((a) => a.kind), ['wall-step-back'])
  clock.suspend(2000)
  const d = limiter.tryConsume(1e6)
  assert.deepEqual(d.anomalies.map((a) => a.kind), ['ambiguous-wall-jump'])
  assert.ok(Math.abs(d.tokens - 2100) < 1e-9, "policy 'credit' credits dw")
})
