'use strict'
// QuotaClock options. Bad options throw at construction: TypeError (wrong type) or
// RangeError (wrong value) with a `code`, and a message naming the option and the value received.

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, manualClock, QuotaClockError } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

const { baseOptions: base } = require('./helpers/limiters')

/**
 * Asserts `fn` throws `Class` with `code`; `mentions` are strings the message must contain
 * (the option name and the received value).
 */
function assertOptionError(fn, Class, code, mentions = []) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof Class, `expected ${Class.name}, got ${error && error.constructor && error.constructor.name}: ${error && error.message}`)
    assert.equal(error.code, code, `code of: ${error.message}`)
    assert.equal(typeof error.message, 'string')
    for (const m of mentions) assert.ok(error.message.includes(m), `message should mention ${JSON.stringify(m)}: ${error.message}`)
    return true
  })
}

/** For a missing / unknown key where the spec leaves TypeError vs RangeError open. */
function assertTypeOrRange(fn, code, mentions = []) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof TypeError || error instanceof RangeError, `expected TypeError or RangeError, got ${error && error.constructor && error.constructor.name}: ${error && error.message}`)
    assert.equal(error.code, code, `code of: ${error.message}`)
    for (const m of mentions) assert.ok(error.message.includes(m), `message should mention ${JSON.stringify(m)}: ${error.message}`)
    return true
  })
}

// ---------------------------------------------------------------------------------------------
// capacity / refillPerSecond

for (const name of ['capacity', 'refillPerSecond']) {
  test(`${name}: > 0, finite — wrong values are RangeError ERR_INVALID_OPTION naming the option and the value`, () => {
    for (const value of [0, -1, -0.5, NaN, Infinity, -Infinity]) {
      assertOptionError(() => new QuotaClock(base({ [name]: value })), RangeError, 'ERR_INVALID_OPTION', [name, String(value)])
    }
  })

  test(`${name}: -0 is not > 0 (RangeError ERR_INVALID_OPTION)`, () => {
    assertOptionError(() => new QuotaClock(base({ [name]: -0 })), RangeError, 'ERR_INVALID_OPTION', [name, '0'])
  })

  test(`${name}: a non-number is TypeError ERR_INVALID_OPTION naming the option and the value`, () => {
    assertOptionError(() => new QuotaClock(base({ [name]: '10' })), TypeError, 'ERR_INVALID_OPTION', [name, '10'])
    assertOptionError(() => new QuotaClock(base({ [name]: true })), TypeError, 'ERR_INVALID_OPTION', [name, 'true'])
    assertOptionError(() => new QuotaClock(base({ [name]: null })), TypeError, 'ERR_INVALID_OPTION', [name, 'null'])
    assertOptionError(() => new QuotaClock(base({ [name]: 10n })), TypeError, 'ERR_INVALID_OPTION', [name, '10'])
    assertOptionError(() => new QuotaClock(base({ [name]: {} })), TypeError, 'ERR_INVALID_OPTION', [name])
    assertOptionError(() => new QuotaClock(base({ [name]: [10] })), TypeError, 'ERR_INVALID_OPTION', [name])
    assertOptionError(() => new QuotaClock(base({ [name]: new Number(10) })), TypeError, 'ERR_INVALID_OPTION', [name])
  })

  test(`${name} is required: missing is ERR_INVALID_OPTION naming it`, () => {
    const options = base()
    delete options[name]
    assertTypeOrRange(() => new QuotaClock(options), 'ERR_INVALID_OPTION', [name])
  })

  test(`${name}: small fractions and huge finite numbers are accepted, and are the limit in force`, () => {
    for (const value of [0.001, Number.MAX_VALUE, Number.MIN_VALUE]) {
      assert.equal(new QuotaClock(base({ [name]: value })).status()[name], value, `${name}: ${value}`)
    }
  })
}

// ---------------------------------------------------------------------------------------------
// initialTokens

test('initialTokens: default capacity', () => {
  const limiter = new QuotaClock(base({ capacity: 7 }))
  assert.equal(limiter.status().tokens, 7)
  assert.equal(limiter.tryConsume(7).allowed, true)
})

test('initialTokens: 0..capacity inclusive are accepted and used', () => {
  assert.equal(new QuotaClock(base({ initialTokens: 0 })).status().tokens, 0)
  assert.equal(new QuotaClock(base({ initialTokens: 10 })).status().tokens, 10)
  assert.equal(new QuotaClock(base({ initialTokens: 2.5 })).status().tokens, 2.5)
})

test('initialTokens: outside 0..capacity is RangeError ERR_INVALID_OPTION naming the option and the value', () => {
  for (const value of [-1, 10.5, 11, NaN, Infinity, -Infinity]) {
    assertOptionError(() => new QuotaClock(base({ initialTokens: value })), RangeError, 'ERR_INVALID_OPTION', ['initialTokens', String(value)])
  }
})

test('initialTokens: a non-number is TypeError ERR_INVALID_OPTION', () => {
  assertOptionError(() => new QuotaClock(base({ initialTokens: '5' })), TypeError, 'ERR_INVALID_OPTION', ['initialTokens', '5'])
  assertOptionError(() => new QuotaClock(base({ initialTokens: null })), TypeError, 'ERR_INVALID_OPTION', ['initialTokens', 'null'])
})

// ---------------------------------------------------------------------------------------------
// suspendPolicy

test("suspendPolicy: 'ignore' | 'credit' | 'refuse' are accepted, and each decides an unexplained forward jump its own way", () => {
  const afterJump = (suspendPolicy) => {
    const clock = manualClock({ wallMs: NOON })
    const limiter = new QuotaClock(base({ suspendPolicy, clock, initialTokens: 0 }))
    clock.stepWall(60_000)
    return limiter.tryConsume()
  }
  // 'ignore' credits the monotonic clock (nothing), 'credit' the wall (a full bucket), 'refuse' throws.
  assert.equal(afterJump('ignore').allowed, false)
  assert.deepEqual([afterJump('credit').allowed, afterJump('credit').tokens], [true, 9])
  assert.throws(() => afterJump('refuse'), (e) => e instanceof QuotaClockError && e.code === 'ERR_AMBIGUOUS_WALL_JUMP')
})

test('a missing suspendPolicy is ERR_INVALID_OPTION with a message that explains why it has no default', () => {
  const options = base()
  delete options.suspendPolicy
  assertTypeOrRange(() => new QuotaClock(options), 'ERR_INVALID_OPTION', ['suspendPolicy'])
  try {
    new QuotaClock(options)
  } catch (error) {
    assert.match(error.message, /default/i, 'the message says there is no default')
    assert.ok(error.message.length > 60, `the message explains why: ${error.message}`)
    assert.match(error.message, /suspend|wall|monotonic|elapsed/i, `the message explains why: ${error.message}`)
  }
})

test('suspendPolicy: undefined counts as absent (same missing-policy error)', () => {
  assertTypeOrRange(() => new QuotaClock(base({ suspendPolicy: undefined })), 'ERR_INVALID_OPTION', ['suspendPolicy'])
})

test('suspendPolicy: an unknown string is RangeError ERR_INVALID_OPTION naming the option and the value', () => {
  for (const value of ['Ignore', 'skip', '']) {
    assertOptionError(() => new QuotaClock(base({ suspendPolicy: value })), RangeError, 'ERR_INVALID_OPTION', ['suspendPolicy', value])
  }
})

test('suspendPolicy: a non-string is TypeError ERR_INVALID_OPTION', () => {
  assertOptionError(() => new QuotaClock(base({ suspendPolicy: 1 })), TypeError, 'ERR_INVALID_OPTION', ['suspendPolicy', '1'])
  assertOptionError(() => new QuotaClock(base({ suspendPolicy: null })), TypeError, 'ERR_INVALID_OPTION', ['suspendPolicy', 'null'])
  assertOptionError(() => new QuotaClock(base({ suspendPolicy: ['ignore'] })), TypeError, 'ERR_INVALID_OPTION', ['suspendPolicy'])
})

// ---------------------------------------------------------------------------------------------
// quota

test('quota: { limit, period } with a UTC day period is accepted; limit 0 is allowed (it blocks all)', () => {
  new QuotaClock(base({ quota: { limit: 5, period: UTC_DAY } }))
  const blocked = new QuotaClock(base({ quota: { limit: 0, period: UTC_DAY } }))
  assert.equal(blocked.tryConsume().allowed, false)
  new QuotaClock(base({ quota: { limit: Number.MAX_SAFE_INTEGER, period: UTC_DAY } }))
})

test('quota.limit: not a non-negative safe integer is RangeError ERR_INVALID_OPTION naming limit and the value', () => {
  for (const value of [-1, 1.5, NaN, Infinity, 2 ** 53, 1e300]) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: value, period: UTC_DAY } })), RangeError, 'ERR_INVALID_OPTION', ['limit', String(value)])
  }
})

test('quota.limit: a non-number is TypeError ERR_INVALID_OPTION', () => {
  assertOptionError(() => new QuotaClock(base({ quota: { limit: '5', period: UTC_DAY } })), TypeError, 'ERR_INVALID_OPTION', ['limit', '5'])
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 5n, period: UTC_DAY } })), TypeError, 'ERR_INVALID_OPTION', ['limit'])
})

test('quota: not an object is TypeError ERR_INVALID_OPTION', () => {
  assertOptionError(() => new QuotaClock(base({ quota: 5 })), TypeError, 'ERR_INVALID_OPTION', ['quota', '5'])
  assertOptionError(() => new QuotaClock(base({ quota: null })), TypeError, 'ERR_INVALID_OPTION', ['quota', 'null'])
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 5, period: 'day' } })), TypeError, 'ERR_INVALID_OPTION', ['period', 'day'])
})

test("quota.period.unit: 'day' | 'week' | 'month' | 'year' are accepted, and each opens a period of its unit", () => {
  // NOON is Monday 2024-01-15: the day, the week starting that Monday, January, 2024.
  const ids = { day: '2024-01-15', week: '2024-01-15', month: '2024-01', year: '2024' }
  for (const [unit, id] of Object.entries(ids)) {
    const limiter = new QuotaClock(base({ quota: { limit: 5, period: { unit, timeZone: 'UTC' } } }))
    assert.equal(limiter.status().period.id, id, unit)
    assert.equal(limiter.status().quotaLimit, 5)
  }
})

test("quota.period.unit: 'hour', 'minute', 'second' are refused with ERR_SUB_DAY_PERIOD (RangeError, naming the unit)", () => {
  for (const unit of ['hour', 'minute', 'second']) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: 5, period: { unit, timeZone: 'UTC' } } })), RangeError, 'ERR_SUB_DAY_PERIOD', [unit])
  }
})

test('quota.period.unit: any other string is RangeError ERR_INVALID_OPTION; a non-string is TypeError', () => {
  for (const unit of ['fortnight', 'Day', '']) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: 5, period: { unit, timeZone: 'UTC' } } })), RangeError, 'ERR_INVALID_OPTION', ['unit', unit])
  }
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 5, period: { unit: 1, timeZone: 'UTC' } } })), TypeError, 'ERR_INVALID_OPTION', ['unit', '1'])
})

test('quota.period.timeZone: an unknown IANA name is RangeError ERR_UNKNOWN_TIME_ZONE naming the value', () => {
  for (const timeZone of ['Mars/Olympus_Mons', 'America/Los_Angles', 'Not a zone']) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: 5, period: { unit: 'day', timeZone } } })), RangeError, 'ERR_UNKNOWN_TIME_ZONE', [timeZone])
  }
})

test('a mistyped time zone gets the did-you-mean the CLI gives, wherever the library meets it; a name near none gets none', () => {
  const { KeyedQuotaClock, periodFor, createThrottle, memoryDb } = require('..')
  const day = (timeZone) => ({ unit: 'day', timeZone })
  const cases = [
    ['QuotaClock quota', (timeZone) => new QuotaClock(base({ quota: { limit: 5, period: day(timeZone) } }))],
    ['KeyedQuotaClock quota', (timeZone) => new KeyedQuotaClock(base({ quota: { limit: 5, period: day(timeZone) } }))],
    ['a key policy', (timeZone) => new KeyedQuotaClock(base({ policy: () => ({ quota: { limit: 5, period: day(timeZone) } }) })).tryConsume('k')],
    ['periodFor', (timeZone) => periodFor(day(timeZone), 0)],
    ['createThrottle', (timeZone) => createThrottle({ db: memoryDb(), timeZone })],
  ]
  for (const [where, make] of cases) {
    for (const [typo, meant] of [['America/Los_Angles', 'America/Los_Angeles'], ['europe/berlin', 'Europe/Berlin'], ['Asia/Tokio', 'Asia/Tokyo']]) {
      assert.throws(() => make(typo), (error) => error instanceof RangeError && error.code === 'ERR_UNKNOWN_TIME_ZONE' && error.message.endsWith(` (did you mean '${meant}'?)`), `${where}: ${typo}`)
    }
    assert.throws(() => make('Mars/Olympus_Mons'), (error) => error.code === 'ERR_UNKNOWN_TIME_ZONE' && !/did you mean/.test(error.message), where)
  }
})

test("quota.period.timeZone: IANA names such as 'America/Los_Angeles' and 'UTC' are accepted; a non-string is TypeError", () => {
  new QuotaClock(base({ quota: { limit: 5, period: { unit: 'month', timeZone: 'America/Los_Angeles' } } }))
  new QuotaClock(base({ quota: { limit: 5, period: { unit: 'day', timeZone: 'UTC' } } }))
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 5, period: { unit: 'day', timeZone: 0 } } })), TypeError, 'ERR_INVALID_OPTION', ['timeZone'])
  assertTypeOrRange(() => new QuotaClock(base({ quota: { limit: 5, period: { unit: 'day' } } })), 'ERR_INVALID_OPTION', ['timeZone'])
})

test('anchorDay: month/year 1..31, week 1..7 are accepted; outside is RangeError ERR_INVALID_OPTION', () => {
  for (const unit of ['month', 'year']) {
    for (const anchorDay of [1, 15, 31]) new QuotaClock(base({ quota: { limit: 1, period: { unit, timeZone: 'UTC', anchorDay } } }))
    for (const anchorDay of [0, 32, 1.5, -1, NaN]) {
      assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit, timeZone: 'UTC', anchorDay } } })), RangeError, 'ERR_INVALID_OPTION', ['anchorDay', String(anchorDay)])
    }
  }
  for (const anchorDay of [1, 7]) new QuotaClock(base({ quota: { limit: 1, period: { unit: 'week', timeZone: 'UTC', anchorDay } } }))
  for (const anchorDay of [0, 8]) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'week', timeZone: 'UTC', anchorDay } } })), RangeError, 'ERR_INVALID_OPTION', ['anchorDay', String(anchorDay)])
  }
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'month', timeZone: 'UTC', anchorDay: '1' } } })), TypeError, 'ERR_INVALID_OPTION', ['anchorDay'])
})

test('anchorMonth: year only, 1..12', () => {
  for (const anchorMonth of [1, 12]) new QuotaClock(base({ quota: { limit: 1, period: { unit: 'year', timeZone: 'UTC', anchorMonth } } }))
  for (const anchorMonth of [0, 13, 2.5]) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'year', timeZone: 'UTC', anchorMonth } } })), RangeError, 'ERR_INVALID_OPTION', ['anchorMonth', String(anchorMonth)])
  }
})

test("anchorTime: 'HH:MM' or 'HH:MM:SS' accepted, default '00:00'; other strings are RangeError, non-strings TypeError", () => {
  for (const anchorTime of ['00:00', '09:30', '23:59', '12:30:15', '23:59:59']) {
    new QuotaClock(base({ quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC', anchorTime } } }))
  }
  for (const anchorTime of ['24:00', '12:60', '12:00:60', 'noon', '', '1200']) {
    assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC', anchorTime } } })), RangeError, 'ERR_INVALID_OPTION', ['anchorTime', anchorTime])
  }
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC', anchorTime: 1200 } } })), TypeError, 'ERR_INVALID_OPTION', ['anchorTime', '1200'])
  // default '00:00': a UTC day period starts at UTC midnight
  assert.equal(new QuotaClock(base({ quota: { limit: 1, period: UTC_DAY } })).status().period.startMs, Date.UTC(2024, 0, 15))
})

test('an anchor that does not apply to the unit is refused: anchorDay on day', () => {
  assertTypeOrRange(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC', anchorDay: 1 } } })), 'ERR_INVALID_OPTION', ['anchorDay'])
})

test('an anchor that does not apply to the unit is refused: anchorMonth on anything but year', () => {
  for (const unit of ['day', 'week', 'month']) {
    assertTypeOrRange(() => new QuotaClock(base({ quota: { limit: 1, period: { unit, timeZone: 'UTC', anchorMonth: 1 } } })), 'ERR_INVALID_OPTION', ['anchorMonth'])
  }
})

// ---------------------------------------------------------------------------------------------
// clock / onAnomaly / earliestPlausibleWallMs

test('clock: default systemClock() (the limiter reads the real wall clock)', () => {
  const before = new Date().toISOString().slice(0, 10)
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 1, period: UTC_DAY } })
  const period = limiter.status().period
  const after = new Date().toISOString().slice(0, 10)
  const now = Date.now()
  assert.ok(period.startMs <= now && now < period.endMs + 1000, 'the open UTC day contains Date.now()')
  assert.ok([Date.parse(before), Date.parse(after)].includes(period.startMs))
  assert.equal(limiter.tryConsume().allowed, true)
})

test('clock: not a clock source is TypeError ERR_INVALID_OPTION naming clock', () => {
  for (const clock of [5, 'system', null, {}, { monotonicMs: () => 0 }, { monotonicMs: 0, wallMs: () => 0 }, { monotonicMs: () => 0, wallMs: () => NOON, elapsedRealtimeMs: 5 }]) {
    assertOptionError(() => new QuotaClock(base({ clock })), TypeError, 'ERR_INVALID_OPTION', ['clock'])
  }
})

test('onAnomaly: not a function is TypeError ERR_INVALID_OPTION naming onAnomaly', () => {
  for (const onAnomaly of [1, 'log', {}, null]) {
    assertOptionError(() => new QuotaClock(base({ onAnomaly })), TypeError, 'ERR_INVALID_OPTION', ['onAnomaly'])
  }
})

test('earliestPlausibleWallMs: default Date.UTC(2020, 0, 1)', () => {
  const clock = manualClock({ wallMs: Date.UTC(2020, 0, 1) - 1 })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 5, period: UTC_DAY } })
  assert.throws(() => limiter.tryConsume(), (e) => e instanceof QuotaClockError && e.code === 'ERR_IMPLAUSIBLE_WALL_CLOCK')
  clock.set({ wallMs: Date.UTC(2020, 0, 1) }) // exactly the default is not before it
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
})

test('earliestPlausibleWallMs: undefined counts as absent (the default applies)', () => {
  const clock = manualClock({ wallMs: Date.UTC(2019, 5, 1) })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 5, period: UTC_DAY }, earliestPlausibleWallMs: undefined })
  assert.throws(() => limiter.tryConsume(), (e) => e instanceof QuotaClockError && e.code === 'ERR_IMPLAUSIBLE_WALL_CLOCK')
})

test('earliestPlausibleWallMs: null turns the check off', () => {
  const clock = manualClock({ wallMs: Date.UTC(1999, 0, 1, 12) })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 5, period: UTC_DAY }, earliestPlausibleWallMs: null })
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
  assert.equal(d.quotaRemaining, 4)
  assert.equal(limiter.status().period.startMs, Date.UTC(1999, 0, 1))
})

test('earliestPlausibleWallMs: a custom value moves the check', () => {
  const edge = Date.UTC(2024, 0, 10)
  const clock = manualClock({ wallMs: edge - 1 })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 5, period: UTC_DAY }, earliestPlausibleWallMs: edge })
  assert.throws(() => limiter.status(), (e) => e instanceof QuotaClockError && e.code === 'ERR_IMPLAUSIBLE_WALL_CLOCK')
  clock.set({ wallMs: edge })
  assert.equal(limiter.tryConsume().allowed, true)
})

test('earliestPlausibleWallMs: a non-finite number is RangeError, a non-number TypeError (ERR_INVALID_OPTION)', () => {
  for (const value of [NaN, Infinity, -Infinity]) {
    assertOptionError(() => new QuotaClock(base({ earliestPlausibleWallMs: value })), RangeError, 'ERR_INVALID_OPTION', ['earliestPlausibleWallMs', String(value)])
  }
  assertOptionError(() => new QuotaClock(base({ earliestPlausibleWallMs: '2020-01-01' })), TypeError, 'ERR_INVALID_OPTION', ['earliestPlausibleWallMs', '2020-01-01'])
})

// ---------------------------------------------------------------------------------------------
// unknown keys / undefined values

test('an unknown option key (a typo such as suspendpolicy) is refused with ERR_INVALID_OPTION naming the key', () => {
  const { suspendPolicy, ...rest } = base()
  void suspendPolicy
  assertTypeOrRange(() => new QuotaClock({ ...rest, suspendpolicy: 'ignore' }), 'ERR_INVALID_OPTION', ['suspendpolicy'])
  assertTypeOrRange(() => new QuotaClock(base({ capacty: 10 })), 'ERR_INVALID_OPTION', ['capacty'])
  assertTypeOrRange(() => new QuotaClock(base({ onanomaly: () => {} })), 'ERR_INVALID_OPTION', ['onanomaly'])
})

test('an unknown key inside quota or quota.period is refused too (ERR_INVALID_OPTION naming the key)', () => {
  assertTypeOrRange(() => new QuotaClock(base({ quota: { limit: 1, period: UTC_DAY, limt: 2 } })), 'ERR_INVALID_OPTION', ['limt'])
  assertTypeOrRange(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC', timezone: 'UTC' } } })), 'ERR_INVALID_OPTION', ['timezone'])
})

test('a key whose value is undefined counts as absent', () => {
  const limiter = new QuotaClock(base({
    initialTokens: undefined,
    quota: undefined,
    onAnomaly: undefined,
    earliestPlausibleWallMs: undefined,
    typoButUndefined: undefined,
  }))
  const s = limiter.status()
  assert.equal(s.tokens, 10, 'initialTokens defaulted to capacity')
  assert.equal(s.period, null, 'no quota')
  const sys = new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'credit', clock: undefined })
  assert.equal(sys.tryConsume().allowed, true, 'clock: undefined is the default systemClock()')
  new QuotaClock(base({ quota: { limit: 1, period: { unit: 'month', timeZone: 'UTC', anchorDay: undefined, anchorMonth: undefined, anchorTime: undefined } } }))
})

test('bad options throw at construction, not later: an unknown time zone throws from the constructor, not from the first tryConsume', () => {
  let threw = false
  try {
    new QuotaClock(base({ quota: { limit: 1, period: { unit: 'day', timeZone: 'Nowhere/Special' } } }))
  } catch {
    threw = true
  }
  assert.ok(threw)
})

// ---------------------------------------------------------------------------------------------
// construction readings

test('the constructor takes the starting readings: time before construction is not credited', () => {
  const clock = manualClock({ monotonicMs: 5_000_000, wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 100, refillPerSecond: 1, initialTokens: 0, suspendPolicy: 'ignore', clock })
  assert.equal(limiter.status().tokens, 0)
  clock.advance(3000)
  assert.equal(limiter.status().tokens, 3)
})

test('the constructor calls the elapsed-realtime reader once, for its baseline (manualClock)', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON, elapsedRealtimeMs: 0 })
  assert.equal(clock.elapsedRealtimeReads, 0)
  new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  assert.equal(clock.elapsedRealtimeReads, 1)
})

test('the constructor calls the elapsed-realtime reader once and takes monotonic and wall readings (JS clock)', () => {
  const calls = { m: 0, w: 0, er: 0 }
  const clock = { monotonicMs: () => (calls.m++, 0), wallMs: () => (calls.w++, NOON), elapsedRealtimeMs: () => (calls.er++, 0) }
  new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
  assert.equal(calls.er, 1)
  assert.ok(calls.m >= 1 && calls.w >= 1)
})

test('the first period opens at the first plausible wall reading, construction included', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15, 23, 0) })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 3, period: UTC_DAY } })
  assert.equal(limiter.tryConsume().quotaRemaining, 2)
  const p = limiter.status().period
  assert.equal(p.startMs, Date.UTC(2024, 0, 15))
  assert.equal(p.endMs, Date.UTC(2024, 0, 16))
})

test('with an implausible wall at construction, the first period opens at the first plausible reading later', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2001, 0, 1) })
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 3, period: UTC_DAY } })
  clock.set({ wallMs: Date.UTC(2024, 0, 15, 10) })
  const d = limiter.tryConsume()
  assert.equal(d.allowed, true)
  assert.equal(d.quotaRemaining, 2)
  const p = limiter.status().period
  assert.equal(p.startMs, Date.UTC(2024, 0, 15))
  assert.equal(p.endMs, Date.UTC(2024, 0, 16))
})

// ---------------------------------------------------------------------------------------------
// One place for each check: the JS face checks types, the native side checks numeric values.

test('a numeric value is checked once, natively: the JS face and a direct native call refuse it with the same code and message', () => {
  const native = require('../binding.js')
  const quota = { limit: 5, period: UTC_DAY }
  const cases = [
    [{ capacity: -1 }, 'capacity'],
    [{ capacity: Number.NaN }, 'capacity'],
    [{ capacity: Infinity }, 'capacity'],
    [{ refillPerSecond: 0 }, 'refillPerSecond'],
    [{ refillPerSecond: -Infinity }, 'refillPerSecond'],
    [{ initialTokens: 11 }, 'initialTokens'],
    [{ initialTokens: -0.5 }, 'initialTokens'],
    [{ quota: { ...quota, limit: 1.5 } }, 'quota.limit'],
    [{ quota: { ...quota, limit: -1 } }, 'quota.limit'],
    [{ quota: { ...quota, limit: 2 ** 53 } }, 'quota.limit'],
    [{ earliestPlausibleWallMs: Infinity }, 'earliestPlausibleWallMs'],
  ]
  for (const [extra, name] of cases) {
    const options = base(extra)
    let fromFace
    assert.throws(() => new QuotaClock(options), (error) => ((fromFace = error), true))
    assert.ok(fromFace instanceof RangeError, `${name}: ${fromFace}`)
    assert.equal(fromFace.code, 'ERR_INVALID_OPTION')
    assert.ok(fromFace.message.startsWith(`${name} must be `), fromFace.message)
    const direct = {
      capacity: options.capacity,
      refillPerSecond: options.refillPerSecond,
      initialTokens: options.initialTokens ?? options.capacity,
      suspendPolicy: options.suspendPolicy,
      quotaLimit: options.quota?.limit,
      quotaPeriod: options.quota?.period,
      earliestPlausibleWallMs: options.earliestPlausibleWallMs ?? Date.UTC(2020, 0, 1),
    }
    assert.throws(() => native.checkLimiterOptions(direct), (error) => {
      assert.equal(error.code, fromFace.code, name)
      assert.equal(error.message, fromFace.message, name)
      return true
    })
  }
  // The values the checks accept pass both ways.
  assert.doesNotThrow(() => native.checkLimiterOptions({ capacity: 1e-3, refillPerSecond: 5e-324, initialTokens: 0, suspendPolicy: 'credit', quotaLimit: 0, quotaPeriod: UTC_DAY }))
  assert.doesNotThrow(() => new QuotaClock(base({ capacity: 1e-3, refillPerSecond: 5e-324, initialTokens: 0, quota: { limit: 0, period: UTC_DAY } })))
})

test('a message names a huge received string by its first 200 characters and its length, natively too', () => {
  const native = require('../binding.js')
  const huge = 'x'.repeat(100_000)
  assert.throws(
    () => native.checkLimiterOptions({ capacity: 1, refillPerSecond: 1, initialTokens: 1, suspendPolicy: huge }),
    (error) => error.code === 'ERR_INVALID_OPTION' && error.message.length < 400 && error.message.includes('(100000 characters)'),
  )
  assertOptionError(() => new QuotaClock(base({ quota: { limit: 1, period: { unit: huge, timeZone: 'UTC' } } })), RangeError, 'ERR_INVALID_OPTION', ['(100000 characters)'])
})
