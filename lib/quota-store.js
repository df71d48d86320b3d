'use strict'
// The one shape every quota store has, whatever is behind it (Redis, MongoDB). A store is made
// only by redisStore()/mongoStore(); a shared limiter refuses anything else, so its operations are
// kept out of reach (a WeakMap keyed by the public store object), not as properties a caller could
// forge or replace.
//
// Operations (every one resolves or rejects; none throws synchronously):
//
//   reserve({ name, key, periodId, limit, leaseUnits, lacking, charge, expiresAtMs })
//     -> Promise<{ granted, unreserved }>
//     One atomic step on the record of (name, key, periodId), whose count starts at 0:
//       count += charge                      (units a failOpen decision admitted earlier)
//       room   = max(0, limit - count)
//       want   = max(lacking, min(leaseUnits, ceil(room / 8)))
//       granted = room >= want ? want : 0    (never reserve past the limit; never less than lacking)
//       count += granted
//       the record expires at expiresAtMs (the period's end, plus a margin the store chooses)
//     and answers granted and the unreserved room left after it (room - granted).
//     lacking = units the waiting call still needs beyond the local reservation (0 for a
//     background refill, in which case want is at least 1 when room > 0).
//
//   giveBack({ name, key, periodId, units }) -> Promise<void>
//     count = max(0, count - units) if the record exists; nothing otherwise.
//
// Every number crossing is a non-negative safe integer; an answer that is not one is the store's
// fault (ERR_STORE_RESPONSE), checked by checkReserveAnswer below.

const { QuotaClockError } = require('./errors.js')

const operations = new WeakMap()

/** Makes the public store object for a set of operations; kind is 'redis' or 'mongo'. */
function makeQuotaStore(kind, ops) {
  const store = Object.freeze({ kind })
  operations.set(store, ops)
  return store
}

function isQuotaStore(value) {
  return typeof value === 'object' && value !== null && operations.has(value)
}

/** The operations behind a store made by makeQuotaStore, or undefined. */
function storeOperations(store) {
  return operations.get(store)
}

/** Checks a reserve answer; returns { granted, unreserved } or throws ERR_STORE_RESPONSE. */
function checkReserveAnswer(answer, request) {
  const granted = answer && answer.granted
  const unreserved = answer && answer.unreserved
  const ok = Number.isSafeInteger(granted) && granted >= 0 && Number.isSafeInteger(unreserved) && unreserved >= 0
  // A grant is nothing, or at least what the call lacks and at most what it asked for.
  if (!ok || (granted > 0 && (granted < request.lacking || granted > Math.max(request.lacking, request.leaseUnits)))) {
    throw new QuotaClockError(
      'ERR_STORE_RESPONSE',
      `quota store answered a reservation for "${request.name}" with ${describe(answer)}; ` +
        'expected { granted, unreserved } as non-negative safe integers'
    )
  }
  return { granted, unreserved }
}

function describe(value) {
  try {
    const text = JSON.stringify(value)
    if (typeof text === 'string') return text.length > 200 ? `${text.slice(0, 200)}…` : text
  } catch {
    // fall through
  }
  return String(typeof value)
}

module.exports = { makeQuotaStore, isQuotaStore, storeOperations, checkReserveAnswer }
