'use strict'
// A KeyPolicy (a key's limits, or QuotaClock#setLimits' new ones) merged with the limits it
// overrides and type-checked; its values are checked natively, once.

const { quotaInput, bucketOptions, noBucketToFill } = require('./options.js')
const { coded, isPlainObject, readOptions, typeError, checkNumber } = require('../common/validate.js')

const POLICY_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'quota']

/**
 * A KeyPolicy merged with the defaults, type-checked; its values are checked natively (once).
 * The bucket: `capacity` or `refillPerSecond` alone overrides that one of the defaults' bucket;
 * with defaults that have no bucket (a quota alone), a key gets one only with both, and neither
 * keeps it quota-only.
 */
function normalizePolicy(policy, path, defaults, expected = 'a KeyPolicy object { capacity?, refillPerSecond?, initialTokens?, quota? } or undefined') {
  if (policy === undefined && expected.endsWith('undefined')) return { ...defaults, path }
  if (!isPlainObject(policy)) throw typeError('ERR_INVALID_OPTION', path, expected, policy)
  // Read once, own properties only (a getter that throws is ERR_INVALID_OPTION with its error as cause).
  policy = readOptions(policy, POLICY_KEYS, path)
  let { capacity, refillPerSecond, bucket } = defaults
  if (!bucket && (policy.capacity !== undefined || policy.refillPerSecond !== undefined)) {
    ;({ capacity, refillPerSecond, bucket } = bucketOptions(policy.capacity, policy.refillPerSecond, true, `${path}.`))
  } else {
    if (policy.capacity !== undefined) capacity = checkNumber(policy.capacity, `${path}.capacity`)
    if (policy.refillPerSecond !== undefined) refillPerSecond = checkNumber(policy.refillPerSecond, `${path}.refillPerSecond`)
  }
  let initialTokens
  if (policy.initialTokens !== undefined) {
    if (!bucket) throw noBucketToFill(`${path}.initialTokens`, policy.initialTokens)
    initialTokens = checkNumber(policy.initialTokens, `${path}.initialTokens`)
  }
  // The limiter's own initialTokens if it set one (never above this key's capacity), else a full bucket.
  else initialTokens = defaults.initialTokensGiven ? Math.min(defaults.initialTokens, capacity) : capacity
  let { quotaLimit, quotaPeriod } = defaults
  if (policy.quota === null) {
    if (!bucket) throw coded(TypeError, 'ERR_INVALID_OPTION', `${path}.quota is null and the key has no bucket (the limiter's defaults are a quota alone): give it capacity and refillPerSecond, or a quota`)
    quotaLimit = undefined
    quotaPeriod = undefined
  } else if (policy.quota !== undefined) {
    ;({ quotaLimit, quotaPeriod } = quotaInput(policy.quota, `${path}.quota`, 'an object { limit, period } or null'))
  }
  return { capacity, refillPerSecond, initialTokens, bucket, quotaLimit, quotaPeriod, path }
}

module.exports = { normalizePolicy }
