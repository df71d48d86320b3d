'use strict'
// mongoStore(db, { collection }): a quota store on MongoDB (the official driver's Db, mongodb >= 5).
// A reservation is one atomic findOneAndUpdate whose update is an aggregation pipeline: the server
// computes the grant from the count it holds, so no read-modify-write race exists between
// processes. The driver is not loaded here: the caller's Db is used as it is.
//
// One document per (name, key, periodId):
//   { _id: recordKey (lib/shared/record-key.js), name, key, periodId,
//     count,      the units counted in the period (reserved, and charged by failOpen decisions)
//     granted,    what the latest reservation granted (read back from the updated document)
//     expiresAt } a Date: the period's end; a TTL index on it removes ended periods:
//                 db.collection('quota_shares').createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 })
//
// A document is created first, with count 0 ($setOnInsert, a racing creator's duplicate-key error
// tolerated), and only then reserved from by an update without upsert: an upsert that races
// another may be answered without its document on some MongoDB-compatible servers, and a grant
// whose answer is lost would be stranded.

const { makeQuotaStore, checkReserveAnswer } = require('../quota-store.js')
const { QuotaClockError } = require('../errors.js')
const { describe } = require('../validate.js')
const { recordKey } = require('./record-key.js')
const { invalid, readStoreOptions, checkText } = require('./options.js')

const DEFAULT_COLLECTION = 'quota_shares'
const MAX_COLLECTION_LENGTH = 120
// One create-then-reserve is enough unless the document is removed in between (a TTL sweep, a
// drop): a few tries, then the store is misbehaving.
const ATTEMPTS = 3
const DUPLICATE_KEY = 11000
// A period end already past (this process's clock runs behind the others') keeps the record this
// long after the write, as the Redis store does. From this process's clock: the test server
// compares dates computed from $$NOW wrongly, and a lag shorter than this is covered either way.
const GRACE_MS = 600_000
const WITH_DOCUMENT = { returnDocument: 'after', includeResultMetadata: true }
const UPSERT = { upsert: true }

/** The update pipeline of one reservation (the rule of lib/quota-store.js, run by the server). */
function reservePipeline({ limit, leaseUnits, lacking, charge }, expiresAt, keptUntil) {
  const room = { $max: [0, { $subtract: [limit, '$count'] }] }
  const want = { $max: [lacking, { $min: [leaseUnits, { $ceil: { $divide: ['$$room', 8] } }] }] }
  return [
    { $set: { count: { $add: [{ $ifNull: ['$count', 0] }, charge] } } },
    {
      $set: {
        granted: { $let: { vars: { room }, in: { $let: { vars: { want }, in: { $cond: [{ $gte: ['$$room', '$$want'] }, '$$want', 0] } } } } },
      },
    },
    {
      $set: {
        count: { $add: ['$count', '$granted'] },
        // Pushed out by a later period end, never pulled in, never right after the write.
        expiresAt: { $max: [{ $ifNull: ['$expiresAt', expiresAt] }, expiresAt, keptUntil] },
      },
    },
  ]
}

const GIVE_BACK = (units) => [{ $set: { count: { $max: [0, { $subtract: [{ $ifNull: ['$count', 0] }, units] }] } } }]

function storeResponse(message) {
  return new QuotaClockError('ERR_STORE_RESPONSE', message)
}

/** The document of a findOneAndUpdate answer, from driver 5 (a ModifyResult) and 6+ alike. */
function documentOf(reply, name) {
  if (typeof reply !== 'object' || reply === null || !('value' in reply)) {
    throw storeResponse(`quota store (MongoDB) answered a reservation for "${name}" with ${describe(reply)}; expected a findOneAndUpdate result`)
  }
  return reply.value
}

/** A quota store on MongoDB, for the official driver's Db (mongodb >= 5). */
function mongoStore(db, options) {
  if (typeof db !== 'object' || db === null || typeof db.collection !== 'function' || typeof db.databaseName !== 'string') {
    throw invalid(TypeError, `mongoStore: db must be the MongoDB driver's Db (mongodb >= 5, client.db(name)); received ${describe(db)}`)
  }
  const given = readStoreOptions('mongoStore', options, ['collection'])
  const collectionName =
    given.collection === undefined
      ? DEFAULT_COLLECTION
      : checkText('mongoStore', 'collection', given.collection, {
          minLength: 1,
          maxLength: MAX_COLLECTION_LENGTH,
          what: `a collection name of 1 to ${MAX_COLLECTION_LENGTH} characters without '$' or NUL, not starting with 'system.'`,
        })
  if (/[$\0]/.test(collectionName) || collectionName.startsWith('system.')) {
    throw invalid(RangeError, `mongoStore: collection must be a collection name without '$' or NUL, not starting with 'system.'; received ${describe(collectionName)}`)
  }

  // Asked for on first use, so making a store never touches the database.
  let collection
  function records() {
    collection ??= db.collection(collectionName)
    return collection
  }

  return makeQuotaStore('mongo', {
    async reserve(request) {
      const { name, key, periodId, expiresAtMs } = request
      const _id = recordKey(name, key, periodId)
      const expiresAt = new Date(Math.ceil(expiresAtMs))
      const pipeline = reservePipeline(request, expiresAt, new Date(Date.now() + GRACE_MS))
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        const document = documentOf(await records().findOneAndUpdate({ _id }, pipeline, WITH_DOCUMENT), name)
        if (document !== null) {
          const unreserved = typeof document.count === 'number' ? Math.max(0, request.limit - document.count) : document.count
          return checkReserveAnswer({ granted: document.granted, unreserved }, request)
        }
        try {
          await records().updateOne({ _id }, { $setOnInsert: { name, key, periodId, count: 0, expiresAt } }, UPSERT)
        } catch (error) {
          if (!error || error.code !== DUPLICATE_KEY) throw error
        }
      }
      throw storeResponse(`quota store (MongoDB) lost the record of "${name}" for key ${describe(key)} in ${periodId}: not found after ${ATTEMPTS} attempts to create it`)
    },
    async giveBack({ name, key, periodId, units }) {
      await records().updateOne({ _id: recordKey(name, key, periodId) }, GIVE_BACK(units))
    },
  })
}

module.exports = { mongoStore }
