'use strict'
// A KeyedQuotaClock's options whose values the core checks (maxKeys, share.leaseUnits,
// share.leaseMs, the limits): the error a caller sees, word for word, and which one wins when
// several options are wrong; a refused option reads no clock, calls no policy and no store, and
// makes no zone file.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { KeyedQuotaClock, manualClock, systemClock } = require('..')
const { testStore } = require('./helpers/test-store.js')
const { zonePath } = require('./helpers/zone.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const BASE = { capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 100, period: UTC_DAY } }

const t = testStore()
const SHARE = { store: t.store, name: 'api' }
const BUCKET = { ...SHARE, bucket: true }

function make(options) {
  return () => new KeyedQuotaClock({ ...BASE, clock: manualClock({ monotonicMs: 0, wallMs: NOON }), ...options })
}

/** The exact error: its class, ERR_INVALID_OPTION, and its message. */
function exactly(Class, message) {
  return (error) => {
    assert.ok(error instanceof Class, `${error.constructor.name}: ${error.message}`)
    assert.equal(error.code, 'ERR_INVALID_OPTION')
    assert.equal(error.message, message)
    return true
  }
}

const MAX_KEYS = 'maxKeys must be a positive integer no larger than 2**32 (4294967296); received '
const LEASE_UNITS = 'share.leaseUnits must be a positive safe integer; received '
const LEASE_MS = 'share.leaseMs must be an integer number of milliseconds from 1000 to 600000; received '

test('maxKeys, share.leaseUnits and share.leaseMs out of range: a RangeError ERR_INVALID_OPTION, word for word', () => {
  const cases = [
    [{ maxKeys: 0 }, `${MAX_KEYS}0`],
    [{ maxKeys: -0 }, `${MAX_KEYS}0`],
    [{ maxKeys: 1.5 }, `${MAX_KEYS}1.5`],
    [{ maxKeys: 2 ** 32 + 1 }, `${MAX_KEYS}4294967297`],
    [{ maxKeys: 1e21 }, `${MAX_KEYS}1e+21`],
    [{ maxKeys: NaN }, `${MAX_KEYS}NaN`],
    [{ maxKeys: -Infinity }, `${MAX_KEYS}-Infinity`],
    [{ share: { ...SHARE, leaseUnits: 0 } }, `${LEASE_UNITS}0`],
    [{ share: { ...SHARE, leaseUnits: 2.5 } }, `${LEASE_UNITS}2.5`],
    [{ share: { ...SHARE, leaseUnits: 2 ** 53 } }, `${LEASE_UNITS}9007199254740992`],
    [{ share: { ...SHARE, leaseUnits: Infinity } }, `${LEASE_UNITS}Infinity`],
    [{ share: { ...BUCKET, leaseMs: 999 } }, `${LEASE_MS}999`],
    [{ share: { ...BUCKET, leaseMs: 600_001 } }, `${LEASE_MS}600001`],
    [{ share: { ...BUCKET, leaseMs: 1_500.5 } }, `${LEASE_MS}1500.5`],
    [{ share: { ...BUCKET, leaseMs: 5e-324 } }, `${LEASE_MS}5e-324`],
    [{ share: { ...BUCKET, leaseMs: NaN } }, `${LEASE_MS}NaN`],
  ]
  for (const [options, message] of cases) assert.throws(make(options), exactly(RangeError, message), message)
  // At the bounds, made.
  for (const options of [{ maxKeys: 1 }, { maxKeys: 2 ** 32 }, { share: { ...SHARE, leaseUnits: Number.MAX_SAFE_INTEGER } }, { share: { ...BUCKET, leaseMs: 1_000 } }, { share: { ...BUCKET, leaseMs: 600_000 } }]) {
    assert.equal(make(options)().size, 0)
  }
})

test('maxKeys, share.leaseUnits and share.leaseMs of another type: a TypeError ERR_INVALID_OPTION, word for word', () => {
  assert.throws(make({ maxKeys: '5' }), exactly(TypeError, 'maxKeys must be a number; received "5"'))
  assert.throws(make({ maxKeys: 5n }), exactly(TypeError, 'maxKeys must be a number; received 5n'))
  assert.throws(make({ share: { ...SHARE, leaseUnits: '10' } }), exactly(TypeError, `${LEASE_UNITS}"10"`))
  assert.throws(make({ share: { ...SHARE, leaseUnits: null } }), exactly(TypeError, `${LEASE_UNITS}null`))
  assert.throws(make({ share: { ...BUCKET, leaseMs: '10000' } }), exactly(TypeError, `${LEASE_MS}"10000"`))
  assert.throws(make({ share: { ...BUCKET, leaseMs: {} } }), exactly(TypeError, `${LEASE_MS}an object`))
})

test('several options wrong: the first in the order of checks wins', () => {
  const path = zonePath('order')
  // [what, options, the error seen]
  const cases = [
    ['suspendPolicy before maxKeys', { suspendPolicy: 'nap', maxKeys: 0 }, (e) => e instanceof RangeError && /^suspendPolicy must be one of/.test(e.message)],
    ['share.leaseUnits before share.idleMs', { share: { ...SHARE, leaseUnits: 0, idleMs: '5' } }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.leaseUnits before share.timeoutMs', { share: { ...SHARE, leaseUnits: 0, timeoutMs: 0 } }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.leaseUnits before share.failOpen', { share: { ...SHARE, leaseUnits: 0, failOpen: 'yes' } }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.leaseUnits before share.leaseMs without share.bucket', { share: { ...SHARE, leaseUnits: 0, leaseMs: 999 } }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.leaseUnits before share.leaseMs', { share: { ...BUCKET, leaseUnits: 0, leaseMs: 999 } }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.idleMs before share.leaseMs', { share: { ...BUCKET, idleMs: 0, leaseMs: 999 } }, (e) => e instanceof RangeError && /^share\.idleMs must be/.test(e.message)],
    ['share.bucket before share.leaseMs', { share: { ...SHARE, bucket: 'yes', leaseMs: 999 } }, (e) => e instanceof TypeError && /^share\.bucket must be a boolean/.test(e.message)],
    ['share.leaseMs before zone with share', { share: { ...BUCKET, leaseMs: 999 }, zone: { path } }, exactly(RangeError, `${LEASE_MS}999`)],
    ['share.leaseMs before policy', { share: { ...BUCKET, leaseMs: 999 }, policy: 'no' }, exactly(RangeError, `${LEASE_MS}999`)],
    ['share.leaseMs before maxKeys', { share: { ...BUCKET, leaseMs: 999 }, maxKeys: 0 }, exactly(RangeError, `${LEASE_MS}999`)],
    ['share.leaseUnits before maxKeys', { share: { ...SHARE, leaseUnits: 0 }, maxKeys: 0 }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.leaseUnits before capacity', { capacity: -1, share: { ...SHARE, leaseUnits: 0 } }, exactly(RangeError, `${LEASE_UNITS}0`)],
    ['share.leaseMs before capacity', { capacity: -1, share: { ...BUCKET, leaseMs: 999 } }, exactly(RangeError, `${LEASE_MS}999`)],
    ['share.leaseMs before a shared bucket\'s capacity', { capacity: 1.5, share: { ...BUCKET, leaseMs: 999 } }, exactly(RangeError, `${LEASE_MS}999`)],
    ['share.leaseMs before quota.limit', { quota: { limit: -1, period: UTC_DAY }, share: { ...BUCKET, leaseMs: 999 } }, exactly(RangeError, `${LEASE_MS}999`)],
    ['zone with share before maxKeys', { share: SHARE, zone: { path }, maxKeys: 0 }, (e) => e instanceof TypeError && /^zone and share cannot be used together/.test(e.message)],
    ['policy before maxKeys', { policy: {}, maxKeys: 0 }, (e) => e instanceof TypeError && /^policy must be a function/.test(e.message)],
    ['maxKeys before restore', { maxKeys: 0, restore: [1] }, exactly(RangeError, `${MAX_KEYS}0`)],
    ['maxKeys before the snapshot', { maxKeys: 0, restore: new Uint8Array(3) }, exactly(RangeError, `${MAX_KEYS}0`)],
    ['maxKeys before zone.path', { maxKeys: 0, zone: { path: '' } }, exactly(RangeError, `${MAX_KEYS}0`)],
    ['maxKeys before the zone\'s clock', { maxKeys: 0, zone: { path } }, exactly(RangeError, `${MAX_KEYS}0`)],
    ['maxKeys before capacity', { capacity: -1, maxKeys: 0 }, exactly(RangeError, `${MAX_KEYS}0`)],
    ['maxKeys before initialTokens', { initialTokens: 11, maxKeys: 1.5 }, exactly(RangeError, `${MAX_KEYS}1.5`)],
    ['maxKeys before earliestPlausibleWallMs', { earliestPlausibleWallMs: NaN, maxKeys: 0 }, exactly(RangeError, `${MAX_KEYS}0`)],
    ['maxKeys before quota.limit', { quota: { limit: 1.5, period: UTC_DAY }, maxKeys: 0 }, exactly(RangeError, `${MAX_KEYS}0`)],
  ]
  for (const [what, options, expected] of cases) assert.throws(make(options), expected, what)
  // The zone's own order: maxKeys before the limits, with the system clock a zone needs.
  assert.throws(() => new KeyedQuotaClock({ ...BASE, capacity: -1, clock: systemClock(), maxKeys: 0, zone: { path } }), exactly(RangeError, `${MAX_KEYS}0`))
  assert.throws(() => new KeyedQuotaClock({ ...BASE, capacity: -1, clock: systemClock(), zone: { path } }), exactly(RangeError, 'capacity must be a finite number > 0; received -1'))
  assert.equal(fs.existsSync(path), false, 'no zone file was made')
})

test('a refused maxKeys, share.leaseUnits or share.leaseMs reads no clock, calls no policy, asks no store and makes no zone', () => {
  const source = new KeyedQuotaClock({ ...BASE, clock: manualClock({ monotonicMs: 0, wallMs: NOON }) })
  source.tryConsume('a')
  const restore = source.snapshot()
  let reads = 0
  let policyCalls = 0
  let anomalies = 0
  const clock = { monotonicMs: () => (reads++, 0), wallMs: () => (reads++, NOON) }
  const policy = () => (policyCalls++, undefined)
  const onAnomaly = () => anomalies++
  const path = zonePath('refused')
  const store = testStore()
  const refused = [
    { maxKeys: 0, restore, policy },
    { maxKeys: 2 ** 32 + 1, zone: { path }, clock: systemClock() },
    { share: { store: store.store, name: 'api', leaseUnits: 0 }, restore, policy },
    { share: { store: store.store, name: 'api', bucket: true, leaseMs: 999 }, restore, policy },
  ]
  for (const options of refused) {
    assert.throws(() => new KeyedQuotaClock({ ...BASE, clock, onAnomaly, ...options }), (e) => e instanceof RangeError && e.code === 'ERR_INVALID_OPTION')
  }
  assert.equal(reads, 0, 'no clock read')
  assert.equal(policyCalls, 0, 'no policy called')
  assert.equal(anomalies, 0)
  assert.deepEqual(Object.values(store.calls).flat(), [], 'no store call')
  assert.equal(fs.existsSync(path), false, 'no zone file')
  // The same options with the values in range are made, reading the clock and calling the policy.
  const made = new KeyedQuotaClock({ ...BASE, clock, maxKeys: 5, restore, policy, share: { store: store.store, name: 'api', leaseUnits: 3 } })
  assert.equal(made.size, 1)
  assert.ok(reads > 0 && policyCalls === 1)
})
