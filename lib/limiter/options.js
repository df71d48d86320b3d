'use strict'
// The options of a limiter (QuotaClock's, which KeyedQuotaClock shares): read once, defaults
// applied and types checked here (the native side would refuse a wrong type with an error of its
// own). Their numeric values (ranges, integers) are checked once, natively, when the limiter is
// made (src/limits.rs); the suspend policy's name is checked here, against the native contract's
// list.

const { clockArguments, systemClock } = require('../time/clocks.js')
const { periodSpecInput } = require('../time/calendar.js')
const { SUSPEND_POLICIES, oneOf } = require('../native/contract.js')
const { coded, describe, isPlainObject, readOptions, typeError, rangeError, checkNumber } = require('../common/validate.js')

const OPTION_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'suspendPolicy', 'quota', 'clock', 'onAnomaly', 'earliestPlausibleWallMs']
const SUSPEND_POLICY_CHOICES = oneOf(SUSPEND_POLICIES)
const NO_QUOTA = Object.freeze({ quotaLimit: undefined, quotaPeriod: undefined })
// A quota alone: no bucket. The core holds it as a bucket that is never short (Infinity).
const NO_BUCKET = Object.freeze({ capacity: Infinity, refillPerSecond: Infinity, bucket: false })
const DEFAULT_EARLIEST_PLAUSIBLE_WALL_MS = Date.UTC(2020, 0, 1)
const MISSING_SUSPEND_POLICY =
  "suspendPolicy is required and has no default: when the wall clock runs ahead of the monotonic clock and no elapsedRealtimeMs reader can tell a host suspend from a wall-clock step, only you know whether that time should refill the bucket ('credit'), be ignored ('ignore'), or make the call fail ('refuse'); received undefined"

/**
 * The bucket's two settings at `path` (`''` or `policy("key").`): both numbers, or, with a quota,
 * both left out (a quota alone: no bucket, every figure Infinity). One without the other is refused.
 */
function bucketOptions(capacity, refillPerSecond, hasQuota, path) {
  if (capacity === undefined && refillPerSecond === undefined && hasQuota) return NO_BUCKET
  if ((capacity === undefined) !== (refillPerSecond === undefined)) {
    const [given, missing] = capacity === undefined ? ['refillPerSecond', 'capacity'] : ['capacity', 'refillPerSecond']
    const value = capacity === undefined ? refillPerSecond : capacity
    throw coded(
      TypeError,
      'ERR_INVALID_OPTION',
      `${path}${missing} must be given with ${path}${given}: a bucket needs both${hasQuota ? ', and a quota alone neither' : ''}; received ${path}${given} ${describe(value)} and ${path}${missing} undefined`,
    )
  }
  return { capacity: checkNumber(capacity, `${path}capacity`), refillPerSecond: checkNumber(refillPerSecond, `${path}refillPerSecond`), bucket: true }
}

/**
 * Neither a bucket nor a quota in a limiter's options: what would do. (With `policy`, these are
 * the defaults of keys whose policy leaves them out: a default quota is enough.)
 */
function noLimit(withPolicy) {
  const policyHint = withPolicy
    ? "; with policy, these are the defaults for what a key's policy leaves out, and a default quota alone is enough (e.g. quota: { limit: 1000, period: { unit: 'month', timeZone: 'UTC' } }; a key's policy overrides it)"
    : ''
  return coded(
    TypeError,
    'ERR_INVALID_OPTION',
    `capacity must be a number; received undefined. A limiter needs a bucket (capacity and refillPerSecond) or a quota alone (quota: { limit, period }, without capacity and refillPerSecond)${policyHint}`,
  )
}

/** initialTokens where there is no bucket (a quota alone). */
function noBucketToFill(name, value) {
  return coded(TypeError, 'ERR_INVALID_OPTION', `${name} has no bucket to fill: with a quota alone (no capacity and refillPerSecond) leave it out; received ${describe(value)}`)
}

/** A quota `{ limit, period }` at `path`, type-checked (`expected` says what else the place accepts). */
function quotaInput(quota, path, expected = 'an object { limit, period }') {
  if (!isPlainObject(quota)) throw typeError('ERR_INVALID_OPTION', path, expected, quota)
  const { limit, period } = readOptions(quota, ['limit', 'period'], path)
  return { quotaLimit: checkNumber(limit, `${path}.limit`), quotaPeriod: periodSpecInput(period, `${path}.period`) }
}

/** QuotaClock's options; `moreKeys` are read too and checked by the caller (KeyedQuotaClock's own). */
function parseOptions(given, moreKeys = []) {
  if (!isPlainObject(given)) throw typeError('ERR_INVALID_OPTION', 'options', 'an object { capacity, refillPerSecond, suspendPolicy, ... }', given)
  const options = readOptions(given, moreKeys.length === 0 ? OPTION_KEYS : [...OPTION_KEYS, ...moreKeys], '')
  if (options.capacity === undefined && options.refillPerSecond === undefined && options.quota === undefined) throw noLimit(options.policy !== undefined)
  const { capacity, refillPerSecond, bucket } = bucketOptions(options.capacity, options.refillPerSecond, options.quota !== undefined, '')
  let initialTokens = capacity
  if (options.initialTokens !== undefined) {
    if (!bucket) throw noBucketToFill('initialTokens', options.initialTokens)
    initialTokens = checkNumber(options.initialTokens, 'initialTokens')
  }
  const { suspendPolicy } = options
  if (suspendPolicy === undefined) throw coded(TypeError, 'ERR_INVALID_OPTION', MISSING_SUSPEND_POLICY)
  if (typeof suspendPolicy !== 'string') throw typeError('ERR_INVALID_OPTION', 'suspendPolicy', SUSPEND_POLICY_CHOICES, suspendPolicy)
  // Its name is checked here, against the native list: a JS string does not always cross to Rust
  // intact (a lone surrogate arrives as U+FFFD), and the message must show what was received.
  if (!SUSPEND_POLICIES.includes(suspendPolicy)) throw rangeError('ERR_INVALID_OPTION', 'suspendPolicy', SUSPEND_POLICY_CHOICES, suspendPolicy)

  const { quotaLimit, quotaPeriod } = options.quota === undefined ? NO_QUOTA : quotaInput(options.quota, 'quota')

  const clock = options.clock === undefined ? systemClock() : options.clock
  const clockArgs = clockArguments(clock)

  const { onAnomaly } = options
  if (onAnomaly !== undefined && typeof onAnomaly !== 'function') throw typeError('ERR_INVALID_OPTION', 'onAnomaly', 'a function (anomaly) => void', onAnomaly)

  let earliestPlausibleWallMs = DEFAULT_EARLIEST_PLAUSIBLE_WALL_MS
  if (options.earliestPlausibleWallMs === null) earliestPlausibleWallMs = undefined
  else if (options.earliestPlausibleWallMs !== undefined) earliestPlausibleWallMs = checkNumber(options.earliestPlausibleWallMs, 'earliestPlausibleWallMs')

  return {
    limiterOptions: { capacity, refillPerSecond, initialTokens, bucket, suspendPolicy, quotaLimit, quotaPeriod, earliestPlausibleWallMs },
    clockArgs,
    onAnomaly,
    initialTokensGiven: options.initialTokens !== undefined,
    // The options as read (once, own properties only), for the caller's `moreKeys`.
    read: options,
  }
}

/**
 * `n` of a call (tryConsume, consume, refund): its type only. A number crosses to the native side,
 * which checks its value (a positive safe integer, within the capacity for a consume: src/args.rs)
 * before it reads a clock, on its quiet path too; anything else is this RangeError, as the result
 * buffer would turn it into a number.
 */
function checkCount(n) {
  if (typeof n !== 'number') throw rangeError('ERR_INVALID_ARG', 'n', 'a positive safe integer', n)
}

module.exports = { parseOptions, quotaInput, bucketOptions, noBucketToFill, checkCount }
