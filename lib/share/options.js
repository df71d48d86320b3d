'use strict'
// The `share` option of a KeyedQuotaClock, checked (ERR_INVALID_OPTION naming share.<field>) and
// normalized with its defaults; lib/share/driver.js drives the store calls it describes. The values
// the native side receives (leaseUnits, leaseMs) are checked there (src/limits.rs), each at its
// place in this order of checks; those only JS uses, here.

const native = require('../native/native.js')
const { callNative } = require('../native/errors.js')
const { isQuotaStore } = require('./protocol.js')
const { coded, describe, isPlainObject, readOptions, typeError, rangeError, MAX_NAME_LENGTH, MAX_TIMER_MS } = require('../common/validate.js')

const SHARE_KEYS = ['store', 'name', 'leaseUnits', 'idleMs', 'timeoutMs', 'failOpen', 'bucket', 'leaseMs']
const DEFAULT_IDLE_MS = 10_000
const DEFAULT_TIMEOUT_MS = 300
// share.leaseMs: how long a process may spend a slice of a fleet bucket it took from the store.
const DEFAULT_LEASE_MS = 10_000

/** Checks `share` (ERR_INVALID_OPTION naming share.<field>); returns it normalized. */
function parseShareOptions(share) {
  if (!isPlainObject(share)) throw typeError('ERR_INVALID_OPTION', 'share', 'an object { store, name, leaseUnits?, idleMs?, timeoutMs?, failOpen?, bucket?, leaseMs? }', share)
  const read = readOptions(share, SHARE_KEYS, 'share')
  if (!isQuotaStore(read.store)) {
    throw typeError('ERR_INVALID_OPTION', 'share.store', 'a quota store made by redisStore() or mongoStore() of quota-clock-source/shared', read.store)
  }
  const { name } = read
  if (typeof name !== 'string') throw typeError('ERR_INVALID_OPTION', 'share.name', `a string of 1 to ${MAX_NAME_LENGTH} characters`, name)
  if (name.length === 0 || name.length > MAX_NAME_LENGTH) {
    throw coded(RangeError, 'ERR_INVALID_OPTION', `share.name must be a string of 1 to ${MAX_NAME_LENGTH} characters; received a string of ${name.length}`)
  }
  const leaseUnits = read.leaseUnits === undefined ? undefined : checkedNatively('leaseUnits', read.leaseUnits, 'a positive safe integer')
  const idleMs = read.idleMs === undefined ? DEFAULT_IDLE_MS : milliseconds(read.idleMs, 'share.idleMs')
  const timeoutMs = read.timeoutMs === undefined ? DEFAULT_TIMEOUT_MS : milliseconds(read.timeoutMs, 'share.timeoutMs')
  const failOpen = read.failOpen === undefined ? false : read.failOpen
  if (typeof failOpen !== 'boolean') throw typeError('ERR_INVALID_OPTION', 'share.failOpen', 'a boolean', failOpen)
  const bucket = read.bucket === undefined ? false : read.bucket
  if (typeof bucket !== 'boolean') throw typeError('ERR_INVALID_OPTION', 'share.bucket', 'a boolean', bucket)
  // leaseMs is how long a fleet bucket's slice may be spent: without one it would be silently unused.
  if (read.leaseMs !== undefined && !bucket) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `share.leaseMs needs share.bucket: true (it is how long a fleet bucket's slice may be spent); received share.leaseMs ${describe(read.leaseMs)} and share.bucket ${describe(read.bucket)}`)
  }
  const leaseMs = read.leaseMs === undefined ? DEFAULT_LEASE_MS : checkedNatively('leaseMs', read.leaseMs, 'an integer number of milliseconds from 1000 to 600000')
  return { store: read.store, name, leaseUnits, idleMs, timeoutMs, failOpen, bucket, leaseMs }
}

/**
 * share.<field>, a number the native side receives: its type here (what a wrong one is refused
 * with: `expected`), its value by the core's check (keyedCheckOptions), before any later option's.
 */
function checkedNatively(field, value, expected) {
  if (typeof value !== 'number') throw typeError('ERR_INVALID_OPTION', `share.${field}`, expected, value)
  callNative(() => native.keyedCheckOptions({ [field]: value }))
  return value
}

/** A wait in ms: a number > 0, no longer than a timer can be set for. */
function milliseconds(value, name) {
  if (typeof value !== 'number') throw typeError('ERR_INVALID_OPTION', name, 'a number of milliseconds', value)
  if (!(value > 0 && value <= MAX_TIMER_MS)) throw rangeError('ERR_INVALID_OPTION', name, `a number of milliseconds > 0 and no larger than ${MAX_TIMER_MS}`, value)
  return value
}

module.exports = { parseShareOptions, MAX_TIMER_MS }
