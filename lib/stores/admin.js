'use strict'
// quotaAdmin(store, { name, timeoutMs }): the operator's view of a shared quota (docs/operating-quotas.md).
// Each method is one atomic operation of the store (lib/share/protocol.js: usage, grant, reset) on
// the record of (name, key, periodId), and answers the record after it as a QuotaUsage:
//   { name, key, periodId, limit, extra, used, held, expiresAt }
// (limit null and zeros for a record that does not exist). `used - held` is what the instances
// admitted; `held` is what they hold unadmitted as of their last store call for the key.
// bucket(key) and fill(key) are the view of a shared bucket (bucketMethods below).

const { QuotaClockError } = require('../native/errors.js')
const { isQuotaStore, storeOperations, newRecordId } = require('../share/protocol.js')
const { coded, describe, isPlainObject, readOptions, typeError, thrownText, MAX_NAME_LENGTH, MAX_KEY_UNITS, MAX_TIMER_MS } = require('../common/validate.js')
const { isPeriodId } = require('../time/calendar.js')
const { storeCallWithin } = require('../share/store-call.js')

// How long an operation may wait for the store, unless options.timeoutMs says otherwise.
const DEFAULT_TIMEOUT_MS = 5_000

function invalidArg(ErrorClass, name, expected, value) {
  return coded(ErrorClass, 'ERR_INVALID_ARG', `${name} must be ${expected}; received ${describe(value)}`)
}

/** A string of 1..max UTF-16 code units (ERR_INVALID_ARG naming `name`). */
function checkText(value, name, max) {
  const expected = `a string of 1 to ${max} UTF-16 code units`
  if (typeof value !== 'string') throw invalidArg(TypeError, name, expected, value)
  if (value.length === 0 || value.length > max) throw coded(RangeError, 'ERR_INVALID_ARG', `${name} must be ${expected}; received a string of ${value.length}`)
  return value
}

function checkPeriodId(periodId) {
  const expected = "a period id as periodFor() gives it: 'YYYY-MM-DD' (day, week), 'YYYY-MM' (month) or 'YYYY' (year)"
  if (typeof periodId !== 'string') throw invalidArg(TypeError, 'periodId', expected, periodId)
  if (!isPeriodId(periodId)) throw invalidArg(RangeError, 'periodId', expected, periodId)
  return periodId
}

/** options.timeoutMs: a positive integer of milliseconds a timer can be set for. */
function checkTimeout(timeoutMs) {
  const expected = `a positive integer number of milliseconds, at most ${MAX_TIMER_MS}`
  if (typeof timeoutMs !== 'number') throw invalidArg(TypeError, 'options.timeoutMs', expected, timeoutMs)
  if (!(Number.isInteger(timeoutMs) && timeoutMs >= 1 && timeoutMs <= MAX_TIMER_MS)) throw invalidArg(RangeError, 'options.timeoutMs', expected, timeoutMs)
  return timeoutMs
}

function checkUnits(units) {
  if (typeof units !== 'number') throw invalidArg(TypeError, 'units', 'a positive safe integer', units)
  if (!(Number.isSafeInteger(units) && units >= 1)) throw invalidArg(RangeError, 'units', 'a positive safe integer', units)
  return units
}

/** A grant the store refused: it would take the record's limit + extra past Number.MAX_SAFE_INTEGER. */
function refusedGrant(key, periodId, units, allowance) {
  const most = Number.MAX_SAFE_INTEGER - allowance
  return coded(
    RangeError,
    'ERR_INVALID_ARG',
    `units must be at most ${most} for key ${describe(key)} in ${periodId}: its allowance (limit + extra) is ${allowance} and may not pass ` +
      `Number.MAX_SAFE_INTEGER (${Number.MAX_SAFE_INTEGER}); received ${units}. Nothing was granted`,
  )
}

/**
 * The operator's view of a shared bucket (share.bucket) of share `name`: bucket(key) reads it (moving
 * nothing), fill(key) sets its tokens to C - out; each one atomic store operation (lib/share/protocol.js:
 * bucketRead, bucketFill) answering a BucketUsage { name, key, capacity, refillPerSecond, tokens,
 * out, expiresAt } (capacity, refillPerSecond and expiresAt null, tokens and out 0, when the store
 * has no bucket record of the key).
 */
function bucketMethods(name, run) {
  const view = (operation, what) => async (key) => {
    checkText(key, 'key', MAX_KEY_UNITS)
    const bucket = await run(operation, { key }, `${what} for key ${describe(key)}`)
    return bucket === null ? { name, key, capacity: null, refillPerSecond: null, tokens: 0, out: 0, expiresAt: null } : { name, key, ...bucket }
  }
  return { bucket: view('bucketRead', 'bucket'), fill: view('bucketFill', 'fill') }
}

const MAX_BLOCK_MS = 365 * 24 * 60 * 60 * 1000
const DAY_MS = 24 * 60 * 60 * 1000
const DEFAULT_KEYS_LIMIT = 100
const MAX_KEYS_LIMIT = 10_000

/**
 * The operator's blocks of share `name` (docs/blocking.md): block(key, forMs), unblock(key),
 * blocked(key), each one store operation answering { name, key, blockedForMs, level }; keys({
 * blocked, limit }) the keys with a record, read incrementally (SCAN, an index range).
 */
function blockMethods(name, run) {
  const answer = (key, { blockedMs, level }) => ({ name, key, blockedForMs: Math.ceil(blockedMs), level })
  return {
    block: async (key, forMs) => {
      checkText(key, 'key', MAX_KEY_UNITS)
      if (typeof forMs !== 'number') throw invalidArg(TypeError, 'forMs', 'a positive safe integer of ms up to 365 days', forMs)
      if (!(Number.isSafeInteger(forMs) && forMs >= 1 && forMs <= MAX_BLOCK_MS)) throw invalidArg(RangeError, 'forMs', 'a positive safe integer of ms up to 365 days', forMs)
      return answer(key, await run('blockSet', { key, forMs, resetAfterMs: DAY_MS }, `block for key ${describe(key)}`))
    },
    unblock: async (key) => {
      checkText(key, 'key', MAX_KEY_UNITS)
      return answer(key, await run('blockClear', { key }, `unblock for key ${describe(key)}`))
    },
    blocked: async (key) => {
      checkText(key, 'key', MAX_KEY_UNITS)
      return answer(key, await run('blockRead', { key }, `blocked for key ${describe(key)}`))
    },
    keys: async (options = {}) => {
      if (!isPlainObject(options)) throw typeError('ERR_INVALID_ARG', 'options', 'an object { blocked?, limit? }', options)
      const { blocked = false, limit = DEFAULT_KEYS_LIMIT } = readOptions(options, ['blocked', 'limit'], 'options', 'ERR_INVALID_ARG')
      if (typeof blocked !== 'boolean') throw invalidArg(TypeError, 'options.blocked', 'a boolean', blocked)
      if (typeof limit !== 'number') throw invalidArg(TypeError, 'options.limit', `an integer from 1 to ${MAX_KEYS_LIMIT}`, limit)
      if (!(Number.isInteger(limit) && limit >= 1 && limit <= MAX_KEYS_LIMIT)) throw invalidArg(RangeError, 'options.limit', `an integer from 1 to ${MAX_KEYS_LIMIT}`, limit)
      const found = await run('keys', { blocked, limit }, 'keys')
      return found.map(({ key, blockedMs }) => ({ key, blockedForMs: Math.ceil(blockedMs) }))
    },
  }
}

/**
 * Runs one store operation of share `name` (lib/share/store-call.js), for at most timeoutMs: its
 * answer, ERR_STORE_RESPONSE as the store threw it, or ERR_STORE_UNAVAILABLE (`says`: the
 * operation and its record, for the message; `afterTimeout`: what the caller should know then).
 */
function storeRunner(ops, name, timeoutMs) {
  return async function run(operation, fields, says, afterTimeout = '') {
    let answer
    try {
      answer = await storeCallWithin((roundTrip) => ops[operation]({ name, ...fields }, roundTrip), undefined, timeoutMs, () => TIMED_OUT)
    } catch (error) {
      if (error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE') throw error
      throw new QuotaClockError('ERR_STORE_UNAVAILABLE', `quota store of share "${name}" failed to answer ${says}: ${thrownText(error)}`, { cause: error })
    }
    if (answer === TIMED_OUT) throw new QuotaClockError('ERR_STORE_UNAVAILABLE', `quota store of share "${name}" did not answer ${says} within ${timeoutMs} ms${afterTimeout}`)
    return answer
  }
}

// What a store call that did not answer within timeoutMs resolves to.
const TIMED_OUT = Symbol('timed out')

/** The operator's view of the shared quota `name` in `store` (a store made by redisStore / mongoStore). */
function quotaAdmin(store, options) {
  if (!isQuotaStore(store)) {
    throw typeError('ERR_INVALID_ARG', 'store', 'a quota store made by redisStore() or mongoStore() of quota-clock-source/shared', store)
  }
  if (!isPlainObject(options)) throw typeError('ERR_INVALID_ARG', 'options', 'an object { name, timeoutMs? }', options)
  const { name, timeoutMs = DEFAULT_TIMEOUT_MS } = readOptions(options, ['name', 'timeoutMs'], 'options', 'ERR_INVALID_ARG')
  checkText(name, 'options.name', MAX_NAME_LENGTH)
  checkTimeout(timeoutMs)
  const ops = storeOperations(store)

  const run = storeRunner(ops, name, timeoutMs)

  /** One store operation on (key, periodId): its record as a QuotaUsage. */
  async function quota(operation, key, periodId, fields) {
    // A grant sent may be applied after the wait ends: retrying blindly could grant twice.
    const landed = operation === 'grant' ? `; the grant may still have landed: check with usage(${describe(key)}, '${periodId}') before granting again` : ''
    const record = await run(operation, { key, periodId, ...fields }, `${operation} for key ${describe(key)} in ${periodId}`, landed)
    if (record !== null && record.refused !== undefined) throw refusedGrant(key, periodId, fields.units, record.refused)
    return record === null ? { name, key, periodId, limit: null, extra: 0, used: 0, held: 0, expiresAt: null } : { name, key, periodId, ...record }
  }

  /** The record's (key, periodId), checked in the arguments' order. */
  function record(key, periodId) {
    checkText(key, 'key', MAX_KEY_UNITS)
    checkPeriodId(periodId)
  }

  return Object.freeze({
    ...bucketMethods(name, run),
    ...blockMethods(name, run),
    usage: async (key, periodId) => {
      record(key, periodId)
      return quota('usage', key, periodId, {})
    },
    grant: async (key, periodId, units) => {
      record(key, periodId)
      checkUnits(units)
      return quota('grant', key, periodId, { units, recordId: newRecordId() })
    },
    reset: async (key, periodId) => {
      record(key, periodId)
      return quota('reset', key, periodId, {})
    },
  })
}

module.exports = { quotaAdmin }
