'use strict'
// quotaAdmin(store, { name }): the operator's view of a shared quota (docs/operating-quotas.md).
// Each method is one atomic operation of the store (lib/quota-store.js: usage, grant, reset) on
// the record of (name, key, periodId), and answers the record after it as a QuotaUsage:
//   { name, key, periodId, limit, extra, used, held, expiresAt }
// (limit null and zeros for a record that does not exist). `used - held` is what the instances
// admitted; `held` is what they hold unadmitted as of their last store call for the key.
// bucket(key) and fill(key) are the view of a shared bucket (bucketMethods below).

const { QuotaClockError } = require('../errors.js')
const { isQuotaStore, storeOperations, newRecordId } = require('../quota-store.js')
const { coded, describe, isPlainObject, readOptions, typeError, thrownText } = require('../validate.js')
const { isPeriodId } = require('../calendar.js')

const MAX_NAME_LENGTH = 128
const MAX_KEY_UNITS = 256

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

function checkUnits(units) {
  if (typeof units !== 'number') throw invalidArg(TypeError, 'units', 'a positive safe integer', units)
  if (!(Number.isSafeInteger(units) && units >= 1)) throw invalidArg(RangeError, 'units', 'a positive safe integer', units)
  return units
}

/**
 * The operator's view of a shared bucket (share.bucket) of share `name`: bucket(key) reads it (moving
 * nothing), fill(key) sets its tokens to C - out; each one atomic store operation (lib/quota-store.js:
 * bucketRead, bucketFill) answering a BucketUsage { name, key, capacity, refillPerSecond, tokens,
 * out, expiresAt } (capacity, refillPerSecond and expiresAt null, tokens and out 0, when the store
 * has no bucket record of the key).
 */
function bucketMethods(ops, name) {
  async function run(operation, what, key) {
    checkText(key, 'key', MAX_KEY_UNITS)
    let bucket
    try {
      bucket = await ops[operation]({ name, key })
    } catch (error) {
      if (error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE') throw error
      throw new QuotaClockError('ERR_STORE_UNAVAILABLE', `quota store of share "${name}" failed to answer ${what} for key ${describe(key)}: ${thrownText(error)}`, {
        cause: error,
      })
    }
    return bucket === null
      ? { name, key, capacity: null, refillPerSecond: null, tokens: 0, out: 0, expiresAt: null }
      : { name, key, ...bucket }
  }
  return {
    bucket: async (key) => run('bucketRead', 'bucket', key),
    fill: async (key) => run('bucketFill', 'fill', key),
  }
}

/** The operator's view of the shared quota `name` in `store` (a store made by redisStore / mongoStore). */
function quotaAdmin(store, options) {
  if (!isQuotaStore(store)) {
    throw typeError('ERR_INVALID_ARG', 'store', 'a quota store made by redisStore() or mongoStore() of quota-clock-source/shared', store)
  }
  if (!isPlainObject(options)) throw typeError('ERR_INVALID_ARG', 'options', 'an object { name }', options)
  const { name } = readOptions(options, ['name'], 'options', 'ERR_INVALID_ARG')
  checkText(name, 'options.name', MAX_NAME_LENGTH)
  const ops = storeOperations(store)

  /** Runs one store operation on (key, periodId); its record as a QuotaUsage. */
  async function run(operation, key, periodId, fields) {
    let record
    try {
      record = await ops[operation]({ name, key, periodId, ...fields })
    } catch (error) {
      if (error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE') throw error
      throw new QuotaClockError('ERR_STORE_UNAVAILABLE', `quota store of share "${name}" failed to answer ${operation} for key ${describe(key)} in ${periodId}: ${thrownText(error)}`, {
        cause: error,
      })
    }
    return record === null
      ? { name, key, periodId, limit: null, extra: 0, used: 0, held: 0, expiresAt: null }
      : { name, key, periodId, ...record }
  }

  /** The record's (key, periodId), checked in the arguments' order. */
  function record(key, periodId) {
    checkText(key, 'key', MAX_KEY_UNITS)
    checkPeriodId(periodId)
  }

  return Object.freeze({
    ...bucketMethods(ops, name),
    usage: async (key, periodId) => {
      record(key, periodId)
      return run('usage', key, periodId, {})
    },
    grant: async (key, periodId, units) => {
      record(key, periodId)
      checkUnits(units)
      return run('grant', key, periodId, { units, recordId: newRecordId() })
    },
    reset: async (key, periodId) => {
      record(key, periodId)
      return run('reset', key, periodId, {})
    },
  })
}

module.exports = { quotaAdmin }
