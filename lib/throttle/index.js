'use strict'

// Shared per-key request limits in a MongoDB-compatible database, call for call the
// `@nodedk/throttle` API: `createThrottle({ db })`, `check(key, limits)`, `sweep()`.
//
// Storage: one document per key and window in the `throttle` collection,
//   { _id: '<key>|minute|2024-05-01T12:34Z', n, expires_at, window }
//   { _id: '<key>|day|<timeZone>|2024-05-01', ... }   { _id: '<key>|month|<timeZone>|2024-05', ... }
// where <key> escapes '%' and '|', so no key can reach another key's documents. The window id is
// part of `_id`, so a counter that outlived its window (not yet swept) is never found again.
// Only `findOneAndUpdate()` (returning the document itself, as driver v6+ does) and
// `deleteMany()` are called; the library starts no timers and creates no indexes.

const { memoryDb } = require('./memory-db.js')
const { QuotaClockError } = require('../native/errors.js')
const { coded, describe, isPlainObject, readOptions, thrownText } = require('../common/validate.js')
const { periodFor } = require('../time/calendar.js')
const { MAX_WALL_MS } = require('../native/contract.js')
const { didYouMeanTimeZone } = require('../common/did-you-mean.js')
const { ATTEMPTS, isDuplicateKey, storeResponse, createThenUpdate } = require('../stores/mongo-calls.js')
const { sendStoreCall } = require('../share/store-call.js')

const COLLECTION = 'throttle'
const MINUTE_MS = 60_000
const CLOCK_DOC_LIFETIME_MS = 86_400_000
// Longer windows first: an attempt refused by one window never reaches the shorter ones.
const WINDOWS = [
  { unit: 'month', limitName: 'requests_per_month', reason: 'RATE_LIMIT_MONTH' },
  { unit: 'day', limitName: 'requests_per_day', reason: 'RATE_LIMIT_DAY' },
  { unit: 'minute', limitName: 'requests_per_minute', reason: 'RATE_LIMIT_MINUTE' },
]
const LIMIT_NAMES = WINDOWS.map((w) => w.limitName)
const OPTION_NAMES = ['db', 'timeZone', 'time', 'clock']
const INCREMENT = { $inc: { n: 1 } }
const RETURN_AFTER = { returnDocument: 'after' }
const UPSERT_RETURN_AFTER = { upsert: true, returnDocument: 'after' }
// The largest distance from the epoch a Date can hold (ECMA-262 time values).
const MAX_DATE_MS = MAX_WALL_MS

const systemWallClock = { wallMs: () => Date.now() }

function invalidArg(ErrorClass, message) {
  return coded(ErrorClass, 'ERR_INVALID_ARG', message)
}

/** A database call that threw or rejected (with anything at all); the duplicate-key race is the caller's. */
function storeUnavailable(what, error) {
  return new QuotaClockError('ERR_STORE_UNAVAILABLE', `throttle: the database failed ${what}: ${thrownText(error)}`, { cause: error })
}

/** Runs one database call (one round trip, lib/share/store-call.js); anything it throws or rejects with comes out coded (11000 as it is). */
async function storeCall(what, call) {
  try {
    return await sendStoreCall(call)
  } catch (error) {
    if (isDuplicateKey(error)) throw error
    throw storeUnavailable(what, error)
  }
}

/** A counter's count as the store answered it: a non-negative safe integer, or ERR_STORE_RESPONSE. */
function countOf(doc, _id) {
  if (!isPlainObject(doc)) {
    throw storeResponse(`throttle: the database answered the counter ${JSON.stringify(_id)} with ${describe(doc)}, not a counter document`)
  }
  let n
  try {
    n = doc.n
  } catch (error) {
    throw storeResponse(`throttle: counter ${JSON.stringify(_id)} could not be read: ${thrownText(error)}`)
  }
  if (!Number.isSafeInteger(n) || n < 0) {
    throw storeResponse(`throttle: counter ${JSON.stringify(_id)} holds n = ${describe(n)}; a counter's count is a non-negative safe integer`)
  }
  return n
}

// Keys go into `_id` before the first '|': escaping '%' first keeps the encoding one-to-one.
function encodeKey(key) {
  return key.replace(/%/g, '%25').replace(/\|/g, '%7C')
}

function validateKey(key) {
  if (typeof key !== 'string') {
    throw invalidArg(TypeError, `throttle.check: key must be a non-empty string, received ${describe(key)}`)
  }
  if (key === '') throw invalidArg(RangeError, 'throttle.check: key must be a non-empty string, received an empty string')
  // A lone surrogate would be stored as U+FFFD, so two different keys could share counters.
  if (/\p{Cs}/u.test(key)) {
    throw invalidArg(RangeError, 'throttle.check: key must be well-formed Unicode, received a string with a lone surrogate')
  }
}

// Returns [{ unit, reason, limit }] for the limits given, longest window first.
function validateLimits(limits) {
  if (limits === undefined) return []
  if (!isPlainObject(limits)) {
    throw invalidArg(TypeError, `throttle.check: limits must be an object such as { requests_per_minute: 10 }, received ${describe(limits)}`)
  }
  // Each value read once, own properties only; a getter or Proxy trap that throws is ERR_INVALID_ARG.
  limits = readOptions(limits, LIMIT_NAMES, 'throttle.check: limits', 'ERR_INVALID_ARG')
  const active = []
  for (const { unit, limitName, reason } of WINDOWS) {
    const limit = limits[limitName]
    if (limit === undefined) continue // omitted: unlimited
    if (typeof limit !== 'number') {
      throw invalidArg(TypeError, `throttle.check: ${limitName} must be a non-negative safe integer, received ${describe(limit)}`)
    }
    if (!Number.isSafeInteger(limit) || limit < 0) {
      throw invalidArg(RangeError, `throttle.check: ${limitName} must be a non-negative safe integer, received ${describe(limit)}`)
    }
    active.push({ unit, reason, limit })
  }
  return active
}

// The calendar core answers day and month windows (time zones, DST).
function calendarPeriod(unit, timeZone, wallMs) {
  return periodFor({ unit, timeZone }, wallMs)
}

// Minute windows are UTC minutes; they need no calendar.
function minuteWindow(wallMs) {
  const startMs = Math.floor(wallMs / MINUTE_MS) * MINUTE_MS
  return { id: `${new Date(startMs).toISOString().slice(0, 16)}Z`, startMs, endMs: startMs + MINUTE_MS }
}

function validateTimeZone(timeZone) {
  if (typeof timeZone !== 'string' || timeZone === '') {
    throw invalidArg(TypeError, `createThrottle: timeZone must be an IANA time zone name such as 'Europe/Copenhagen' or 'UTC', received ${describe(timeZone)}`)
  }
  try {
    calendarPeriod('day', timeZone, Date.now())
  } catch (err) {
    if (err && err.code === 'ERR_UNKNOWN_TIME_ZONE') {
      throw coded(RangeError, 'ERR_UNKNOWN_TIME_ZONE', `createThrottle: timeZone ${JSON.stringify(timeZone)} is not a known IANA time zone; use a name such as 'Europe/Copenhagen' or 'UTC'${didYouMeanTimeZone(timeZone)}`)
    }
    throw err
  }
}

// Driver v4/v5 wrap the document as { value, ok, lastErrorObject }; v6+ and memoryDb return it bare.
function unwrap(reply) {
  try {
    if (isPlainObject(reply) && 'lastErrorObject' in reply && 'value' in reply && 'ok' in reply) return reply.value
  } catch (error) {
    throw storeResponse(`throttle: the database's answer could not be read: ${thrownText(error)}`)
  }
  return reply ?? null
}

/** Whether `object[name]` is a function; a getter or Proxy trap that throws is ERR_INVALID_ARG naming `what`. */
function hasMethod(object, name, what) {
  try {
    return typeof object[name] === 'function'
  } catch (error) {
    throw coded(TypeError, 'ERR_INVALID_ARG', `createThrottle: ${what}.${name} could not be read: ${thrownText(error)}`, { cause: error })
  }
}

/**
 * Creates a throttle over `options.db` (anything with MongoDB's `collection(name)`).
 * Synchronous; `db` is first used by `check()`, `sweep()` or `measureSkew()`.
 */
function createThrottle(options) {
  if (!isPlainObject(options)) {
    throw invalidArg(TypeError, `createThrottle: options must be an object such as { db }, received ${describe(options)}`)
  }
  if (hasMethod(options, 'collection', 'options')) {
    throw invalidArg(TypeError, 'createThrottle: pass the database as an option, createThrottle({ db }), not createThrottle(db)')
  }
  // Each option read once, own properties only; a getter or Proxy trap that throws is ERR_INVALID_ARG.
  const { db, timeZone = 'UTC', time = 'local', clock = systemWallClock } = readOptions(options, OPTION_NAMES, '', 'ERR_INVALID_ARG')
  if (db === undefined || db === null) {
    throw invalidArg(TypeError, 'createThrottle: db is required (a MongoDB Db, or memoryDb() for one process)')
  }
  if (!hasMethod(db, 'collection', 'db')) {
    throw invalidArg(TypeError, `createThrottle: db must provide collection(name) like a MongoDB Db, received ${describe(db)} without it`)
  }
  if (time !== 'local' && time !== 'server') {
    throw invalidArg(RangeError, `createThrottle: time must be 'local' or 'server', received ${describe(time)}`)
  }
  if (!isPlainObject(clock) || !hasMethod(clock, 'wallMs', 'clock')) {
    throw invalidArg(TypeError, `createThrottle: clock must be an object with a wallMs() method, received ${describe(clock)}`)
  }
  validateTimeZone(timeZone)

  // Asked for on first use, so that creating a throttle and refusing bad arguments never touch `db`.
  let collection
  function throttleCollection() {
    if (collection === undefined) {
      let candidate
      try {
        candidate = db.collection(COLLECTION)
      } catch (error) {
        throw storeUnavailable(`in db.collection('${COLLECTION}')`, error)
      }
      if (!isPlainObject(candidate) || typeof candidate.findOneAndUpdate !== 'function' || typeof candidate.deleteMany !== 'function') {
        throw invalidArg(TypeError, `throttle: db.collection('${COLLECTION}') must provide findOneAndUpdate() and deleteMany()`)
      }
      collection = candidate
    }
    return collection
  }

  // The last period seen per calendar unit: a hit costs two comparisons instead of a native call.
  const openPeriods = new Map()
  function windowFor(unit, wallMs) {
    if (unit === 'minute') return minuteWindow(wallMs)
    const open = openPeriods.get(unit)
    if (open !== undefined && open.startMs <= wallMs && wallMs < open.endMs) return open
    const period = calendarPeriod(unit, timeZone, wallMs)
    const window = { id: period.id, startMs: period.startMs, endMs: period.endMs }
    openPeriods.set(unit, window)
    return window
  }

  function localNow() {
    let wallMs
    try {
      wallMs = clock.wallMs()
    } catch (error) {
      throw coded(RangeError, 'ERR_CLOCK_READING', `throttle: clock.wallMs() threw: ${thrownText(error)}`, { cause: error })
    }
    if (typeof wallMs !== 'number' || !(Math.abs(wallMs) <= MAX_DATE_MS)) {
      throw coded(RangeError, 'ERR_CLOCK_READING', `throttle: clock.wallMs() must return a number of milliseconds within ±${MAX_DATE_MS} (a Date), received ${describe(wallMs)}`)
    }
    return wallMs
  }

  // Reads the database server's clock through '$$NOW' in an update pipeline, writing the reading
  // into a small per-key document (a per-key document spreads the writes across keys).
  // skewMs = server time - local time at the midpoint of the round trip.
  async function serverClock(clockId) {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const sentMs = localNow()
      let reply
      try {
        const collection = throttleCollection()
        reply = await storeCall('reading its clock', () =>
          collection.findOneAndUpdate(
            { _id: clockId },
            [{ $set: { now: '$$NOW', expires_at: new Date(Math.min(sentMs + CLOCK_DOC_LIFETIME_MS, MAX_DATE_MS)) } }],
            UPSERT_RETURN_AFTER,
          ),
        )
      } catch (err) {
        if (isDuplicateKey(err)) continue // a racing first write created it: retry as an update
        throw err
      }
      const receivedMs = localNow()
      const doc = unwrap(reply)
      if (doc === null) continue // a racing upsert may answer without the document: retry
      if (!isPlainObject(doc) || !(doc.now instanceof Date) || !Number.isFinite(doc.now.getTime())) {
        throw storeResponse(`throttle: the database did not return its time for '$$NOW' (received ${describe(isPlainObject(doc) ? doc.now : doc)})`)
      }
      const serverMs = doc.now.getTime()
      const roundTripMs = receivedMs - sentMs
      return { serverMs, skewMs: serverMs - (sentMs + roundTripMs / 2), roundTripMs }
    }
    throw storeResponse(`throttle: the database did not return the clock document after ${ATTEMPTS} attempts`)
  }

  // Atomically counts one attempt in the counter `_id` and returns the new count: an increment,
  // the counter made at n = 0 first when it does not exist (createThenUpdate). No read-modify-write,
  // so concurrent attempts each get their own count.
  async function increment(_id, unit, endMs) {
    const filter = { _id }
    const collection = throttleCollection()
    const doc = await createThenUpdate(
      async () => unwrap(await storeCall('counting an attempt', () => collection.findOneAndUpdate(filter, INCREMENT, RETURN_AFTER))),
      () =>
        storeCall('creating a counter', () =>
          collection.findOneAndUpdate(filter, { $setOnInsert: { n: 0, expires_at: new Date(Math.min(endMs, MAX_DATE_MS)), window: unit } }, UPSERT_RETURN_AFTER),
        ),
      (attempts) => storeResponse(`throttle: counter ${JSON.stringify(_id)} could not be created after ${attempts} attempts`),
    )
    return countOf(doc, _id)
  }

  function counterId(encodedKey, unit, windowId) {
    return unit === 'minute' ? `${encodedKey}|minute|${windowId}` : `${encodedKey}|${unit}|${timeZone}|${windowId}`
  }

  /** Counts one attempt for `key` and answers whether it is within every given limit. */
  async function check(key, limits) {
    validateKey(key)
    const active = validateLimits(limits)
    const encodedKey = encodeKey(key)
    let nowMs
    let skewMs
    if (time === 'server' && active.length > 0) {
      ;({ serverMs: nowMs, skewMs } = await serverClock(`${encodedKey}|clock`))
    } else {
      nowMs = localNow()
    }
    const windows = {}
    for (const { unit, limit } of active) {
      const { id, startMs, endMs } = windowFor(unit, nowMs)
      windows[unit] = { id, startMs, endMs, limit, count: null, remaining: null }
    }
    let refusal = null
    for (const { unit, reason, limit } of active) {
      const window = windows[unit]
      // Increment, then compare: an attempt a limit refuses still counts in that window's counter.
      window.count = await increment(counterId(encodedKey, unit, window.id), unit, window.endMs)
      window.remaining = Math.max(0, limit - window.count)
      if (window.count > limit) {
        refusal = { reason, retryAfterMs: Math.ceil(window.endMs - nowMs) }
        break
      }
    }
    const result = refusal === null
      ? { allowed: true, retryAfterMs: 0 }
      : { allowed: false, reason: refusal.reason, retryAfterMs: refusal.retryAfterMs }
    result.nowMs = nowMs
    if (skewMs !== undefined) result.skewMs = skewMs
    result.windows = windows
    return result
  }

  /** Deletes every counter whose window has ended (`expires_at <= now`); resolves to `{ n }`. */
  async function sweep() {
    const nowMs = time === 'server' ? (await serverClock('|clock')).serverMs : localNow()
    const collection = throttleCollection()
    const reply = await storeCall('sweeping', () => collection.deleteMany({ expires_at: { $lte: new Date(nowMs) } }))
    return { n: reply && typeof reply.deletedCount === 'number' ? reply.deletedCount : 0 }
  }

  /** Reads the database server's clock once: `{ skewMs, roundTripMs, serverMs }`. */
  function measureSkew() {
    return serverClock('|clock')
  }

  return { check, sweep, measureSkew }
}

module.exports = { createThrottle, memoryDb }
