'use strict'
// rateLimit's options, read and checked once, when the middleware is made: the entries (a limiter,
// or a throttle with its limits), the key and cost functions, the item names for the headers.

const { QuotaClock } = require('../limiter/quota-clock.js')
const { KeyedQuotaClock } = require('../keyed/keyed.js')
const { PERIOD_UNITS } = require('../native/contract.js')
const { coded, describe, isPlainObject, thrownText, MAX_TIMER_MS } = require('../common/validate.js')
const { nearest, didYouMean } = require('../common/did-you-mean.js')
const { defaultKey } = require('./client-key.js')
const { isLimiter, limiterFacts } = require('../limiter/limiter-facts.js')
const { isSharedLimiter, isFleetBucket } = require('../share/drivers.js')
const { OutageWarning } = require('../common/outage.js')

const OPTION_NAMES = ['limiter', 'limits', 'key', 'cost', 'name', 'headers', 'skip', 'onLimited', 'mode', 'onShadowLimited', 'refundIf']
const LIMITER_ENTRY_NAMES = ['limiter', 'key', 'cost', 'name', 'mode']
const THROTTLE_ENTRY_NAMES = ['throttle', 'limits', 'key', 'name', 'timeoutMs', 'failOpen', 'mode']
// An entry's mode (docs/http.md): 'enforce' denies the request; 'shadow' is decided and counted, never denies.
const MODES = ['enforce', 'shadow']
const THROTTLE_LIMITS = [
  // The throttle checks the longest window first; its items are listed in that order too.
  { limitName: 'requests_per_month', unit: 'month', reason: 'RATE_LIMIT_MONTH' },
  { limitName: 'requests_per_day', unit: 'day', reason: 'RATE_LIMIT_DAY' },
  { limitName: 'requests_per_minute', unit: 'minute', reason: 'RATE_LIMIT_MINUTE' },
]
// The header items' units: a limiter's bucket, a throttle's minute window, the calendar's periods.
const UNITS = ['burst', 'minute', ...PERIOD_UNITS]
const DEFAULT_THROTTLE_TIMEOUT_MS = 300

// express-rate-limit's options, and what to use here instead.
const FOREIGN_OPTION_HINTS = {
  keyGenerator: "express-rate-limit's keyGenerator is `key: (req) => string` here",
  windowMs: 'the window and the limit live in the limiter: `limiter: new KeyedQuotaClock({ capacity, refillPerSecond, suspendPolicy })`',
  max: 'the limit lives in the limiter: `limiter: new KeyedQuotaClock({ capacity, refillPerSecond, suspendPolicy })`',
  limit: 'the limit lives in the limiter: `limiter: new KeyedQuotaClock({ capacity, refillPerSecond, suspendPolicy })`; several limits go in `limits`',
  standardHeaders: "headers are `headers: 'draft-11'` (the default) or `headers: false`",
  legacyHeaders: "headers are `headers: 'draft-11'` (the default) or `headers: false`",
  handler: 'a custom response is `onLimited: (req, res, info) => void`',
  message: 'a custom response is `onLimited: (req, res, info) => void`',
  statusCode: 'a custom response is `onLimited: (req, res, info) => void`',
  store: 'state lives in the limiter (`limiter` or `limits`); for MongoDB, a `{ throttle, limits }` entry',
  passOnStoreError: 'a `{ throttle, limits }` entry takes `failOpen: true`',
  ipv6Subnet: 'use `key: (req) => clientKey(req, { ipv6Subnet })`',
  identifier: 'the policy name is `name`',
  skipFailedRequests: 'a request that should not count is given back with `refundIf: (req, res) => res.statusCode >= 400`',
  skipSuccessfulRequests: 'a request that should not count is given back with `refundIf: (req, res) => res.statusCode < 400`',
  requestWasSuccessful: 'a request that should not count is given back with `refundIf: (req, res) => boolean`',
}

function optionError(ErrorClass, message) {
  return coded(ErrorClass, 'ERR_INVALID_OPTION', `rateLimit: ${message}`)
}

/** The limiters' rule for unknown keys (refused, naming the known ones), with a hint for express-rate-limit's options and for typos (lib/common/did-you-mean.js). */
function refuseUnknownOptions(object, known, path) {
  for (const key of Object.keys(object)) {
    if (object[key] === undefined || known.includes(key)) continue
    const where = path ? `${path}.${key}` : key
    // express-rate-limit's own name says more than a near known one (its `limit` is not `limits`).
    const hint = Object.hasOwn(FOREIGN_OPTION_HINTS, key) ? ` (${FOREIGN_OPTION_HINTS[key]})` : didYouMean(nearest(key, known))
    throw optionError(
      TypeError,
      `unknown option '${where}'${hint}; expected one of ${known.map((name) => `'${name}'`).join(', ')}; received ${describe(object[key])}`,
    )
  }
}

/** An entry's `mode` ('enforce' or 'shadow'), else the top-level default. */
function checkMode(mode, what, fallback) {
  if (mode === undefined) return fallback
  if (!MODES.includes(mode)) {
    throw optionError(typeof mode === 'string' ? RangeError : TypeError, `${what} must be 'enforce' or 'shadow', received ${describe(mode)}`)
  }
  return mode
}

function checkFunction(value, what, signature) {
  if (value !== undefined && typeof value !== 'function') {
    throw optionError(TypeError, `${what} must be a function ${signature}, received ${describe(value)}`)
  }
  return value
}

/** An sf-string (RFC 9651 §4.1.6): printable ASCII in quotes, with `"` and `\\` escaped. */
function sfString(text) {
  return `"${text.replace(/[\\"]/g, '\\$&')}"`
}

/** The item names of one entry, checked and quoted once (sf-string: printable ASCII). */
function itemNames(name, what) {
  if (name !== undefined) {
    if (typeof name !== 'string') throw optionError(TypeError, `${what} must be a string, received ${describe(name)}`)
    if (name === '' || !/^[\x20-\x7e]+$/.test(name)) {
      throw optionError(RangeError, `${what} must be a non-empty string of printable ASCII characters (it goes into the RateLimit headers), received ${describe(name)}`)
    }
  }
  const plain = {}
  const quoted = {}
  for (const unit of UNITS) {
    plain[unit] = name === undefined ? unit : `${name}-${unit}`
    quoted[unit] = sfString(plain[unit])
  }
  // The item a block's 429 names in violated-policies (a block is no header item of its own).
  plain.block = name === undefined ? 'block' : `${name}-block`
  quoted.block = sfString(plain.block)
  return { plain, quoted }
}


function isKeyed(limiter) {
  return limiter instanceof KeyedQuotaClock
}

/**
 * An options object read once: its own enumerable properties copied into a plain object, so that
 * a getter or Proxy trap that throws is ERR_INVALID_OPTION (with what it threw as cause) here, and
 * nothing is read from the caller's object again.
 */
function readAll(object, what) {
  const copy = {}
  let reading = what
  try {
    for (const key of Object.keys(object)) {
      reading = `${what}.${key}`
      copy[key] = object[key]
    }
  } catch (error) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `rateLimit: ${reading} could not be read: ${thrownText(error)}`, { cause: error })
  }
  return copy
}

/** How errors of a request name an entry: `limiter`, `limiter "api"`, `limits[1] "tenant"`. */
function labelOf(what, name) {
  const base = what === 'options' ? 'limiter' : what
  return name === undefined ? base : `${base} ${JSON.stringify(name)}`
}

function parseLimiterEntry(entry, what, defaults) {
  refuseUnknownOptions(entry, LIMITER_ENTRY_NAMES, what)
  const { limiter } = entry
  const keyed = isKeyed(limiter)
  const where = what === 'options' ? 'limiter' : `${what}.limiter`
  if (!keyed && !(limiter instanceof QuotaClock)) {
    throw optionError(TypeError, `${where} must be a KeyedQuotaClock or a QuotaClock from quota-clock-source, received ${describe(limiter)}`)
  }
  // instanceof only reads the prototype chain: a Proxy of a limiter, or Object.create of the
  // prototype, passes it and then fails on every request. Only limiters this package constructed do not.
  if (!isLimiter(limiter)) {
    throw optionError(TypeError, `${where} must be a KeyedQuotaClock or a QuotaClock made with \`new\` by quota-clock-source, received an object that only inherits from its prototype (a Proxy, or Object.create of the prototype)`)
  }
  const key = checkFunction(entry.key, `${what}.key`, '(req) => string')
  if (!keyed && key !== undefined) {
    throw optionError(TypeError, `${what}.key is for a KeyedQuotaClock: a QuotaClock is one limit shared by every request (use a KeyedQuotaClock for a limit per key)`)
  }
  const cost = checkFunction(entry.cost, `${what}.cost`, '(req) => number') ?? defaults.cost
  const name = entry.name ?? defaults.name
  const { readWallMs, sameLimitsForEveryKey } = limiterFacts(limiter)
  return {
    isThrottle: false,
    shadow: checkMode(entry.mode, what === 'options' ? 'mode' : `${what}.mode`, defaults.mode) === 'shadow',
    label: labelOf(what, name),
    keyed,
    // A shared KeyedQuotaClock: asked (awaited) after the in-process limiters, before throttles.
    shared: keyed && isSharedLimiter(limiter),
    // A shared bucket (share.bucket): its RateLimit item reports the fleet's tokens too.
    fleetBucket: keyed && isFleetBucket(limiter),
    limiter,
    key: keyed ? key ?? defaults.key : undefined,
    cost,
    name,
    items: itemNames(name, `${what}.name`),
    wallMs: readWallMs,
    // The limits in force: one record for a limiter whose keys all have the same limits (under the
    // key ''), else one per key.
    recordPerKey: keyed && !sameLimitsForEveryKey,
    records: new Map(),
    limitsGeneration: 0,
  }
}

function parseThrottleEntry(entry, what, defaults) {
  refuseUnknownOptions(entry, THROTTLE_ENTRY_NAMES, what)
  const { throttle } = entry
  let { limits } = entry
  if (!isPlainObject(throttle) || typeof throttle.check !== 'function') {
    throw optionError(TypeError, `${what}.throttle must be a throttle from createThrottle({ db }), received ${describe(throttle)}`)
  }
  if (!isPlainObject(limits)) {
    throw optionError(TypeError, `${what}.limits must be an object such as { requests_per_minute: 60 }, received ${describe(limits)}`)
  }
  limits = readAll(limits, `${what}.limits`)
  refuseUnknownOptions(limits, THROTTLE_LIMITS.map((l) => l.limitName), `${what}.limits`)
  const windows = []
  for (const { limitName, unit } of THROTTLE_LIMITS) {
    const limit = limits[limitName]
    if (limit === undefined) continue
    if (typeof limit !== 'number') throw optionError(TypeError, `${what}.limits.${limitName} must be a non-negative safe integer, received ${describe(limit)}`)
    if (!Number.isSafeInteger(limit) || limit < 0) throw optionError(RangeError, `${what}.limits.${limitName} must be a non-negative safe integer, received ${describe(limit)}`)
    windows.push(unit)
  }
  if (windows.length === 0) {
    throw optionError(RangeError, `${what}.limits must give at least one of ${THROTTLE_LIMITS.map((l) => l.limitName).join(', ')}`)
  }
  let timeoutMs = DEFAULT_THROTTLE_TIMEOUT_MS
  if (entry.timeoutMs !== undefined) {
    timeoutMs = entry.timeoutMs
    if (typeof timeoutMs !== 'number') throw optionError(TypeError, `${what}.timeoutMs must be a number of milliseconds, received ${describe(timeoutMs)}`)
    if (!(timeoutMs > 0 && timeoutMs <= MAX_TIMER_MS)) {
      throw optionError(RangeError, `${what}.timeoutMs must be a number of milliseconds > 0 and ≤ ${MAX_TIMER_MS}, received ${describe(timeoutMs)}`)
    }
  }
  const { failOpen = false } = entry
  if (typeof failOpen !== 'boolean') throw optionError(TypeError, `${what}.failOpen must be a boolean, received ${describe(failOpen)}`)
  const name = entry.name ?? defaults.name
  return {
    isThrottle: true,
    shadow: checkMode(entry.mode, `${what}.mode`, defaults.mode) === 'shadow',
    label: labelOf(what, name),
    throttle,
    limits,
    windows,
    key: checkFunction(entry.key, `${what}.key`, '(req) => string') ?? defaults.key,
    name,
    items: itemNames(name, `${what}.name`),
    timeoutMs,
    failOpen,
    // One warning per outage, not one per request.
    outage: new OutageWarning('QUOTA_CLOCK_THROTTLE_UNAVAILABLE'),
  }
}

function parseEntry(entry, what, defaults) {
  if (!isPlainObject(entry)) {
    throw optionError(TypeError, `${what} must be an object { limiter } or { throttle, limits }, received ${describe(entry)}`)
  }
  entry = readAll(entry, what)
  if (entry.limiter !== undefined && entry.throttle !== undefined) {
    throw optionError(TypeError, `${what} has both limiter and throttle: give each its own entry`)
  }
  return entry.throttle !== undefined ? parseThrottleEntry(entry, what, defaults) : parseLimiterEntry(entry, what, defaults)
}

/**
 * rateLimit's options, read once. `clientOf` is the framework adapter's: what of its request object
 * the default key reads the client address from (undefined: the request itself, as Express's).
 */
function parseOptions(options, clientOf) {
  if (!isPlainObject(options)) {
    throw optionError(TypeError, `options must be an object such as { limiter } or { limits: [...] }, received ${describe(options)}`)
  }
  options = readAll(options, 'options')
  refuseUnknownOptions(options, OPTION_NAMES, '')
  const { limiter, name } = options
  let { limits } = options
  const explicitKey = checkFunction(options.key, 'key', '(req) => string')
  const defaults = {
    key: explicitKey ?? defaultKey(clientOf),
    cost: checkFunction(options.cost, 'cost', '(req) => number'),
    name,
    mode: checkMode(options.mode, 'mode', 'enforce'),
  }
  let entries
  if (limiter !== undefined && limits !== undefined) {
    throw optionError(TypeError, 'give either limiter (one limit) or limits (several, checked all-or-nothing), not both')
  }
  if (limiter !== undefined) {
    if (!isKeyed(limiter) && limiter instanceof QuotaClock && explicitKey !== undefined) {
      throw optionError(TypeError, 'key is for a KeyedQuotaClock: a QuotaClock is one limit shared by every request (use a KeyedQuotaClock for a limit per key)')
    }
    entries = [parseLimiterEntry({ limiter }, 'options', defaults)]
  } else if (limits !== undefined) {
    if (!Array.isArray(limits)) throw optionError(TypeError, `limits must be an array of entries, received ${describe(limits)}`)
    try {
      limits = Array.from(limits)
    } catch (error) {
      throw coded(TypeError, 'ERR_INVALID_OPTION', `rateLimit: limits could not be read: ${thrownText(error)}`, { cause: error })
    }
    if (limits.length === 0) throw optionError(RangeError, 'limits must hold at least one entry, received an empty array')
    entries = limits.map((entry, i) => parseEntry(entry, `limits[${i}]`, defaults))
  } else {
    throw optionError(TypeError, 'limiter or limits is required: rateLimit({ limiter: new KeyedQuotaClock({ ... }) })')
  }
  const seen = new Map()
  entries.forEach((entry, i) => {
    entry.index = i // (its place in the headers and in a request's keys and costs)
    const label = entry.name === undefined ? 'no name' : `the name ${JSON.stringify(entry.name)}`
    if (seen.has(entry.name)) {
      throw optionError(RangeError, `entry names must be unique: limits[${seen.get(entry.name)}] and limits[${i}] both have ${label} (name one of them; item names in the RateLimit headers must not repeat)`)
    }
    seen.set(entry.name, i)
  })
  const { headers = 'draft-11' } = options
  if (headers !== false && headers !== 'draft-11') {
    const ErrorClass = typeof headers === 'string' ? RangeError : TypeError
    throw optionError(ErrorClass, `headers must be 'draft-11' or false, received ${describe(headers)}`)
  }
  return {
    entries,
    headers: headers !== false,
    skip: checkFunction(options.skip, 'skip', '(req) => boolean'),
    onLimited: checkFunction(options.onLimited, 'onLimited', '(req, res, { decision, violated }) => void'),
    onShadowLimited: checkFunction(options.onShadowLimited, 'onShadowLimited', '(req, { decision, violated }) => void'),
    refundIf: checkFunction(options.refundIf, 'refundIf', '(req, res) => boolean'),
  }
}

/**
 * The checks a part of the options can have alone (NestJS's `@RateLimit`, merged over the guard's
 * when its first request comes): known names, the callbacks functions, `mode` one of the modes.
 * The whole is checked again as `rateLimit` checks it once merged.
 */
function checkPartialOptions(options) {
  refuseUnknownOptions(options, OPTION_NAMES, '')
  checkMode(options.mode, 'mode', undefined)
  checkFunction(options.key, 'key', '(req) => string')
  checkFunction(options.cost, 'cost', '(req) => number')
  checkFunction(options.skip, 'skip', '(req) => boolean')
  checkFunction(options.onLimited, 'onLimited', '(req, res, { decision, violated }) => void')
  checkFunction(options.onShadowLimited, 'onShadowLimited', '(req, { decision, violated }) => void')
  checkFunction(options.refundIf, 'refundIf', '(req, res) => boolean')
}

module.exports = { parseOptions, checkPartialOptions, THROTTLE_LIMITS }
