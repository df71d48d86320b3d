'use strict'
// quota-clock-source/http (SPEC §11): `rateLimit`, Express/Connect middleware that is also a plain
// node:http handler step, and `clientKey`, the default key.
//
// Headers follow draft-ietf-httpapi-ratelimit-headers-11: `RateLimit-Policy` and `RateLimit` are
// structured-field lists (RFC 9651) with one item per limit in force: an sf-string name and
// integer parameters. The names are quoted once, when `rateLimit` is called; per request only
// integers are appended. The `structured-headers` library is not used at run time: serializing the
// list with it costs ~2 µs a request (benchmark/http.js), over half of express-rate-limit's whole
// cost, and quoting a handful of names at configuration does not justify the package's first
// runtime dependency. The tests parse every header with that library instead.
const { QuotaClock, KeyedQuotaClock } = require('../index.js')
const { coded, describe, isPlainObject } = require('./validate')
const { limiterFacts } = require('./http-clocks')

const OPTION_NAMES = ['limiter', 'limits', 'key', 'cost', 'name', 'headers', 'skip', 'onLimited']
const LIMITER_ENTRY_NAMES = ['limiter', 'key', 'cost', 'name']
const THROTTLE_ENTRY_NAMES = ['throttle', 'limits', 'key', 'name', 'timeoutMs', 'failOpen']
const THROTTLE_LIMITS = [
  // The throttle checks the longest window first; its items are listed in that order too.
  { limitName: 'requests_per_month', unit: 'month', reason: 'RATE_LIMIT_MONTH' },
  { limitName: 'requests_per_day', unit: 'day', reason: 'RATE_LIMIT_DAY' },
  { limitName: 'requests_per_minute', unit: 'minute', reason: 'RATE_LIMIT_MINUTE' },
]
const UNITS = ['burst', 'minute', 'day', 'week', 'month', 'year']
const DEFAULT_THROTTLE_TIMEOUT_MS = 300
const MAX_TIMER_MS = 2 ** 31 - 1
// sf-integer range (RFC 9651 §3.3.1); larger values are written as this maximum.
const MAX_SF_INTEGER = 999_999_999_999_999
// The limits in force for a key are re-read from `status` at least this often (a key's policy can
// change when the limiter drops the key and holds it again), and when the key's quota period ends.
const RECORD_LIFETIME_MS = 60_000
const MAX_RECORDS = 10_000
const PROBLEM_TYPE_QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const PROBLEM_CONTENT_TYPE = 'application/problem+json'

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
  skipFailedRequests: 'give a request back with `limiter.refund(key)` when it should not count',
  skipSuccessfulRequests: 'give a request back with `limiter.refund(key)` when it should not count',
  requestWasSuccessful: 'give a request back with `limiter.refund(key)` when it should not count',
}

function optionError(ErrorClass, message) {
  return coded(ErrorClass, 'ERR_INVALID_OPTION', `rateLimit: ${message}`)
}

function editDistance(a, b) {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1))
      diagonal = above
    }
  }
  return row[b.length]
}

/** SPEC §4's rule for unknown keys, with a hint for express-rate-limit's options and for typos. */
function refuseUnknownOptions(object, known, path) {
  for (const key of Object.keys(object)) {
    if (object[key] === undefined || known.includes(key)) continue
    const where = path ? `${path}.${key}` : key
    const near = known.find((name) => name.toLowerCase() === key.toLowerCase()) ??
      known.find((name) => editDistance(name.toLowerCase(), key.toLowerCase()) <= 2)
    let hint = ''
    if (near !== undefined) hint = ` (did you mean '${near}'?)`
    else if (Object.hasOwn(FOREIGN_OPTION_HINTS, key)) hint = ` (${FOREIGN_OPTION_HINTS[key]})`
    throw optionError(
      TypeError,
      `unknown option '${where}'${hint}; expected one of ${known.map((name) => `'${name}'`).join(', ')}; received ${describe(object[key])}`,
    )
  }
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
  return { plain, quoted }
}

function sfInteger(value) {
  return value >= MAX_SF_INTEGER ? MAX_SF_INTEGER : value > 0 ? Math.floor(value) : 0
}

function isKeyed(limiter) {
  return limiter instanceof KeyedQuotaClock
}

function parseLimiterEntry(entry, what, defaults) {
  refuseUnknownOptions(entry, LIMITER_ENTRY_NAMES, what)
  const { limiter } = entry
  const keyed = isKeyed(limiter)
  if (!keyed && !(limiter instanceof QuotaClock)) {
    throw optionError(TypeError, `${what}.limiter must be a KeyedQuotaClock or a QuotaClock from quota-clock-source, received ${describe(limiter)}`)
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
    keyed,
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
  }
}

function parseThrottleEntry(entry, what, defaults) {
  refuseUnknownOptions(entry, THROTTLE_ENTRY_NAMES, what)
  const { throttle, limits } = entry
  if (!isPlainObject(throttle) || typeof throttle.check !== 'function') {
    throw optionError(TypeError, `${what}.throttle must be a throttle from createThrottle({ db }), received ${describe(throttle)}`)
  }
  if (!isPlainObject(limits)) {
    throw optionError(TypeError, `${what}.limits must be an object such as { requests_per_minute: 60 }, received ${describe(limits)}`)
  }
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
    throttle,
    limits: { ...limits },
    windows,
    key: checkFunction(entry.key, `${what}.key`, '(req) => string') ?? defaults.key,
    name,
    items: itemNames(name, `${what}.name`),
    timeoutMs,
    failOpen,
    // True while the store is failing: one warning per outage, not one per request.
    unavailable: false,
  }
}

function parseEntry(entry, what, defaults) {
  if (!isPlainObject(entry)) {
    throw optionError(TypeError, `${what} must be an object { limiter } or { throttle, limits }, received ${describe(entry)}`)
  }
  if (entry.limiter !== undefined && entry.throttle !== undefined) {
    throw optionError(TypeError, `${what} has both limiter and throttle: give each its own entry`)
  }
  return entry.throttle !== undefined ? parseThrottleEntry(entry, what, defaults) : parseLimiterEntry(entry, what, defaults)
}

function parseOptions(options) {
  if (!isPlainObject(options)) {
    throw optionError(TypeError, `options must be an object such as { limiter } or { limits: [...] }, received ${describe(options)}`)
  }
  refuseUnknownOptions(options, OPTION_NAMES, '')
  const { limiter, limits, name } = options
  const explicitKey = checkFunction(options.key, 'key', '(req) => string')
  const defaults = {
    key: explicitKey ?? defaultKey(),
    cost: checkFunction(options.cost, 'cost', '(req) => number'),
    name,
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
    if (limits.length === 0) throw optionError(RangeError, 'limits must hold at least one entry, received an empty array')
    entries = limits.map((entry, i) => parseEntry(entry, `limits[${i}]`, defaults))
  } else {
    throw optionError(TypeError, 'limiter or limits is required: rateLimit({ limiter: new KeyedQuotaClock({ ... }) })')
  }
  const seen = new Map()
  entries.forEach((entry, i) => {
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
  }
}

// ---------------------------------------------------------------------------------------------
// Client keys

const MAX_KEY_CACHE = 4096

/**
 * An IPv6 address as eight 16-bit groups, or null when `text` is not one. A zone (`%eth0`) is
 * dropped; an embedded IPv4 tail (`::ffff:1.2.3.4`) is read as the last two groups.
 */
function parseIPv6(text) {
  const zone = text.indexOf('%')
  if (zone !== -1) text = text.slice(0, zone)
  const lastColon = text.lastIndexOf(':')
  if (text.indexOf('.', lastColon) !== -1) {
    // An IPv4 tail is the last two groups: rewrite it as such.
    const octets = text.slice(lastColon + 1).split('.')
    if (octets.length !== 4 || !octets.every((o) => /^\d{1,3}$/.test(o) && Number(o) <= 255)) return null
    const [a, b, c, d] = octets.map(Number)
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return null
  const parse = (part) => (part === '' ? [] : part.split(':'))
  const head = parse(halves[0])
  const rest = halves.length === 2 ? parse(halves[1]) : []
  const groups = []
  for (const group of [...head, ...rest]) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null
    groups.push(parseInt(group, 16))
  }
  if (halves.length === 2 ? groups.length > 7 : groups.length !== 8) return null
  const zeros = new Array(8 - groups.length).fill(0)
  return [...groups.slice(0, head.length), ...zeros, ...groups.slice(head.length)]
}

/** RFC 5952 text: lower case, no leading zeros, the longest run (≥ 2) of zero groups as '::'. */
function formatIPv6(groups) {
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart === -1) return hex.join(':')
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`
}

function isMappedIPv4(groups) {
  return groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff
}

/** The key of an IPv6 address (any spelling): IPv4 when mapped, else its prefix (or itself). */
function ipv6Key(address, subnetBits) {
  const groups = parseIPv6(address)
  if (groups === null) return address // not an address (a framework's own value): used as it is
  if (isMappedIPv4(groups)) return `${groups[6] >> 8}.${groups[6] & 255}.${groups[7] >> 8}.${groups[7] & 255}`
  if (subnetBits === false) return formatIPv6(groups)
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, subnetBits - 16 * i))
    groups[i] &= keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
  }
  return `${formatIPv6(groups)}/${subnetBits}`
}

function checkSubnet(options) {
  if (options === undefined) return 56
  if (!isPlainObject(options)) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `clientKey: options must be an object { ipv6Subnet }, received ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (key !== 'ipv6Subnet' && options[key] !== undefined) {
      throw coded(TypeError, 'ERR_INVALID_OPTION', `clientKey: unknown option '${key}'; expected 'ipv6Subnet'; received ${describe(options[key])}`)
    }
  }
  const { ipv6Subnet = 56 } = options
  if (ipv6Subnet === false) return false
  if (typeof ipv6Subnet !== 'number') {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `clientKey: ipv6Subnet must be a number of bits from 1 to 128, or false, received ${describe(ipv6Subnet)}`)
  }
  if (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw coded(RangeError, 'ERR_INVALID_OPTION', `clientKey: ipv6Subnet must be an integer from 1 to 128, or false, received ${describe(ipv6Subnet)}`)
  }
  return ipv6Subnet
}

const X_FORWARDED_FOR_WARNING =
  'A request carries X-Forwarded-For but its client address was not taken from it (req.ip is the ' +
  "socket's address, or unset), so every client behind that proxy shares one rate limit key. Behind " +
  "a proxy you trust, let the framework resolve the client (Express: app.set('trust proxy', 1)); " +
  'otherwise ignore this. clientKey never reads X-Forwarded-For itself: any client can send it.'

/** Makes a clientKey with its own warn-once state and IPv6 cache. */
function makeClientKey(subnetBits) {
  let warned = false
  const cache = new Map()
  return function keyOf(req) {
    const { ip } = req // a getter in Express: read once
    let address = typeof ip === 'string' && ip !== '' ? ip : undefined
    if (!warned && req.headers?.['x-forwarded-for'] !== undefined) {
      const socketAddress = req.socket?.remoteAddress
      if (address === undefined || address === socketAddress) {
        warned = true
        process.emitWarning(X_FORWARDED_FOR_WARNING, { code: 'QUOTA_CLOCK_UNEXPECTED_X_FORWARDED_FOR' })
      }
    }
    if (address === undefined) address = req.socket?.remoteAddress
    if (typeof address !== 'string' || address === '') {
      throw coded(TypeError, 'ERR_INVALID_ARG', 'clientKey: the request has no client address (req.ip and req.socket.remoteAddress are both unset: has the connection closed?)')
    }
    if (address.indexOf(':') === -1) return address // IPv4 (or a name a framework put there)
    let key = cache.get(address)
    if (key === undefined) {
      key = ipv6Key(address, subnetBits)
      if (cache.size >= MAX_KEY_CACHE) cache.clear()
      cache.set(address, key)
    }
    return key
  }
}

const clientKeyBySubnet = new Map()

/** SPEC §11: the client's address as a rate limit key (IPv6 grouped by its first `ipv6Subnet` bits). */
function clientKey(req, options) {
  if (typeof req !== 'object' || req === null) {
    throw coded(TypeError, 'ERR_INVALID_ARG', `clientKey: req must be a request object, received ${describe(req)}`)
  }
  const subnetBits = checkSubnet(options)
  let keyOf = clientKeyBySubnet.get(subnetBits)
  if (keyOf === undefined) {
    keyOf = makeClientKey(subnetBits)
    clientKeyBySubnet.set(subnetBits, keyOf)
  }
  return keyOf(req)
}

/** rateLimit's default key: clientKey with the default subnet, warning once per middleware. */
function defaultKey() {
  return makeClientKey(56)
}

// ---------------------------------------------------------------------------------------------
// The limits in force, and the header items

function unitOfPeriod(period) {
  const parts = period.id.replace(/^[+-]/, '').split('-').length
  if (parts === 1) return 'year'
  if (parts === 2) return 'month'
  return period.endMs - period.startMs < 3 * 86_400_000 ? 'day' : 'week'
}

/** What the headers need of a key's limits, from `status` (SPEC §5 fields). */
function recordFrom(entry, status, wallNowMs) {
  const { capacity, refillPerSecond, quotaLimit, period } = status
  const { quoted } = entry.items
  let policy = `${quoted.burst};q=${sfInteger(capacity)};w=${sfInteger(Math.ceil(capacity / refillPerSecond))}`
  let unit
  if (period !== null && period !== undefined && quotaLimit !== null && quotaLimit !== undefined) {
    unit = unitOfPeriod(period)
    policy += `, ${quoted[unit]};q=${sfInteger(quotaLimit)};w=${sfInteger(Math.round((period.endMs - period.startMs) / 1000))}`
  }
  const refreshAtMs = entry.recordPerKey ? wallNowMs + RECORD_LIFETIME_MS : Infinity
  const periodEndMs = unit === undefined ? Infinity : period.endMs
  return {
    capacity,
    refillPerSecond,
    quotaLimit: unit === undefined ? null : quotaLimit,
    unit,
    periodEndMs,
    // The wall clock matters to this record: for its quota's reset time, or its lifetime.
    readsWall: periodEndMs !== Infinity || refreshAtMs !== Infinity,
    staleAtMs: Math.min(periodEndMs, refreshAtMs),
    policy,
    // The wall reading of the request being answered (set by recordFor when readsWall).
    wallNowMs: 0,
  }
}

function statusOf(entry, key) {
  return entry.keyed ? entry.limiter.status(key) : entry.limiter.status()
}

function readWall(entry) {
  // A wall clock that cannot be read is the limiter's to report (ERR_CLOCK_READING from its next
  // call); the headers then fall back to Date.now().
  let wallNowMs
  try {
    wallNowMs = entry.wallMs()
  } catch {
    return Date.now()
  }
  return typeof wallNowMs === 'number' && Number.isFinite(wallNowMs) ? wallNowMs : Date.now()
}

/** Whether a decision's `tokens` and `quotaRemaining` can come from the limits in `record`. */
function fits(record, tokens, quotaRemaining) {
  if (tokens > record.capacity) return false
  if (quotaRemaining === null || quotaRemaining === undefined) return record.unit === undefined
  return record.unit !== undefined && quotaRemaining <= record.quotaLimit
}

/**
 * The limits in force for `key` (read from `status` when unknown, when the key's quota period has
 * ended, and, per key, at least every RECORD_LIFETIME_MS or as soon as a decision does not fit them:
 * a key the limiter dropped may come back under other limits from `policy`); `record.wallNowMs` is
 * now's wall reading.
 */
function recordFor(entry, key, tokens, quotaRemaining) {
  const recordKey = entry.recordPerKey ? key : ''
  let record = entry.records.get(recordKey)
  if (record !== undefined && !record.readsWall) return record
  const wallNowMs = readWall(entry)
  if (record === undefined || wallNowMs >= record.staleAtMs || (entry.recordPerKey && !fits(record, tokens, quotaRemaining))) {
    record = recordFrom(entry, statusOf(entry, key), wallNowMs)
    if (entry.records.size >= MAX_RECORDS) entry.records.delete(entry.records.keys().next().value)
    entry.records.delete(recordKey) // re-inserted last: the oldest record goes first when full
    entry.records.set(recordKey, record)
  }
  record.wallNowMs = wallNowMs
  return record
}

/** The entry's `RateLimit` items for `tokens` and `quotaRemaining` (after the decision). */
function limitItems(entry, record, tokens, quotaRemaining) {
  const { quoted } = entry.items
  const full = (record.capacity - tokens) / record.refillPerSecond
  let items = `${quoted.burst};r=${sfInteger(tokens)};t=${sfInteger(Math.ceil(full))}`
  if (record.unit !== undefined && quotaRemaining !== null) {
    items += `, ${quoted[record.unit]};r=${sfInteger(quotaRemaining)};t=${sfInteger(Math.ceil((record.periodEndMs - record.wallNowMs) / 1000))}`
  }
  return items
}

/**
 * Fills `out.policy[i]` and `out.limit[i]` for a limiter entry, from a decision or a status;
 * `refunded` is what was given back since the decision (shown, capped at the limits).
 */
function describeLimiter(entry, key, tokens, quotaRemaining, out, i, refunded = 0) {
  const record = recordFor(entry, key, tokens, quotaRemaining)
  const quotaShown = quotaRemaining === null ? null : Math.min(quotaRemaining + refunded, record.quotaLimit ?? Infinity)
  out.policy[i] = record.policy
  out.limit[i] = limitItems(entry, record, Math.min(tokens + refunded, record.capacity), quotaShown)
}

function describeThrottle(entry, result, out, i) {
  const { quoted } = entry.items
  let policy = ''
  let limit = ''
  for (const unit of entry.windows) {
    const window = result.windows[unit]
    if (window === undefined || window === null) continue
    const sep = policy === '' ? '' : ', '
    policy += `${sep}${quoted[unit]};q=${sfInteger(window.limit)};w=${sfInteger(Math.round((window.endMs - window.startMs) / 1000))}`
    if (window.remaining !== null && window.remaining !== undefined) {
      limit += `${limit === '' ? '' : ', '}${quoted[unit]};r=${sfInteger(window.remaining)};t=${sfInteger(Math.ceil((window.endMs - result.nowMs) / 1000))}`
    }
  }
  out.policy[i] = policy
  out.limit[i] = limit
}

function joinItems(parts) {
  let text = ''
  for (const part of parts) {
    if (part === undefined || part === '') continue
    text = text === '' ? part : `${text}, ${part}`
  }
  return text
}

function setRateLimitHeaders(res, out) {
  const policy = out.policy.length === 1 ? out.policy[0] : joinItems(out.policy)
  const limit = out.limit.length === 1 ? out.limit[0] : joinItems(out.limit)
  if (policy) res.setHeader('RateLimit-Policy', policy)
  if (limit) res.setHeader('RateLimit', limit)
}

// ---------------------------------------------------------------------------------------------
// Responses

function sendProblem(res, status, problem, extraHeaders) {
  const body = JSON.stringify(problem)
  res.statusCode = status
  if (extraHeaders !== undefined) for (const [name, value] of extraHeaders) res.setHeader(name, value)
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
  res.setHeader('Content-Length', Buffer.byteLength(body))
  res.end(body)
}

function waitSentence(seconds) {
  return seconds === 1 ? '1 second' : `${seconds} seconds`
}

function quotaExceededProblem(decision, violated) {
  const seconds = Math.ceil(decision.retryAfterMs / 1000)
  const which = violated.map((name) => `"${name}"`).join(' and ')
  return {
    type: PROBLEM_TYPE_QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail: `The ${which} rate limit ${violated.length > 1 ? 'policies are' : 'policy is'} exhausted; retry after ${waitSentence(seconds)}.`,
    'violated-policies': violated,
    retryAfterMs: decision.retryAfterMs,
    retryAfterBasis: decision.retryAfterBasis,
  }
}

/** An error from a limiter, the key or cost function, or onLimited: next(err), else a 500 problem. */
function failed(err, res, next) {
  if (next) {
    next(err)
    return
  }
  if (res.headersSent) {
    res.destroy?.(err instanceof Error ? err : undefined)
    return
  }
  const problem = { type: 'about:blank', title: 'Internal Server Error', status: 500, detail: 'The rate limiter could not decide on this request.' }
  if (err !== null && typeof err === 'object' && typeof err.code === 'string') problem.code = err.code
  sendProblem(res, 500, problem)
}

// ---------------------------------------------------------------------------------------------
// The middleware

/** The items of `entry` that denied `decision` for a request of `n`. */
function violatedBy(entry, record, decision, n) {
  const names = []
  if (decision.tokens < n) names.push(entry.items.plain.burst)
  if (record !== undefined && record.unit !== undefined && decision.quotaRemaining !== null && decision.quotaRemaining < n) {
    names.push(entry.items.plain[record.unit])
  }
  if (names.length === 0) names.push(entry.items.plain[decision.retryAfterBasis === 'wall-period' && record?.unit ? record.unit : 'burst'])
  return names
}

function throttleUnavailable(entry, err) {
  if (entry.unavailable) return
  entry.unavailable = true
  const reason = err && err.code === 'ERR_THROTTLE_TIMEOUT' ? err.message : `it failed: ${err && err.message}`
  process.emitWarning(
    `rateLimit: the throttle store is unavailable (${reason}); requests ${entry.failOpen ? 'pass unchecked (failOpen)' : 'are answered 503'} until it answers again`,
    { code: 'QUOTA_CLOCK_THROTTLE_UNAVAILABLE' },
  )
}

/** throttle.check within entry.timeoutMs; a late answer is ignored. */
function checkWithin(entry, key) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(coded(Error, 'ERR_THROTTLE_TIMEOUT', `the throttle store did not answer within ${entry.timeoutMs} ms`))
    }, entry.timeoutMs)
    let pending
    try {
      pending = Promise.resolve(entry.throttle.check(key, entry.limits))
    } catch (err) {
      pending = Promise.reject(err)
    }
    pending.then(
      (result) => {
        clearTimeout(timer)
        resolve(result)
      },
      (err) => {
        clearTimeout(timer)
        reject(err)
      },
    )
  })
}

// Argument and clock errors are the caller's to see (next(err)); anything else a throttle rejects
// with means its store did not serve the check.
function isCallerError(err) {
  return err !== null && typeof err === 'object' && (err.code === 'ERR_INVALID_ARG' || err.code === 'ERR_CLOCK_READING')
}

function rateLimit(options) {
  const { entries, headers, skip, onLimited } = parseOptions(options)
  const syncEntries = entries.filter((e) => !e.isThrottle)
  const throttleEntries = entries.filter((e) => e.isThrottle)
  entries.forEach((entry, i) => (entry.index = i))
  const single = entries.length === 1 && syncEntries.length === 1 ? syncEntries[0] : undefined

  /** Gives back what the first `count` limiter entries took for this request. */
  function refundTaken(taken, count) {
    for (let i = 0; i < count; i++) {
      const { entry, key, n } = taken[i]
      if (entry.keyed) entry.limiter.refund(key, n)
      else entry.limiter.refund(n)
    }
  }

  function refundQuietly(taken, count) {
    try {
      refundTaken(taken, count)
    } catch {
      // The request fails anyway; the limiter reports its own error on its next call.
    }
  }

  function limited(req, res, next, decision, violated) {
    res.setHeader('Retry-After', String(Math.ceil(decision.retryAfterMs / 1000)))
    if (onLimited !== undefined) {
      const returned = onLimited(req, res, { decision, violated })
      if (returned !== null && typeof returned === 'object' && typeof returned.then === 'function') {
        return Promise.resolve(returned).then(undefined, (err) => failed(err, res, next))
      }
      return undefined
    }
    sendProblem(res, 429, quotaExceededProblem(decision, violated))
    return undefined
  }

  /** skip(req), with a throw handled like any other error; true when the request was passed on. */
  function skipped(req, res, next) {
    let skipThis
    try {
      skipThis = skip(req)
    } catch (err) {
      failed(err, res, next)
      return true
    }
    if (!skipThis) return false
    if (next) next() // outside the try: a throw from later handlers is not the limiter's
    return true
  }

  /** One limiter entry: the fast path of the usual one-limit middleware. */
  function singleLimit(req, res, next) {
    const entry = single
    let decision
    let key
    let n = 1
    if (skip !== undefined && skipped(req, res, next)) return undefined
    try {
      if (entry.keyed) key = entry.key(req)
      if (entry.cost !== undefined) n = entry.cost(req)
      decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
      if (headers || !decision.allowed) {
        const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
        if (headers) {
          res.setHeader('RateLimit-Policy', record.policy)
          res.setHeader('RateLimit', limitItems(entry, record, decision.tokens, decision.quotaRemaining))
        }
        if (!decision.allowed) return limited(req, res, next, decision, violatedBy(entry, record, decision, n))
      }
    } catch (err) {
      if (decision !== undefined && decision.allowed) refundQuietly([{ entry, key, n }], 1)
      return failed(err, res, next)
    }
    if (next) next()
    return undefined
  }

  const newOut = () => ({ policy: new Array(entries.length).fill(''), limit: new Array(entries.length).fill('') })
  // Without throttle entries, the headers of an allowed request are built as the limits are checked.
  const buildAsChecked = headers && throttleEntries.length === 0

  function severalLimits(req, res, next) {
    const taken = []
    let allowedCount = 0
    let policyHeader = ''
    let limitHeader = ''
    if (skip !== undefined && skipped(req, res, next)) return undefined
    try {
      for (let s = 0; s < syncEntries.length; s++) {
        const entry = syncEntries[s]
        const key = entry.keyed ? entry.key(req) : undefined
        const n = entry.cost === undefined ? 1 : entry.cost(req)
        const decision = entry.keyed ? entry.limiter.tryConsume(key, n) : entry.limiter.tryConsume(n)
        taken.push({ entry, key, n, decision })
        if (decision.allowed) {
          allowedCount++
          if (buildAsChecked) {
            const record = recordFor(entry, key, decision.tokens, decision.quotaRemaining)
            const separator = s === 0 ? '' : ', '
            policyHeader += separator + record.policy
            limitHeader += separator + limitItems(entry, record, decision.tokens, decision.quotaRemaining)
          }
          continue
        }
        // SPEC §11: a denial refunds what the earlier limits took; the later ones are reported from status.
        allowedCount = 0 // refunded here, whether or not every refund succeeds
        refundTaken(taken, s)
        const violated = violatedBy(entry, recordFor(entry, key, decision.tokens, decision.quotaRemaining), decision, n)
        if (headers) {
          const out = newOut()
          for (let e = 0; e < s; e++) {
            const { entry: earlier, key: earlierKey, n: earlierN, decision: d } = taken[e]
            describeLimiter(earlier, earlierKey, d.tokens, d.quotaRemaining, out, earlier.index, earlierN)
          }
          describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
          for (let later = s + 1; later < syncEntries.length; later++) {
            const laterEntry = syncEntries[later]
            const laterKey = laterEntry.keyed ? laterEntry.key(req) : undefined
            const status = statusOf(laterEntry, laterKey)
            describeLimiter(laterEntry, laterKey, status.tokens, status.quotaRemaining, out, laterEntry.index)
          }
          setRateLimitHeaders(res, out)
        }
        return limited(req, res, next, decision, violated)
      }
      if (buildAsChecked) {
        res.setHeader('RateLimit-Policy', policyHeader)
        res.setHeader('RateLimit', limitHeader)
      }
    } catch (err) {
      refundQuietly(taken, allowedCount)
      return failed(err, res, next)
    }
    if (throttleEntries.length > 0) {
      let out
      if (headers) {
        out = newOut()
        try {
          for (const { entry, key, decision } of taken) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index)
        } catch (err) {
          refundQuietly(taken, taken.length)
          return failed(err, res, next)
        }
      }
      return throttled(req, res, next, taken, out)
    }
    if (next) next()
    return undefined
  }

  /** The throttle entries, after every in-process limit allowed the request. */
  async function throttled(req, res, next, taken, out) {
    let refunded = false
    const refundAll = () => {
      refunded = true // once, even if a refund throws
      refundTaken(taken, taken.length)
      if (headers) {
        for (const { entry, key, n, decision } of taken) describeLimiter(entry, key, decision.tokens, decision.quotaRemaining, out, entry.index, n)
      }
    }
    try {
      for (const entry of throttleEntries) {
        const key = entry.key(req)
        let result
        try {
          result = await checkWithin(entry, key)
        } catch (err) {
          if (isCallerError(err)) throw err
          throttleUnavailable(entry, err)
          if (entry.failOpen) continue
          refundAll()
          if (headers) setRateLimitHeaders(res, out)
          const why = err && err.code === 'ERR_THROTTLE_TIMEOUT' ? `no answer within ${entry.timeoutMs} ms` : 'it failed'
          sendProblem(res, 503, {
            type: 'about:blank',
            title: 'Service Unavailable',
            status: 503,
            detail: `The rate limit store could not be reached (${why}), so the request was not served.`,
          })
          return
        }
        entry.unavailable = false
        if (headers) describeThrottle(entry, result, out, entry.index)
        if (!result.allowed) {
          refundAll()
          const unit = THROTTLE_LIMITS.find((l) => l.reason === result.reason)?.unit ?? entry.windows[0]
          const window = result.windows[unit]
          const decision = {
            allowed: false,
            retryAfterMs: result.retryAfterMs,
            retryAfterBasis: 'wall-period',
            tokens: 0,
            quotaRemaining: window && typeof window.remaining === 'number' ? window.remaining : 0,
            anomalies: [],
          }
          if (headers) setRateLimitHeaders(res, out)
          await limited(req, res, next, decision, [entry.items.plain[unit]])
          return
        }
      }
      if (headers) setRateLimitHeaders(res, out)
    } catch (err) {
      if (!refunded) refundQuietly(taken, taken.length)
      failed(err, res, next)
      return
    }
    if (next) next()
  }

  return single !== undefined ? singleLimit : severalLimits
}

module.exports = { rateLimit, clientKey }
