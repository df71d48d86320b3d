'use strict'
// A number the native side receives is checked there, once (src/limits.rs and the keyed core's
// checks): the JS face checks its type, never its range. Two ways to see it: the face's sources
// hold no range check of those options, and with the native checks and create calls replaced by
// stand-ins, no out-of-range value of them is refused by JavaScript before the native side is
// reached.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const native = require('../lib/native/native.js')
const { KeyedQuotaClock, QuotaClock, manualClock, systemClock } = require('..')
const { testStore } = require('./helpers/test-store.js')
const { zonePath } = require('./helpers/zone.js')

const ROOT = path.join(__dirname, '..')
// The face's folders, where a limiter's options are read (lib/http, lib/throttle and lib/stores
// have options of their own, which never cross to the native side).
const FACE = ['common', 'native', 'time', 'limiter', 'share', 'keyed']
// The options whose values the native side receives and checks.
const NATIVE_CHECKED = ['maxKeys', 'leaseUnits', 'leaseMs', 'capacity', 'refillPerSecond', 'initialTokens', 'quota.limit', 'limit', 'earliestPlausibleWallMs']
// Words of the core's range messages for them (a type error's words are the face's).
const RANGE_WORDS = [
  'no larger than 2**32',
  '4294967296',
  'a finite number > 0',
  'a number from 0 to capacity',
  'a non-negative safe integer (0 blocks',
  'a finite number or null',
  'for a shared bucket (share.bucket)',
  '2**31 (2147483648)',
]
// Their bounds written as code (maxKeys's 2**32, share.leaseMs's), or one of them compared.
const BOUNDS = /\b2 \*\* 32\b|\b4_?294_?967_?296\b|\bM(?:IN|AX)_LEASE_MS\b|\bMAX_MAX_KEYS\b|\b(?:maxKeys|leaseUnits|leaseMs)\s*[<>]/

/** The .js files of the face's folders, as [name, text without comments]. */
function faceSources() {
  return FACE.flatMap((folder) =>
    fs
      .readdirSync(path.join(ROOT, 'lib', folder))
      .filter((name) => name.endsWith('.js'))
      .map((name) => [`lib/${folder}/${name}`, withoutComments(fs.readFileSync(path.join(ROOT, 'lib', folder, name), 'utf8'))]),
  )
}

/** `text` without its // and /* comments (a `//` inside a string is rare enough in lib/ to ignore). */
function withoutComments(text) {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1')
}

/** `text` with the contents of its string and template literals emptied. */
function withoutStrings(text) {
  return text.replace(/'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|`(?:[^`\\]|\\.)*`/g, "''")
}

/** Range errors in `text` naming one of `names` (`rangeError(code, 'name', ...)`, `coded(RangeError, code, 'name ...`). */
function rangeErrorsNaming(text, names) {
  const name = names.map((n) => n.replace('.', '\\.')).join('|')
  const pattern = new RegExp(`(?:rangeError\\(\\s*[^,()]+,\\s*|RangeError\\s*,\\s*[^,()]+,\\s*)[\`'"](?:\\$\\{[^}]*\\})?(?:share\\.)?(?:${name})\\b`, 'g')
  return [...text.matchAll(pattern)].map((match) => match[0])
}

test("the face's sources hold no range check of an option the native side checks", () => {
  const sources = faceSources()
  assert.ok(sources.length > 20, `${sources.length} files`)
  const found = []
  for (const [file, text] of sources) {
    for (const call of rangeErrorsNaming(text, NATIVE_CHECKED)) found.push(`${file}: ${call}`)
    for (const words of RANGE_WORDS) if (text.includes(words)) found.push(`${file}: "${words}"`)
    const bound = BOUNDS.exec(withoutStrings(text))
    if (bound) found.push(`${file}: the bound ${bound[0]}`)
  }
  assert.deepEqual(found, [])
})

test('the scan finds a range check written as the face wrote them', () => {
  const samples = [
    "if (!(Number.isSafeInteger(maxKeys) && maxKeys >= 1 && maxKeys <= MAX_MAX_KEYS)) throw rangeError('ERR_INVALID_OPTION', 'maxKeys', 'a positive integer no larger than 2**32 (4294967296)', maxKeys)",
    "throw rangeError('ERR_INVALID_OPTION', 'share.leaseMs', what, value)",
    'throw coded(RangeError, \'ERR_INVALID_OPTION\', `${path}capacity must be a finite number > 0; received ${value}`)',
    'const MAX_LEASE_MS = 600_000',
  ]
  for (const sample of samples) {
    const text = withoutComments(sample)
    const hits = rangeErrorsNaming(text, NATIVE_CHECKED).length + RANGE_WORDS.filter((words) => text.includes(words)).length + (BOUNDS.test(withoutStrings(text)) ? 1 : 0)
    assert.ok(hits > 0, sample)
  }
  // A type check is not one.
  assert.equal(rangeErrorsNaming("throw typeError('ERR_INVALID_OPTION', 'maxKeys', 'a number', value)", NATIVE_CHECKED).length, 0)
})

test('with the native checks standing aside, JavaScript refuses no out-of-range value of them', (t) => {
  const reached = new Error('the native side was reached')
  const stand = { keyedCheckOptions: () => undefined, checkLimiterOptions: () => undefined }
  for (const name of ['createLimiter', 'keyedCreate', 'zoneOpen', 'snapshotParse']) {
    stand[name] = () => {
      throw reached
    }
  }
  const saved = Object.fromEntries(Object.keys(stand).map((name) => [name, native[name]]))
  t.after(() => Object.assign(native, saved))
  Object.assign(native, stand)

  const store = testStore().store
  const base = { capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ monotonicMs: 0, wallMs: 0 }) }
  const quota = (limit) => ({ limit, period: { unit: 'day', timeZone: 'UTC' } })
  const limits = [{ capacity: 0 }, { capacity: -1 }, { capacity: Infinity }, { capacity: NaN }, { refillPerSecond: 0 }, { refillPerSecond: Infinity }, { initialTokens: -1 }, { initialTokens: 11 }, { quota: quota(-1) }, { quota: quota(1.5) }, { earliestPlausibleWallMs: NaN }, { earliestPlausibleWallMs: Infinity }]
  const keyed = [
    ...limits,
    ...[0, -1, 1.5, 2 ** 32 + 1, NaN, Infinity].map((maxKeys) => ({ maxKeys })),
    ...[0, -1, 1.5, 2 ** 53, NaN].map((leaseUnits) => ({ share: { store, name: 'api', leaseUnits } })),
    ...[999, 600_001, 1_500.5, NaN, Infinity].map((leaseMs) => ({ share: { store, name: 'api', bucket: true, leaseMs } })),
    ...[1.5, 2 ** 31 + 1].map((capacity) => ({ capacity, share: { store, name: 'api', bucket: true } })),
    { maxKeys: 0, restore: new Uint8Array(8), policy: () => undefined },
    { maxKeys: 0, clock: systemClock(), zone: { path: zonePath('stand-in') } },
  ]
  const made = (Class, options) => {
    try {
      new Class({ ...base, ...options })
    } catch (error) {
      return error
    }
    return undefined
  }
  for (const options of limits) assert.equal(made(QuotaClock, options), reached, `QuotaClock ${JSON.stringify(options)}`)
  for (const options of keyed) assert.equal(made(KeyedQuotaClock, options), reached, `KeyedQuotaClock ${JSON.stringify(options, (k, v) => (k === 'store' ? 'store' : v))}`)
})

test("QuotaClock's refund leaves the value of its n to the native side, which checks it before any clock is read", (t) => {
  const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ monotonicMs: 0, wallMs: 0 }) })
  const reached = new Error('the native side was reached')
  const saved = native.limiterRefund
  t.after(() => {
    native.limiterRefund = saved
  })
  native.limiterRefund = () => {
    throw reached
  }
  for (const n of [0, -1, 1.5, 2 ** 53, NaN, Infinity, -0]) {
    assert.throws(() => limiter.refund(n), (error) => error === reached, `refund(${n})`)
  }
  // A value that is no number never crosses: the same RangeError, from the face.
  assert.throws(() => limiter.refund('2'), { code: 'ERR_INVALID_ARG', name: 'RangeError', message: 'n must be a positive safe integer; received "2"' })
})
