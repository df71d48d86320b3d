'use strict'
// errors. QuotaClockError (instanceof Error) with code ERR_MONOTONIC_REGRESSION,
// ERR_AMBIGUOUS_WALL_JUMP, ERR_IMPLAUSIBLE_WALL_CLOCK, ERR_CLOCK_READING, ERR_UNSUPPORTED_PLATFORM;
// configuration and argument errors are TypeError/RangeError with the codes of the options and of tryConsume; messages say
// what was expected and what was received; no input, however malformed, may crash the process or
// panic across the N-API boundary.
//
// The malformed-input battery is first run in a child process (this same file with
// --qc-errors-child): a case that crashes the child is reported as a failing test here instead of
// taking this whole file down; the cases that survived are then run again here, with assertions.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { spawnSync } = require('node:child_process')
const { QuotaClock, manualClock, systemClock, procUptimeElapsedRealtime, periodFor, QuotaClockError } = require('..')

const CHILD = process.argv.includes('--qc-errors-child')
const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const CLOCK_CODES = ['ERR_MONOTONIC_REGRESSION', 'ERR_AMBIGUOUS_WALL_JUMP', 'ERR_IMPLAUSIBLE_WALL_CLOCK', 'ERR_CLOCK_READING', 'ERR_UNSUPPORTED_PLATFORM']
const CONFIG_CODES = ['ERR_INVALID_OPTION', 'ERR_SUB_DAY_PERIOD', 'ERR_UNKNOWN_TIME_ZONE', 'ERR_INVALID_ARG']

const cases = []
/** A battery case: synchronous, throws on a failed expectation. */
const kase = (name, fn, extra = {}) => cases.push({ name, fn, ...extra })

// ---------------------------------------------------------------------------------------------
// helpers

const className = (e) => (e && e.constructor && e.constructor.name) || typeof e
const safeMessage = (e) => {
  try {
    return String(e && e.message)
  } catch {
    return '<unprintable>'
  }
}

function assertNotPanic(error) {
  assert.doesNotMatch(safeMessage(error), /panick|RUST_BACKTRACE|called `(Option|Result)::unwrap/i, 'a Rust panic crossed the N-API boundary')
}

function describeReceived(value) {
  if (typeof value === 'number') return Object.is(value, -0) ? '0' : String(value)
  if (typeof value === 'bigint') return String(value)
  if (typeof value === 'string') return value.length > 0 && value.length < 200 ? value : null
  if (value === null) return 'null'
  if (value === undefined) return 'undefined'
  if (typeof value === 'boolean') return String(value)
  return null
}

/** Asserts a documented configuration/argument error. */
function expectConfigError(fn, { classes = [TypeError, RangeError], codes, name, received, checkReceived = true }) {
  let threw = false
  try {
    fn()
  } catch (error) {
    threw = true
    assertNotPanic(error)
    assert.ok(classes.some((C) => error instanceof C), `expected ${classes.map((C) => C.name).join('/')}, got ${className(error)}: ${safeMessage(error)}`)
    assert.ok(codes.includes(error.code), `expected code ${codes.join('/')}, got ${error.code}: ${safeMessage(error)}`)
    if (name) assert.ok(error.message.includes(name), `message names ${JSON.stringify(name)}: ${error.message}`)
    if (checkReceived && Object.hasOwn(arguments[1], 'received')) {
      const text = describeReceived(received)
      if (text !== null) assert.ok(error.message.includes(text) || error.message.includes(JSON.stringify(text).slice(1, -1)), `message names the received value ${JSON.stringify(text)}: ${error.message}`)
      else if (typeof received === 'symbol') assert.match(error.message, /symbol/i, `message says a symbol was received: ${error.message}`)
    }
  }
  assert.ok(threw, 'expected a throw')
}

function expectQuotaClockError(fn, code, { received } = {}) {
  let threw = false
  try {
    fn()
  } catch (error) {
    threw = true
    assertNotPanic(error)
    assert.ok(error instanceof QuotaClockError, `expected QuotaClockError, got ${className(error)}: ${safeMessage(error)}`)
    assert.ok(error instanceof Error)
    assert.equal(error.code, code, safeMessage(error))
    assert.ok(error.message.length > 0)
    if (received !== undefined) {
      // what was received: the value itself (Infinity may be spelled inf), or at least its type
      const value = received.value
      const text = describeReceived(value)
      const accepted = [text, typeof value === 'number' && !Number.isFinite(value) && !Number.isNaN(value) ? (value > 0 ? 'inf' : '-inf') : null, typeof value !== 'number' ? typeof value : null].filter(Boolean)
      if (text !== null) assert.ok(accepted.some((t) => error.message.includes(t)), `message names the received value (${accepted.map((t) => JSON.stringify(t)).join(' or ')}): ${error.message}`)
    }
  }
  assert.ok(threw, `expected QuotaClockError ${code}`)
}

/** No crash; if it throws, it is a documented error or the user's own error. */
function expectDocumentedOrUser(fn, userErrors = []) {
  try {
    return { value: fn() }
  } catch (error) {
    assertNotPanic(error)
    if (userErrors.includes(error)) return { error }
    if (error instanceof QuotaClockError) {
      assert.ok(CLOCK_CODES.includes(error.code), `QuotaClockError code ${error.code}`)
      return { error }
    }
    if (error instanceof TypeError || error instanceof RangeError) {
      // either a coded config error, or the JS engine's own TypeError from the user's object
      if (error.code !== undefined) assert.ok(CONFIG_CODES.includes(error.code), `code ${error.code}: ${error.message}`)
      return { error }
    }
    if (error instanceof Error && /boom|evil|getter/.test(safeMessage(error))) return { error }
    assert.fail(`unexpected ${className(error)} ${error && error.code}: ${safeMessage(error)}`)
  }
}

const { baseOptions: base } = require('./helpers/limiters')

function controllableClock({ reader = true } = {}) {
  const state = { m: 0, w: NOON, er: 0, bad: { m: undefined, w: undefined, er: undefined }, poison: null, throwWith: null }
  const pick = (which, good) => {
    if (state.poison === which) {
      if (state.throwWith) throw state.throwWith
      return state.bad[which]
    }
    return good
  }
  const clock = { monotonicMs: () => pick('m', state.m), wallMs: () => pick('w', state.w) }
  if (reader) clock.elapsedRealtimeMs = () => pick('er', state.er)
  return { clock, state }
}

const BAD_READINGS = [
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['a numeric string', '1000'],
  ['an empty string', ''],
  ['undefined', undefined],
  ['null', null],
  ['true', true],
  ['a bigint', 5n],
  ['a symbol', Symbol('reading')],
  ['a plain object', {}],
  ['an object with valueOf', { valueOf: () => 1000 }],
  ['a Number object', new Number(1000)],
  ['an array', [1000]],
  ['a promise', Promise.resolve(1000)],
  ['a function', () => 1000],
  ['a proxy', new Proxy({}, { get: () => { throw new Error('evil proxy get') } })],
]

// ---------------------------------------------------------------------------------------------
// Error classes and codes

kase('QuotaClockError is exported and extends Error', () => {
  assert.equal(typeof QuotaClockError, 'function')
  assert.ok(QuotaClockError.prototype instanceof Error)
})

kase('ERR_MONOTONIC_REGRESSION is a QuotaClockError (instanceof Error) with its code and a message', () => {
  const clock = manualClock({ monotonicMs: 100, wallMs: NOON })
  const limiter = new QuotaClock(base({ clock }))
  clock.set({ monotonicMs: 50 })
  expectQuotaClockError(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
  // Latched: the next call throws it again, and its message says what went wrong.
  assert.throws(
    () => limiter.tryConsume(),
    (e) => e instanceof QuotaClockError && e.code === 'ERR_MONOTONIC_REGRESSION' && /monotonic/i.test(e.message),
  )
})

kase('ERR_AMBIGUOUS_WALL_JUMP is a QuotaClockError with its code', () => {
  const clock = manualClock({ wallMs: NOON })
  const limiter = new QuotaClock(base({ clock, suspendPolicy: 'refuse' }))
  clock.stepWall(60_000)
  expectQuotaClockError(() => limiter.tryConsume(), 'ERR_AMBIGUOUS_WALL_JUMP')
})

kase('ERR_IMPLAUSIBLE_WALL_CLOCK is a QuotaClockError with its code (tryConsume and status, with a quota)', () => {
  const clock = manualClock({ wallMs: Date.UTC(2015, 0, 1) })
  const limiter = new QuotaClock(base({ clock, quota: { limit: 5, period: UTC_DAY } })) // construction does not throw for it
  expectQuotaClockError(() => limiter.tryConsume(), 'ERR_IMPLAUSIBLE_WALL_CLOCK')
  expectQuotaClockError(() => limiter.status(), 'ERR_IMPLAUSIBLE_WALL_CLOCK')
})

kase('ERR_IMPLAUSIBLE_WALL_CLOCK changes no state: nothing consumed, readings not re-anchored', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 1e6, refillPerSecond: 1000, initialTokens: 100, suspendPolicy: 'ignore', clock, quota: { limit: 5, period: UTC_DAY } })
  clock.advance(1000)
  const wallBefore = clock.wallMs()
  clock.set({ wallMs: Date.UTC(2010, 0, 1) })
  expectQuotaClockError(() => limiter.tryConsume(3), 'ERR_IMPLAUSIBLE_WALL_CLOCK')
  clock.set({ wallMs: wallBefore })
  // previous readings still the construction ones: dm = 1000, dw = 1000 → agree, 1000 credited
  const d = limiter.tryConsume(1e6)
  assert.equal(d.allowed, false)
  assert.deepEqual(d.anomalies, [], 'no jump seen: the implausible reading did not re-anchor')
  assert.ok(Math.abs(d.tokens - 1100) < 1e-6, `tokens ${d.tokens}`)
  assert.equal(d.quotaRemaining, 5, 'nothing consumed from the quota')
})

kase('ERR_IMPLAUSIBLE_WALL_CLOCK only with a quota configured', () => {
  const clock = manualClock({ wallMs: Date.UTC(2001, 0, 1) })
  const limiter = new QuotaClock(base({ clock }))
  assert.equal(limiter.tryConsume().allowed, true)
})

kase('ERR_MONOTONIC_REGRESSION takes precedence over ERR_IMPLAUSIBLE_WALL_CLOCK', () => {
  const clock = manualClock({ monotonicMs: 1000, wallMs: NOON })
  const limiter = new QuotaClock(base({ clock, quota: { limit: 5, period: UTC_DAY } }))
  clock.set({ monotonicMs: 10, wallMs: Date.UTC(2010, 0, 1) })
  expectQuotaClockError(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
  expectQuotaClockError(() => limiter.status(), 'ERR_MONOTONIC_REGRESSION')
})

kase('ERR_UNSUPPORTED_PLATFORM: procUptimeElapsedRealtime() on a platform without CLOCK_BOOTTIME', () => {
  if (process.platform === 'linux') {
    assert.equal(typeof procUptimeElapsedRealtime(), 'function')
  } else {
    expectQuotaClockError(() => procUptimeElapsedRealtime(), 'ERR_UNSUPPORTED_PLATFORM')
  }
})

// ---------------------------------------------------------------------------------------------
// Malformed options

for (const bad of [undefined, null, 5, 'options', true, Symbol('o'), [], 10n]) {
  kase(`new QuotaClock(${describeReceived(bad) ?? String(typeof bad)}) is TypeError ERR_INVALID_OPTION`, () => {
    expectConfigError(() => new QuotaClock(bad), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'] })
  })
}

kase('QuotaClock called without new throws a TypeError, no crash', () => {
  assert.throws(() => QuotaClock(base()), TypeError)
})

const NUMERIC_OPTIONS = [
  ['capacity', (v) => base({ capacity: v }), { nonPositiveIsRange: true }],
  ['refillPerSecond', (v) => base({ refillPerSecond: v }), { nonPositiveIsRange: true }],
  ['initialTokens', (v) => base({ initialTokens: v }), {}],
  ['earliestPlausibleWallMs', (v) => base({ earliestPlausibleWallMs: v }), { onlyNonFinite: true }],
  ['limit', (v) => base({ quota: { limit: v, period: UTC_DAY } }), {}],
]
const WRONG_TYPES = [
  ['a string', '10'],
  ['a boolean', true],
  ['a bigint', 10n],
  ['a symbol', Symbol('ten')],
  ['an object', {}],
  ['an array', [10]],
  ['a Number object', new Number(10)],
  ['a function', () => 10],
  ['a proxy', new Proxy({}, {})],
  ['an object whose valueOf throws', { valueOf() { throw new Error('evil valueOf') } }],
]
const WRONG_VALUES = [
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['1e309 (Infinity)', 1e309], // eslint-disable-line no-loss-of-precision -- the literal that overflows is the point
]

for (const [name, make] of NUMERIC_OPTIONS) {
  for (const [label, value] of WRONG_TYPES) {
    kase(`option ${name}: ${label} is TypeError ERR_INVALID_OPTION naming ${name} and the value`, () => {
      expectConfigError(() => new QuotaClock(make(value)), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name, received: value })
    })
  }
  kase(`option ${name}: null is TypeError ERR_INVALID_OPTION`, () => {
    if (name === 'earliestPlausibleWallMs') return // null turns the check off
    expectConfigError(() => new QuotaClock(make(null)), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name, received: null })
  })
  for (const [label, value] of WRONG_VALUES) {
    kase(`option ${name}: ${label} is RangeError ERR_INVALID_OPTION naming ${name} and the value`, () => {
      expectConfigError(() => new QuotaClock(make(value)), { classes: [RangeError], codes: ['ERR_INVALID_OPTION'], name, received: value })
    })
  }
}

for (const name of ['capacity', 'refillPerSecond']) {
  for (const value of [0, -0, -1, -Number.MAX_VALUE, -Number.MIN_VALUE]) {
    kase(`option ${name}: ${Object.is(value, -0) ? '-0' : value} is RangeError ERR_INVALID_OPTION`, () => {
      expectConfigError(() => new QuotaClock(base({ [name]: value })), { classes: [RangeError], codes: ['ERR_INVALID_OPTION'], name, received: value })
    })
  }
}

for (const value of [2 ** 53, 1e300, -1, 0.5, Number.MAX_VALUE]) {
  kase(`option quota.limit: ${value} is RangeError ERR_INVALID_OPTION (not a non-negative safe integer)`, () => {
    expectConfigError(() => new QuotaClock(base({ quota: { limit: value, period: UTC_DAY } })), { classes: [RangeError], codes: ['ERR_INVALID_OPTION'], name: 'limit', received: value })
  })
}

for (const [label, value] of [['a symbol', Symbol('ignore')], ['a number', 0], ['an object', { toString: () => 'ignore' }], ['a string with a NUL byte', 'ignore\0'], ['a lone surrogate', '\uD800'], ['a 1 MB string', 'x'.repeat(1 << 20)]]) {
  kase(`option suspendPolicy: ${label} is refused with ERR_INVALID_OPTION`, () => {
    const cls = typeof value === 'string' ? [RangeError] : [TypeError]
    expectConfigError(() => new QuotaClock(base({ suspendPolicy: value })), { classes: cls, codes: ['ERR_INVALID_OPTION'], name: 'suspendPolicy', received: value })
  })
}

for (const [label, spec, code, cls] of [
  ['unit with a NUL byte', { unit: 'day\0', timeZone: 'UTC' }, 'ERR_INVALID_OPTION', RangeError],
  ['unit a symbol', { unit: Symbol('day'), timeZone: 'UTC' }, 'ERR_INVALID_OPTION', TypeError],
  ['timeZone a 1 MB string', { unit: 'day', timeZone: 'Z'.repeat(1 << 20) }, 'ERR_UNKNOWN_TIME_ZONE', RangeError],
  ['timeZone with a NUL byte', { unit: 'day', timeZone: 'UTC\0' }, 'ERR_UNKNOWN_TIME_ZONE', RangeError],
  ['timeZone a lone surrogate', { unit: 'day', timeZone: '\uDC00' }, 'ERR_UNKNOWN_TIME_ZONE', RangeError],
  ['timeZone a symbol', { unit: 'day', timeZone: Symbol('UTC') }, 'ERR_INVALID_OPTION', TypeError],
  ['anchorTime with full-width digits', { unit: 'day', timeZone: 'UTC', anchorTime: '\uFF11\uFF12:00' }, 'ERR_INVALID_OPTION', RangeError],
  ['anchorTime a symbol', { unit: 'day', timeZone: 'UTC', anchorTime: Symbol('00:00') }, 'ERR_INVALID_OPTION', TypeError],
  ['anchorDay Infinity', { unit: 'month', timeZone: 'UTC', anchorDay: Infinity }, 'ERR_INVALID_OPTION', RangeError],
  ['anchorDay NaN', { unit: 'month', timeZone: 'UTC', anchorDay: NaN }, 'ERR_INVALID_OPTION', RangeError],
  ['anchorDay 1e300', { unit: 'month', timeZone: 'UTC', anchorDay: 1e300 }, 'ERR_INVALID_OPTION', RangeError],
  ['anchorDay a bigint', { unit: 'month', timeZone: 'UTC', anchorDay: 1n }, 'ERR_INVALID_OPTION', TypeError],
  ['anchorMonth -0.5', { unit: 'year', timeZone: 'UTC', anchorMonth: -0.5 }, 'ERR_INVALID_OPTION', RangeError],
  ['sub-day unit hour', { unit: 'hour', timeZone: 'UTC' }, 'ERR_SUB_DAY_PERIOD', RangeError],
]) {
  kase(`option quota.period: ${label} is ${cls.name} ${code}`, () => {
    expectConfigError(() => new QuotaClock(base({ quota: { limit: 1, period: spec } })), { classes: [cls], codes: [code], checkReceived: false })
  })
}

kase('option clock: a revoked proxy, a number, a symbol → TypeError ERR_INVALID_OPTION (or the engine TypeError for the revoked proxy)', () => {
  const { proxy, revoke } = Proxy.revocable({}, {})
  revoke()
  expectDocumentedOrUser(() => new QuotaClock(base({ clock: proxy })))
  assert.throws(() => new QuotaClock(base({ clock: proxy })), TypeError)
  expectConfigError(() => new QuotaClock(base({ clock: 5 })), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name: 'clock', received: 5 })
  expectConfigError(() => new QuotaClock(base({ clock: Symbol('c') })), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name: 'clock', received: Symbol('c') })
})

// getters that throw and proxies on the options themselves

kase('an options getter that throws does not crash (the error propagates or is a coded TypeError/RangeError)', () => {
  for (const key of ['capacity', 'refillPerSecond', 'initialTokens', 'suspendPolicy', 'quota', 'clock', 'onAnomaly', 'earliestPlausibleWallMs']) {
    const options = base()
    const boom = new Error(`getter boom ${key}`)
    Object.defineProperty(options, key, { get() { throw boom }, enumerable: true, configurable: true })
    const r = expectDocumentedOrUser(() => new QuotaClock(options), [boom])
    assert.ok(r.error, `${key}: a throwing getter cannot produce a limiter`)
  }
})

kase('nested getters that throw (quota.limit, quota.period, period.timeZone, clock.wallMs) do not crash', () => {
  const boom = new Error('nested getter boom')
  const thrower = { get() { throw boom }, enumerable: true }
  const mk = [
    () => base({ quota: Object.defineProperty({ period: UTC_DAY }, 'limit', thrower) }),
    () => base({ quota: Object.defineProperty({ limit: 1 }, 'period', thrower) }),
    () => base({ quota: { limit: 1, period: Object.defineProperty({ unit: 'day' }, 'timeZone', thrower) } }),
    () => base({ clock: Object.defineProperty({ monotonicMs: () => 0 }, 'wallMs', thrower) }),
  ]
  for (const m of mk) {
    const r = expectDocumentedOrUser(() => new QuotaClock(m()), [boom])
    assert.ok(r.error)
  }
})

kase('a getter that returns a valid value first and garbage later does not crash (validated value is used, or a coded error)', () => {
  for (const [key, good, badValue] of [['capacity', 10, 'ten'], ['refillPerSecond', 1, -1], ['suspendPolicy', 'ignore', Symbol('x')], ['initialTokens', 5, NaN]]) {
    let reads = 0
    const options = base()
    Object.defineProperty(options, key, { get: () => (reads++ === 0 ? good : badValue), enumerable: true })
    const r = expectDocumentedOrUser(() => new QuotaClock(options))
    if (r.value) {
      const d = expectDocumentedOrUser(() => r.value.tryConsume())
      if (d.value) assert.equal(typeof d.value.allowed, 'boolean')
      expectDocumentedOrUser(() => r.value.status())
    }
  }
})

kase('options given as proxies (transparent, throwing ownKeys, throwing get, revoked) do not crash', () => {
  const boom = new Error('evil proxy trap')
  expectDocumentedOrUser(() => new QuotaClock(new Proxy(base(), {})))
  expectDocumentedOrUser(() => new QuotaClock(new Proxy(base(), { ownKeys() { throw boom } })), [boom])
  expectDocumentedOrUser(() => new QuotaClock(new Proxy(base(), { get() { throw boom } })), [boom])
  expectDocumentedOrUser(() => new QuotaClock(new Proxy(base(), { getOwnPropertyDescriptor() { throw boom } })), [boom])
  expectDocumentedOrUser(() => new QuotaClock(base({ quota: new Proxy({ limit: 1, period: UTC_DAY }, { get() { throw boom } }) })), [boom])
  const { proxy, revoke } = Proxy.revocable(base(), {})
  revoke()
  expectDocumentedOrUser(() => new QuotaClock(proxy))
})

kase('options with symbol keys, inherited keys or a null prototype do not crash', () => {
  expectDocumentedOrUser(() => new QuotaClock({ ...base(), [Symbol('extra')]: 1 }))
  expectDocumentedOrUser(() => new QuotaClock(Object.assign(Object.create(base()), {})))
  expectDocumentedOrUser(() => new QuotaClock(Object.assign(Object.create(null), base())))
})

// ---------------------------------------------------------------------------------------------
// Malformed tryConsume(n)

for (const value of [0, -0, -1, 1.5, NaN, Infinity, -Infinity, 11, 2 ** 53, Number.MAX_VALUE, Number.MIN_VALUE, -Number.MAX_SAFE_INTEGER]) {
  kase(`tryConsume(${Object.is(value, -0) ? '-0' : value}) is RangeError ERR_INVALID_ARG naming the value; nothing consumed`, () => {
    const limiter = new QuotaClock(base({ quota: { limit: 100, period: UTC_DAY } }))
    expectConfigError(() => limiter.tryConsume(value), { classes: [RangeError], codes: ['ERR_INVALID_ARG'], received: value })
    const s = limiter.status()
    assert.equal(s.tokens, 10)
    assert.equal(s.quotaUsed, 0)
  })
}

for (const [label, value] of [['a string', '1'], ['null', null], ['true', true], ['a bigint', 1n], ['a symbol', Symbol('n')], ['an object', {}], ['an array', [1]], ['a Number object', new Number(1)], ['a function', () => 1], ['a proxy', new Proxy({}, { get() { throw new Error('evil proxy n') } })], ['an object whose valueOf throws', { valueOf() { throw new Error('evil valueOf n') } }]]) {
  kase(`tryConsume(${label}) is a TypeError/RangeError ERR_INVALID_ARG; nothing consumed`, () => {
    const limiter = new QuotaClock(base())
    expectConfigError(() => limiter.tryConsume(value), { codes: ['ERR_INVALID_ARG'], received: value })
    assert.equal(limiter.status().tokens, 10)
  })
}

kase('tryConsume(n) with n ≤ capacity but capacity fractional: capacity 0.5 admits no n (RangeError ERR_INVALID_ARG)', () => {
  const limiter = new QuotaClock(base({ capacity: 0.5 }))
  expectConfigError(() => limiter.tryConsume(), { classes: [RangeError], codes: ['ERR_INVALID_ARG'] })
  const l2 = new QuotaClock(base({ capacity: 2.5 }))
  assert.equal(l2.tryConsume(2).allowed, true)
  expectConfigError(() => l2.tryConsume(3), { classes: [RangeError], codes: ['ERR_INVALID_ARG'], received: 3 })
})

kase('tryConsume / status / periodFor called on a foreign receiver throw a TypeError, no crash', () => {
  for (const method of ['tryConsume', 'status', 'periodFor']) {
    for (const receiver of [{}, null, undefined, 5, manualClock()]) {
      assert.throws(() => QuotaClock.prototype[method].call(receiver, 1), (e) => (assertNotPanic(e), e instanceof TypeError))
    }
  }
  const limiter = new QuotaClock(base())
  const detached = limiter.tryConsume
  assert.throws(() => detached(), TypeError)
})

// ---------------------------------------------------------------------------------------------
// Huge numbers

kase('huge capacity / refill / n do not crash and keep numbers meaningful', () => {
  const clock = manualClock({ wallMs: NOON })
  const limiter = new QuotaClock({ capacity: Number.MAX_VALUE, refillPerSecond: Number.MAX_VALUE, suspendPolicy: 'credit', clock })
  clock.advance(1e6)
  const d = limiter.tryConsume(Number.MAX_SAFE_INTEGER)
  assert.equal(d.allowed, true)
  assert.ok(!Number.isNaN(d.tokens))
  assert.ok(d.tokens <= Number.MAX_VALUE)
  clock.stepWall(1e15)
  const d2 = expectDocumentedOrUser(() => limiter.tryConsume())
  if (d2.value) assert.ok(!Number.isNaN(d2.value.tokens))
})

kase('a wait that overflows (tiny refill, huge n) is a number, not NaN, and does not crash', () => {
  const limiter = new QuotaClock({ capacity: 1e300, refillPerSecond: Number.MIN_VALUE, initialTokens: 0, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }) })
  const d = limiter.tryConsume(Number.MAX_SAFE_INTEGER)
  assert.equal(d.allowed, false)
  assert.equal(typeof d.retryAfterMs, 'number')
  assert.ok(!Number.isNaN(d.retryAfterMs))
  assert.ok(d.retryAfterMs > 0)
  assert.equal(d.retryAfterBasis, 'monotonic-refill')
})

kase('huge manual clock readings and deltas (1e308, −1e308, beyond the Date range) do not crash', () => {
  for (const quota of [undefined, { limit: 5, period: UTC_DAY }]) {
    const clock = manualClock({ monotonicMs: -1e308, wallMs: NOON })
    const limiter = new QuotaClock(base({ clock, quota, earliestPlausibleWallMs: null, suspendPolicy: 'credit' }))
    for (const move of [
      () => clock.set({ monotonicMs: 1e308 }), // dm overflows to Infinity
      () => clock.set({ wallMs: 8.64e15 + 1 }),
      () => clock.set({ wallMs: 1e300 }),
      () => clock.set({ wallMs: -1e300 }),
      () => clock.set({ wallMs: Number.MAX_VALUE }),
      () => clock.set({ wallMs: -Number.MAX_VALUE }),
      () => clock.advance(1e308),
      () => clock.advance(1e308),
      () => clock.stepWall(-Number.MAX_VALUE),
    ]) {
      expectDocumentedOrUser(move)
      const outcome = expectDocumentedOrUser(() => limiter.tryConsume())
      if (outcome.value) {
        for (const a of outcome.value.anomalies) assert.equal(typeof a.kind, 'string')
      }
      expectDocumentedOrUser(() => limiter.status())
      if (!Number.isFinite(clock.monotonicMs()) || !Number.isFinite(clock.wallMs())) {
        // a reading that is not a finite number throws ERR_CLOCK_READING (unless an earlier error is sticky)
        assert.throws(() => limiter.tryConsume(), (e) => e instanceof QuotaClockError && ['ERR_CLOCK_READING', 'ERR_MONOTONIC_REGRESSION'].includes(e.code))
      }
    }
  }
})

kase('a JS clock whose deltas overflow to ±Infinity does not crash', () => {
  const { clock, state } = controllableClock()
  const limiter = new QuotaClock(base({ clock, suspendPolicy: 'credit', earliestPlausibleWallMs: null, quota: { limit: 3, period: UTC_DAY } }))
  for (const [m, w, er] of [[0, -Number.MAX_VALUE, 0], [0, Number.MAX_VALUE, 0], [Number.MAX_VALUE, Number.MAX_VALUE, Number.MAX_VALUE], [Number.MAX_VALUE, -Number.MAX_VALUE, -Number.MAX_VALUE]]) {
    Object.assign(state, { m, w, er })
    expectDocumentedOrUser(() => limiter.tryConsume())
    expectDocumentedOrUser(() => limiter.status())
  }
})

// ---------------------------------------------------------------------------------------------
// Malformed clocks: readings that are not finite numbers → ERR_CLOCK_READING, nothing consumed

for (const [which, label] of [['m', 'monotonicMs'], ['w', 'wallMs'], ['er', 'elapsedRealtimeMs']]) {
  for (const [badLabel, value] of BAD_READINGS) {
    kase(`a clock whose ${label}() returns ${badLabel} at construction: QuotaClockError ERR_CLOCK_READING`, () => {
      const { clock, state } = controllableClock()
      state.poison = which
      state.bad[which] = value
      expectQuotaClockError(() => new QuotaClock(base({ clock })), 'ERR_CLOCK_READING', { received: { value } })
    })

    kase(`a clock whose ${label}() returns ${badLabel}: tryConsume/status throw ERR_CLOCK_READING naming the value, and nothing is consumed`, () => {
      const { clock, state } = controllableClock()
      const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 10, period: UTC_DAY } })
      if (which === 'er') state.w += 10_000 // a forward divergence, so the reader is consulted (no suspend: er stays)
      state.poison = which
      state.bad[which] = value
      expectQuotaClockError(() => limiter.tryConsume(3), 'ERR_CLOCK_READING', { received: { value } })
      expectQuotaClockError(() => limiter.status(), 'ERR_CLOCK_READING')
      state.poison = null
      const s = limiter.status()
      assert.equal(s.tokens, 5, 'no tokens consumed')
      assert.equal(s.quotaUsed, 0, 'no quota consumed')
      const d = limiter.tryConsume(3)
      assert.equal(d.allowed, true, 'the limiter keeps working')
      assert.equal(d.tokens, 2)
    })
  }
}

kase('ERR_CLOCK_READING messages say what was expected (a finite number) and what was received', () => {
  const { clock, state } = controllableClock()
  const limiter = new QuotaClock(base({ clock }))
  state.poison = 'w'
  state.bad.w = NaN
  try {
    limiter.tryConsume()
    assert.fail('expected a throw')
  } catch (e) {
    assert.match(e.message, /finite|number/i, e.message)
    assert.match(e.message, /NaN/, e.message)
  }
})

for (const [label, thrown] of [
  ['an Error', new Error('clock boom')],
  ['a string', 'clock boom string'],
  ['undefined', undefined],
  ['a null-prototype object', Object.create(null)],
  ['an object whose toString throws', { toString() { throw new Error('evil toString') } }],
]) {
  for (const [which, method] of [['m', 'monotonicMs'], ['w', 'wallMs'], ['er', 'elapsedRealtimeMs']]) {
    kase(`a clock whose ${method}() throws ${label} does not crash; nothing is consumed`, () => {
      const { clock, state } = controllableClock()
      state.poison = which
      state.throwWith = thrown
      let threw = false
      try {
        new QuotaClock(base({ clock }))
      } catch (e) {
        threw = true
        assertNotPanic(e)
      }
      assert.ok(threw, 'a throwing reading at construction cannot produce a limiter')
      state.poison = null
      const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 10, period: UTC_DAY } })
      if (which === 'er') state.w += 10_000
      state.poison = which
      let threw2 = false
      try {
        limiter.tryConsume(3)
      } catch (e) {
        threw2 = true
        assertNotPanic(e)
        if (e instanceof QuotaClockError) assert.equal(e.code, 'ERR_CLOCK_READING')
      }
      assert.ok(threw2)
      state.poison = null
      const s = limiter.status()
      assert.equal(s.tokens, 5)
      assert.equal(s.quotaUsed, 0)
    })
  }
}

kase('a clock method replaced by a getter that starts throwing after construction does not crash; nothing consumed', () => {
  let armed = false
  const boom = new Error('getter boom wallMs')
  const clock = { monotonicMs: () => 0 }
  Object.defineProperty(clock, 'wallMs', { get() { if (armed) throw boom; return () => NOON }, enumerable: true })
  const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  armed = true
  expectDocumentedOrUser(() => limiter.tryConsume(2), [boom])
  armed = false
  assert.equal(limiter.status().tokens, 5)
})

kase('a clock given as a proxy (transparent or with throwing traps) does not crash', () => {
  const boom = new Error('evil clock proxy')
  const target = { monotonicMs: () => 0, wallMs: () => NOON }
  const r = expectDocumentedOrUser(() => new QuotaClock(base({ clock: new Proxy(target, {}) })))
  if (r.value) expectDocumentedOrUser(() => r.value.tryConsume())
  let armed = false
  const tricky = new Proxy(target, { get(t, k) { if (armed) throw boom; return t[k] } })
  const r2 = expectDocumentedOrUser(() => new QuotaClock(base({ clock: tricky })), [boom])
  armed = true
  if (r2.value) expectDocumentedOrUser(() => r2.value.tryConsume(), [boom])
  expectDocumentedOrUser(() => new QuotaClock(base({ clock: new Proxy({}, { get() { throw boom }, has() { throw boom } }) })), [boom])
})

kase('a clock whose methods are class constructors (not callable) does not crash', () => {
  class NotCallable {}
  expectDocumentedOrUser(() => new QuotaClock(base({ clock: { monotonicMs: NotCallable, wallMs: () => NOON } })))
})

kase('a re-entrant clock (wallMs() calls the limiter) does not crash or panic', () => {
  let limiter = null
  let depth = 0
  const clock = {
    monotonicMs: () => 0,
    wallMs: () => {
      if (limiter && depth < 3) {
        depth++
        try {
          expectDocumentedOrUser(() => limiter.tryConsume())
          expectDocumentedOrUser(() => limiter.status())
        } finally {
          depth--
        }
      }
      return NOON
    },
    elapsedRealtimeMs: () => {
      if (limiter && depth < 3) {
        depth++
        try {
          expectDocumentedOrUser(() => limiter.tryConsume())
        } finally {
          depth--
        }
      }
      return 0
    },
  }
  limiter = new QuotaClock({ capacity: 100, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  expectDocumentedOrUser(() => limiter.tryConsume())
  expectDocumentedOrUser(() => limiter.status())
  const s = expectDocumentedOrUser(() => limiter.status())
  if (s.value) assert.ok(s.value.tokens <= 100)
})

kase('systemClock with a malformed reader: not a function → TypeError ERR_INVALID_OPTION; returning NaN/strings → ERR_CLOCK_READING', () => {
  for (const reader of [5, 'reader', {}, Symbol('r')]) {
    expectConfigError(() => systemClock({ elapsedRealtimeMs: reader }), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name: 'elapsedRealtimeMs' })
  }
  for (const value of [NaN, '1000', undefined, {}]) {
    const clock = systemClock({ elapsedRealtimeMs: () => value })
    expectQuotaClockError(() => new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock }), 'ERR_CLOCK_READING')
  }
  const boom = new Error('reader boom')
  expectDocumentedOrUser(() => new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock: systemClock({ elapsedRealtimeMs: () => { throw boom } }) }), [boom])
})

kase('systemClock(options) with a malformed options argument is TypeError ERR_INVALID_OPTION', () => {
  for (const bad of [5, 'x', true, Symbol('s')]) {
    expectConfigError(() => systemClock(bad), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'] })
  }
})

// ---------------------------------------------------------------------------------------------
// Malformed manualClock input

kase('manualClock(init) with a malformed init throws a coded TypeError/RangeError', () => {
  for (const init of [5, 'x', true, Symbol('i'), { wallMs: NaN }, { wallMs: Infinity }, { monotonicMs: '0' }, { monotonicMs: Symbol('m') }, { wallMs: 1n }, { elapsedRealtimeMs: Infinity }, { elapsedRealtimeMs: '5' }]) {
    expectConfigError(() => manualClock(init), { codes: ['ERR_INVALID_OPTION', 'ERR_INVALID_ARG'] })
  }
  expectDocumentedOrUser(() => manualClock(null))
  expectDocumentedOrUser(() => manualClock({ elapsedRealtimeMs: NaN }))
  expectDocumentedOrUser(() => manualClock(new Proxy({}, { get() { throw new Error('evil proxy init') }, ownKeys() { throw new Error('evil proxy init') } })))
})

kase('manualClock advance/suspend/stepWall with malformed arguments throw a coded TypeError/RangeError and leave the clock unchanged', () => {
  for (const method of ['advance', 'suspend', 'stepWall']) {
    for (const bad of [NaN, Infinity, -Infinity, '5', undefined, null, Symbol('d'), 5n, {}, [5], { valueOf() { throw new Error('evil valueOf') } }]) {
      const clock = manualClock({ monotonicMs: 1, wallMs: NOON, elapsedRealtimeMs: 2 })
      expectConfigError(() => clock[method](bad), { codes: ['ERR_INVALID_ARG', 'ERR_INVALID_OPTION'] })
      assert.deepEqual([clock.monotonicMs(), clock.wallMs(), clock.elapsedRealtimeMs()], [1, NOON, 2], `${method}(${String(bad)})`)
    }
  }
})

kase('manualClock set() with malformed arguments throws a coded TypeError/RangeError (or leaves finite readings)', () => {
  for (const bad of [undefined, null, 5, 'x', Symbol('s'), [1]]) {
    const clock = manualClock()
    expectConfigError(() => clock.set(bad), { codes: ['ERR_INVALID_ARG', 'ERR_INVALID_OPTION'] })
  }
  // A reading that is not a finite number is refused (a wrong value: RangeError; a wrong type:
  // TypeError), and the clock keeps its readings.
  for (const [bad, ErrorClass] of [
    [{ monotonicMs: NaN }, RangeError],
    [{ wallMs: Infinity }, RangeError],
    [{ elapsedRealtimeMs: -Infinity }, RangeError],
    [{ wallMs: '5' }, TypeError],
    [{ monotonicMs: 1n }, TypeError],
  ]) {
    const clock = manualClock({ monotonicMs: 1, wallMs: NOON, elapsedRealtimeMs: 2 })
    assert.throws(() => clock.set(bad), (e) => e instanceof ErrorClass && e.code === 'ERR_INVALID_ARG', `set(${Object.keys(bad)[0]}: ${String(Object.values(bad)[0])})`)
    assert.deepEqual([clock.monotonicMs(), clock.wallMs(), clock.elapsedRealtimeMs()], [1, NOON, 2])
  }
})

kase('manualClock: negative advance/suspend are refused (RangeError ERR_INVALID_ARG) and elapsedRealtimeReads cannot be written', () => {
  const clock = manualClock({ monotonicMs: 1, wallMs: NOON, elapsedRealtimeMs: 2 })
  const limiter = new QuotaClock(base({ clock }))
  // Time does not pass backwards: both are refused, and the clock has not moved.
  assert.throws(() => clock.advance(-5), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG')
  assert.throws(() => clock.suspend(-5), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_ARG')
  assert.deepEqual([clock.monotonicMs(), clock.wallMs(), clock.elapsedRealtimeMs()], [1, NOON, 2])
  const decision = limiter.tryConsume()
  assert.equal(decision.allowed, true)
  assert.deepEqual(decision.anomalies, [])
  // A count of reads the clock keeps: a getter only (this file is strict mode, so the write throws).
  const reads = clock.elapsedRealtimeReads
  assert.throws(() => {
    clock.elapsedRealtimeReads = -1
  }, TypeError)
  assert.equal(clock.elapsedRealtimeReads, reads)
})

// ---------------------------------------------------------------------------------------------
// Malformed periodFor input

for (const [label, spec, wall] of [
  ['no arguments', undefined, undefined],
  ['a null spec', null, 0],
  ['a string spec', 'day', 0],
  ['a spec without timeZone', { unit: 'day' }, 0],
  ['wallMs NaN', UTC_DAY, NaN],
  ['wallMs Infinity', UTC_DAY, Infinity],
  ['wallMs -Infinity', UTC_DAY, -Infinity],
  ['wallMs a string', UTC_DAY, '0'],
  ['wallMs undefined', UTC_DAY, undefined],
  ['wallMs a bigint', UTC_DAY, 0n],
  ['wallMs a symbol', UTC_DAY, Symbol('w')],
  ['wallMs a Date', UTC_DAY, new Date(0)],
]) {
  kase(`periodFor with ${label} is a coded TypeError/RangeError`, () => {
    expectConfigError(() => periodFor(spec, wall), { codes: ['ERR_INVALID_OPTION', 'ERR_INVALID_ARG'] })
  })
}

kase('periodFor with an unknown time zone / sub-day unit uses the option-error codes', () => {
  expectConfigError(() => periodFor({ unit: 'day', timeZone: 'Nowhere/Atlantis' }, 0), { classes: [RangeError], codes: ['ERR_UNKNOWN_TIME_ZONE'], name: 'Nowhere/Atlantis' })
  expectConfigError(() => periodFor({ unit: 'minute', timeZone: 'UTC' }, 0), { classes: [RangeError], codes: ['ERR_SUB_DAY_PERIOD'] })
})

kase('periodFor with huge wall readings (±1e300, ±MAX_VALUE, beyond the Date range) does not crash', () => {
  for (const wall of [1e300, -1e300, Number.MAX_VALUE, -Number.MAX_VALUE, 8.64e15 + 1, -8.64e15 - 1, 2 ** 63, -(2 ** 63)]) {
    const r = expectDocumentedOrUser(() => periodFor(UTC_DAY, wall))
    if (r.value) {
      assert.equal(typeof r.value.id, 'string')
      assert.equal(typeof r.value.startMs, 'number')
    }
  }
  const p = periodFor(UTC_DAY, -0)
  assert.ok(p.startMs === 0, `startMs ${p.startMs}`) // -0 and 0 are the same instant
  assert.equal(p.endMs, 86_400_000)
})

kase('limiter.periodFor with malformed or huge input does not crash (coded errors)', () => {
  const limiter = new QuotaClock(base({ quota: { limit: 1, period: UTC_DAY } }))
  for (const bad of [NaN, Infinity, '0', undefined, Symbol('w'), 1n, {}]) {
    expectConfigError(() => limiter.periodFor(bad), { codes: ['ERR_INVALID_ARG', 'ERR_INVALID_OPTION'] })
  }
  for (const wall of [1e300, -1e300, Number.MAX_VALUE]) expectDocumentedOrUser(() => limiter.periodFor(wall))
})

// ---------------------------------------------------------------------------------------------
// onAnomaly input

kase('onAnomaly that is not callable (a class, an object, a symbol) does not crash', () => {
  expectConfigError(() => new QuotaClock(base({ onAnomaly: Symbol('f') })), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name: 'onAnomaly' })
  expectConfigError(() => new QuotaClock(base({ onAnomaly: {} })), { classes: [TypeError], codes: ['ERR_INVALID_OPTION'], name: 'onAnomaly' })
  class Handler {}
  const clock = manualClock({ wallMs: NOON })
  const r = expectDocumentedOrUser(() => new QuotaClock(base({ clock, onAnomaly: Handler })))
  if (r.value) {
    clock.stepWall(-10_000)
    r.value.tryConsume() // the call throws later, asynchronously: it must become a warning, not a crash
  }
}, { async: true })

// =============================================================================================
// runner

if (CHILD) {
  const write = (line) => fs.writeSync(1, `${line}\n`)
  const startArg = process.argv.find((a) => a.startsWith('--start='))
  const start = startArg ? Number(startArg.slice(8)) : 0
  process.on('warning', () => {}) // keep stderr quiet; warnings are the anomaly tests' business
  for (let i = start; i < cases.length; i++) {
    write(`BEGIN ${i}`)
    try {
      cases[i].fn()
    } catch {
      // assertion failures are reported by the parent; only crashes matter here
    }
    write(`END ${i}`)
  }
  write('ALLDONE')
  setTimeout(() => write('SETTLED'), 300) // async fallout (e.g. a handler that cannot be called)
} else {
  // Run the battery in child processes; after a crash, resume after the crashing case.
  const started = Date.now()
  const ended = new Set()
  const crashes = new Map() // case index → description
  let settled = false
  let asyncCrash = null
  let start = 0
  for (let round = 0; round < 30 && start <= cases.length; round++) {
    const child = spawnSync(process.execPath, [__filename, '--qc-errors-child', `--start=${start}`], { encoding: 'utf8', timeout: 20_000, maxBuffer: 64 << 20 })
    const lines = (child.stdout || '').split('\n')
    for (const l of lines) if (l.startsWith('END ')) ended.add(Number(l.slice(4)))
    const begun = lines.filter((l) => l.startsWith('BEGIN ')).map((l) => Number(l.slice(6)))
    const info = `status ${child.status}, signal ${child.signal}; stderr: ${(child.stderr || '').slice(-1500)}`
    const crashedAt = begun.find((i) => !ended.has(i))
    if (crashedAt !== undefined) {
      crashes.set(crashedAt, info)
      start = crashedAt + 1
      continue
    }
    if (lines.includes('SETTLED') && child.status === 0) settled = true
    else asyncCrash = info
    break
  }

  test('No input, however malformed, may crash the process or panic across the N-API boundary (whole battery in child processes)', () => {
    const list = [...crashes].map(([i, info]) => `- ${cases[i].name}: ${info}`)
    assert.equal(list.length, 0, `cases that crashed the process:\n${list.join('\n')}`)
    assert.ok(settled, `the process died after the battery (asynchronously): ${asyncCrash}`)
    assert.ok(Date.now() - started < 25_000)
  })

  for (let i = 0; i < cases.length; i++) {
    test(cases[i].name, () => {
      if (crashes.has(i)) assert.fail(`this case crashed the process: ${crashes.get(i)}`)
      if (!ended.has(i)) assert.fail('not reached in the child process')
      if (cases[i].async && !settled) assert.fail(`not run in-process: the child process died asynchronously after the battery: ${asyncCrash}`)
      cases[i].fn()
    })
  }
}
