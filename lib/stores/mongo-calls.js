'use strict'
// What every MongoDB caller of the package does alike (mongoStore's quota records and fleet
// buckets, the throttle's counters): the duplicate-key error a racing creator gets, the
// create-then-update loop, the document of a findOneAndUpdate answer, an answer that makes no
// sense (ERR_STORE_RESPONSE).

const { QuotaClockError } = require('../native/errors.js')
const { describe } = require('../common/validate.js')

// The server's error code for an insert of an _id that exists.
const DUPLICATE_KEY = 11000
// One create-then-update is enough unless the document is removed in between (a TTL sweep, a
// drop): a few tries, then the store is misbehaving.
const ATTEMPTS = 3

/** Whether `error` is a duplicate-key error (a getter or Proxy trap that throws: it is not). */
function isDuplicateKey(error) {
  try {
    return error !== null && typeof error === 'object' && error.code === DUPLICATE_KEY
  } catch {
    return false
  }
}

/** The store answered something that is not what was asked for: never read as an allowance. */
function storeResponse(message) {
  return new QuotaClockError('ERR_STORE_RESPONSE', message)
}

/**
 * The document of a findOneAndUpdate answer made with `includeResultMetadata: true` (a ModifyResult,
 * driver 5 and 6+ alike): null when none matched. `what` names the request in the error.
 */
function documentOf(reply, what) {
  if (typeof reply !== 'object' || reply === null || !('value' in reply)) {
    throw storeResponse(`quota store (MongoDB) answered ${what} with ${describe(reply)}; expected a findOneAndUpdate result`)
  }
  return reply.value
}

/**
 * A document updated in place, made first when it does not exist: `update()` resolves to the
 * updated document, or null when there is none; then `create()` makes it ($setOnInsert, a racing
 * creator's duplicate-key error tolerated) and the update runs again, ATTEMPTS updates in all,
 * after which `lost()` is thrown. An update without upsert: an upsert that races another may be
 * answered without its document on some MongoDB-compatible servers.
 */
async function createThenUpdate(update, create, lost) {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const document = await update()
    if (document !== null) return document
    try {
      await create()
    } catch (error) {
      if (!isDuplicateKey(error)) throw error
    }
  }
  throw lost(ATTEMPTS)
}

module.exports = { ATTEMPTS, isDuplicateKey, storeResponse, documentOf, createThenUpdate }
