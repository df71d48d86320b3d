'use strict'
// The limits in force for a key, the RateLimit-Policy and RateLimit header items, and the one
// function that writes a request's headers (writeHeaders: those two and Retry-After).
//
// Every answer of rateLimit, whatever path it takes (a decision, a denial reporting the later
// limits from their status, the refunded limits of a denial or a 503, a throttle's windows), fills
// one shape, `HeaderItems` (`{ policy, limit }`: each entry's items at its index), with
// describeLimiter / describeRefunded / describeStatus / describeThrottle, and hands it to writeHeaders.
//
// Headers follow draft-ietf-httpapi-ratelimit-headers-11: `RateLimit-Policy` and `RateLimit` are
// structured-field lists (RFC 9651) with one item per limit in force: an sf-string name and
// integer parameters. The names are quoted once, when `rateLimit` is called; per request only
// integers are appended. The `structured-headers` library is not used at run time: serializing the
// list with it costs ~2 µs a request (benchmark/http.js), over half of express-rate-limit's whole
// cost, and quoting a handful of names at configuration does not justify the package's first
// runtime dependency. The tests parse every header with that library instead, and compare the
// text written here with its serialization for many limits, names and clocks.

const { limitsGeneration, policyAskedCount } = require('../limiter/limiter-facts.js')

// sf-integer range (RFC 9651 §3.3.1); larger values are written as this maximum.
const MAX_SF_INTEGER = 999_999_999_999_999
// The limits in force for a key are re-read from `status` at least this often (a key's policy can
// change when the limiter drops the key and holds it again), and when the key's quota period ends.
const RECORD_LIFETIME_MS = 60_000
const MAX_RECORDS = 10_000

function sfInteger(value) {
  return value >= MAX_SF_INTEGER ? MAX_SF_INTEGER : value > 0 ? Math.floor(value) : 0
}

function unitOfPeriod(period) {
  const parts = period.id.replace(/^[+-]/, '').split('-').length
  if (parts === 1) return 'year'
  if (parts === 2) return 'month'
  return period.endMs - period.startMs < 3 * 86_400_000 ? 'day' : 'week'
}

/** What the headers need of a key's limits, from `status`. */
function recordFrom(entry, status, wallNowMs) {
  const { capacity, refillPerSecond, quotaLimit, period } = status
  const { quoted } = entry.items
  // A quota alone (capacity Infinity) has no bucket: no burst item.
  const bucket = capacity !== Infinity
  let policy = bucket ? `${quoted.burst};q=${sfInteger(capacity)};w=${sfInteger(Math.ceil(capacity / refillPerSecond))}` : ''
  let unit
  if (period !== null && period !== undefined && quotaLimit !== null && quotaLimit !== undefined) {
    unit = unitOfPeriod(period)
    policy += `${bucket ? ', ' : ''}${quoted[unit]};q=${sfInteger(quotaLimit)};w=${sfInteger(Math.round((period.endMs - period.startMs) / 1000))}`
  }
  const refreshAtMs = entry.recordPerKey ? wallNowMs + RECORD_LIFETIME_MS : Infinity
  const periodEndMs = unit === undefined ? Infinity : period.endMs
  return {
    bucket,
    capacity,
    refillPerSecond,
    quotaLimit: unit === undefined ? null : quotaLimit,
    unit,
    periodEndMs,
    timeZone: unit === undefined ? undefined : period.timeZone,
    // The wall clock matters to this record: for its quota's reset time, or its lifetime.
    readsWall: periodEndMs !== Infinity || refreshAtMs !== Infinity,
    staleAtMs: Math.min(periodEndMs, refreshAtMs),
    policy,
    // The wall reading of the request being answered (set by recordFor when readsWall).
    wallNowMs: 0,
    // How many times the key's policy had been asked when this was read (recordFor sets it).
    asked: 0,
    // The last `RateLimit` items written from this record, with the integers they carry
    // (limitItems): requests that leave a key with the same tokens and reset reuse the string.
    burstR: -1,
    burstT: -1,
    burstItem: '',
    quotaR: -1,
    quotaT: -1,
    quotaItem: '',
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
  if (tokens > record.capacity || (tokens === Infinity) === record.bucket) return false
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
  // Limits changed while running: every record is read again.
  const generation = limitsGeneration(entry.limiter)
  if (generation !== entry.limitsGeneration) {
    entry.records.clear()
    entry.limitsGeneration = generation
    record = undefined
  }
  // A key's policy asked again since its record was read (a refresh: policyTtlMs, or a zone's mark
  // from another limiter): its limits are read again.
  const asked = entry.recordPerKey ? policyAskedCount(entry.limiter, key) : 0
  if (record !== undefined && !record.readsWall && record.asked === asked) return record
  const wallNowMs = readWall(entry)
  if (record === undefined || record.asked !== asked || wallNowMs >= record.staleAtMs || (entry.recordPerKey && !fits(record, tokens, quotaRemaining))) {
    record = recordFrom(entry, statusOf(entry, key), wallNowMs)
    record.asked = entry.recordPerKey ? policyAskedCount(entry.limiter, key) : 0
    if (entry.records.size >= MAX_RECORDS) entry.records.delete(entry.records.keys().next().value)
    entry.records.delete(recordKey) // re-inserted last: the oldest record goes first when full
    entry.records.set(recordKey, record)
  }
  record.wallNowMs = wallNowMs
  return record
}

/** A quota denial's reset for its problem detail (`{ atMs, timeZone }`), from its key's record; else undefined. */
function quotaReset(record, decision) {
  if (decision.retryAfterBasis !== 'wall-period' || record?.timeZone === undefined) return undefined
  return { atMs: record.wallNowMs + decision.retryAfterMs, timeZone: record.timeZone }
}

/** The entry's `RateLimit` items for `tokens` and `quotaRemaining` (after the decision). */
function limitItems(entry, record, tokens, quotaRemaining) {
  const { quoted } = entry.items
  let items = ''
  // Most requests leave their key as the last one left its own (a bucket that refilled, the same
  // second of the period): the integers are compared and the last string reused, as writing
  // numbers into a string is most of what this costs.
  if (record.bucket) {
    const r = sfInteger(tokens)
    const t = sfInteger(Math.ceil((record.capacity - tokens) / record.refillPerSecond))
    if (r !== record.burstR || t !== record.burstT) {
      record.burstItem = `${quoted.burst};r=${r};t=${t}`
      record.burstR = r
      record.burstT = t
    }
    items = record.burstItem
  }
  if (record.unit !== undefined && quotaRemaining !== null) {
    const r = sfInteger(quotaRemaining)
    const t = sfInteger(Math.ceil((record.periodEndMs - record.wallNowMs) / 1000))
    if (r !== record.quotaR || t !== record.quotaT) {
      record.quotaItem = `${quoted[record.unit]};r=${r};t=${t}`
      record.quotaR = r
      record.quotaT = t
    }
    items = record.bucket ? `${items}, ${record.quotaItem}` : record.quotaItem
  }
  return items
}

/** Empty `HeaderItems` for `count` entries: `policy[i]` and `limit[i]` are entry i's items ('' for none). */
function headerItems(count) {
  return { policy: new Array(count).fill(''), limit: new Array(count).fill('') }
}

/**
 * Fills `items.policy[i]` and `items.limit[i]` for a limiter entry from a decision (or a status):
 * its `tokens` and `quotaRemaining`. Answers the key's record (its limits in force; quotaReset and
 * violatedBy read it). (Kept apart from describeRefunded: small enough for V8 to inline into the
 * decision's loop; with the refund folded in, two limits cost ~6 % more instructions a request.)
 */
function describeLimiter(entry, key, tokens, quotaRemaining, items, i) {
  if (entry.fleetBucket) tokens = fleetRemaining(entry, key, tokens)
  const record = recordFor(entry, key, tokens, quotaRemaining)
  items.policy[i] = record.policy
  items.limit[i] = limitItems(entry, record, tokens, quotaRemaining)
  return record
}

/** describeLimiter for a decision whose `refunded` units were given back since (shown, capped at the limits). */
function describeRefunded(entry, key, tokens, quotaRemaining, items, i, refunded) {
  const record = recordFor(entry, key, tokens, quotaRemaining)
  const quotaShown = quotaRemaining === null ? null : Math.min(quotaRemaining + refunded, record.quotaLimit ?? Infinity)
  items.policy[i] = record.policy
  items.limit[i] = limitItems(entry, record, Math.min(tokens + refunded, record.capacity), quotaShown)
}

/**
 * A shared bucket's remaining: this process's slice and the fleet's tokens as last heard of,
 * `floor(tokens + fleetTokens)`, at most the capacity.
 */
function fleetRemaining(entry, key, tokens) {
  let status
  try {
    status = entry.limiter.status(key)
  } catch {
    return tokens // (a limiter that cannot answer now: its slice alone)
  }
  return Math.max(0, Math.min(Math.floor(tokens + (status.fleetTokens ?? 0)), status.capacity))
}

/** describeLimiter from the entry's `status` for `key`: a limit the request did not reach (a denial came first). */
function describeStatus(entry, key, items) {
  const status = statusOf(entry, key)
  describeLimiter(entry, key, status.tokens, status.quotaRemaining, items, entry.index)
}

/** Fills `items.policy[i]` and `items.limit[i]` for a throttle entry, from its check's windows. */
function describeThrottle(entry, result, items, i) {
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
  items.policy[i] = policy
  items.limit[i] = limit
}

function joinItems(parts) {
  let text = ''
  for (const part of parts) {
    if (part === undefined || part === '') continue
    text = text === '' ? part : `${text}, ${part}`
  }
  return text
}

/**
 * The items of a structured-field list (RFC 9651 §4.2.1) as [name, text] pairs: split at the
 * commas outside sf-strings, each named by its leading sf-string (unquoted) or token.
 */
function listItems(list) {
  const found = []
  let start = 0
  let quoted = false
  for (let i = 0; i <= list.length; i++) {
    const c = list[i]
    if (quoted) {
      if (c === '\\') i++
      else if (c === '"') quoted = false
      continue
    }
    if (c === '"') quoted = true
    else if (c === ',' || i === list.length) {
      const text = list.slice(start, i).trim()
      if (text !== '') found.push([itemName(text), text])
      start = i + 1
    }
  }
  return found
}

function itemName(text) {
  if (text[0] !== '"') return text.split(';', 1)[0]
  let name = ''
  for (let i = 1; i < text.length; i++) {
    if (text[i] === '\\') name += text[++i]
    else if (text[i] === '"') break
    else name += text[i]
  }
  return name
}

/**
 * A list already on the response (another rateLimit on the same route wrote it) with this one's
 * items: one list, each item once; an item of the same name takes the earlier one's place.
 */
function mergeItems(prior, added) {
  const merged = listItems(prior)
  for (const [name, text] of listItems(added)) {
    const at = merged.findIndex(([other]) => other === name)
    if (at === -1) merged.push([name, text])
    else merged[at] = [name, text]
  }
  return merged.map(([, text]) => text).join(', ')
}

/**
 * Sets the list header `name` to `value`, merged with the list an earlier rateLimit wrote there
 * (io.getHeader, asked by `lowerName`: header getters lower-case the name they are given, and one
 * already in lower case costs them no new string each request).
 */
function appendList(io, res, name, lowerName, value) {
  const prior = io.getHeader === undefined ? undefined : io.getHeader(res, lowerName)
  io.setHeader(res, name, typeof prior === 'string' && prior !== '' ? mergeItems(prior, value) : value)
}

/**
 * Writes a request's headers through the framework's `io.setHeader` (./decide.js), the one place
 * that does: `RateLimit-Policy` and `RateLimit` from `items` (undefined: none, as with
 * `headers: false`; an empty list is left out), appended to the lists an earlier rateLimit of the
 * same request wrote, then `Retry-After` in whole seconds, rounded up, when `retryAfterMs` is
 * given (a denial's wait, a 503's).
 */
function writeHeaders(io, res, items, retryAfterMs) {
  if (items !== undefined) {
    const policy = items.policy.length === 1 ? items.policy[0] : joinItems(items.policy)
    const limit = items.limit.length === 1 ? items.limit[0] : joinItems(items.limit)
    if (policy) appendList(io, res, 'RateLimit-Policy', 'ratelimit-policy', policy)
    if (limit) appendList(io, res, 'RateLimit', 'ratelimit', limit)
  }
  if (retryAfterMs !== undefined) io.setHeader(res, 'Retry-After', String(Math.ceil(retryAfterMs / 1000)))
}

module.exports = { mergeItems, quotaReset, recordFor, headerItems, describeLimiter, describeRefunded, describeStatus, describeThrottle, writeHeaders }
