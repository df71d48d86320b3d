'use strict'
// mongoStore(db, { collection }): a quota store on MongoDB (the official driver's Db, mongodb >= 5).
// A reservation is one atomic findOneAndUpdate whose update is an aggregation pipeline: the server
// computes the grant from the count it holds, so no read-modify-write race exists between
// processes. The driver is not loaded here: the caller's Db is used as it is.
//
// One document per (name, key, periodId):
//   { _id: recordKey (lib/stores/record-key.js), name, key, periodId,
//     count,      the units counted in the period (reserved and not given back, and charged by
//                 failOpen decisions): `used`
//     extra,      units granted on top of the limit for the period (quotaAdmin.grant)
//     limit,      the limit the latest reservation was judged against
//     rid,        the record's identity, made when it is created (an instance that finds another
//                 one charges the new record with what it had reserved in the old one)
//     held,       { <instance>: units it holds unadmitted as of its last call } (0: absent)
//     granted,    what the latest reservation granted (read back from the updated document)
//     provisional true on a record a grant made, until a reservation sets its period's end
//     blk, blkRev the key's block stamped on it (lib/stores/mongo-blocks.js): its end (store ms)
//                 and revision; _bl, what the latest reservation found left of it (store time)
//     expiresAt } a Date: the period's end; a TTL index on it removes ended periods:
//                 db.collection('quota_shares').createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 })
//
// The fleet bucket's records and operations are in lib/stores/mongo-bucket.js (bucketTake,
// bucketRead, bucketFill), in the same collection.
//
// A document is created first, with count 0, and only then reserved from by an update without
// upsert (createThenUpdate, lib/stores/mongo-calls.js): a grant whose answer is lost would be stranded.

const { makeQuotaStore, checkReserveAnswer, checkRecordAnswer, checkRefusedGrant, clamped, instanceFields, newRecordId, KEEP_GRANTED_MS, RECORD_GRACE_MS } = require('../share/protocol.js')
const { describe } = require('../common/validate.js')
const { ATTEMPTS, isDuplicateKey, storeResponse, documentOf, createThenUpdate } = require('./mongo-calls.js')
const { recordKey } = require('./record-key.js')
const { bucketOperations } = require('./mongo-bucket.js')
const { blockOperations, RESERVED_BLOCK } = require('./mongo-blocks.js')
const { invalid, readStoreOptions, checkText } = require('./options.js')

const DEFAULT_COLLECTION = 'quota_shares'
const MAX_COLLECTION_LENGTH = 120
// A period end already past (this process's clock runs behind the others') keeps the record
// RECORD_GRACE_MS after the write, as the Redis store does. From this process's clock: the test
// server compares dates computed from $$NOW wrongly, and a lag shorter than this is covered either way.
const WITH_DOCUMENT = { returnDocument: 'after', includeResultMetadata: true }
const noTrip = () => {}
const UPSERT = { upsert: true }

/** The update pipeline of one reservation (the rule of lib/share/protocol.js, run by the server). */
function reservePipeline(request, expiresAt, keptUntil) {
  const { limit, leaseUnits, lacking, charge } = request
  const { instance, held, owned, recordId } = instanceFields(request)
  const lost = { $and: [{ $ne: [recordId, 0] }, { $ne: ['$rid', recordId] }] }
  const room = { $max: [0, { $subtract: [{ $add: [limit, { $ifNull: ['$extra', 0] }] }, '$count'] }] }
  const want = { $max: [lacking, { $min: [leaseUnits, { $ceil: { $divide: ['$$room', 8] } }] }] }
  const heldAfter = { $add: [held, '$granted'] }
  return [
    { $set: { count: { $add: [{ $ifNull: ['$count', 0] }, charge, { $cond: [lost, owned, 0] }] } } },
    {
      $set: {
        granted: { $let: { vars: { room }, in: { $let: { vars: { want }, in: { $cond: [{ $gte: ['$$room', '$$want'] }, '$$want', 0] } } } } },
      },
    },
    {
      $set: {
        count: { $add: ['$count', '$granted'] },
        // Pushed out by a later period end, never pulled in, never right after the write (a
        // record a grant made takes its period's end from the first reservation).
        expiresAt: {
          $cond: [{ $eq: ['$provisional', true] }, { $max: [expiresAt, keptUntil] }, { $max: [{ $ifNull: ['$expiresAt', expiresAt] }, expiresAt, keptUntil] }],
        },
        provisional: '$$REMOVE',
        rid: { $ifNull: ['$rid', newRecordId()] },
        ...(instance === '' ? {} : { [`held.${instance}`]: { $cond: [{ $gt: [heldAfter, 0] }, heldAfter, '$$REMOVE'] } }),
        ...(leaseUnits > 0 || lacking > 0 ? { limit } : {}),
        // The key's block stamped on the record (lib/stores/mongo-blocks.js), left at store time.
        ...RESERVED_BLOCK,
      },
    },
  ]
}

const RESET = [
  { $set: { count: { $sum: { $map: { input: { $objectToArray: { $ifNull: ['$held', {}] } }, in: '$$this.v' } } }, extra: 0 } },
]

/** A document as the operator's view answers it (lib/share/protocol.js). */
function recordOf(document, name) {
  if (document === null) return checkRecordAnswer(null, name)
  let held = 0
  for (const units of Object.values(document.held ?? {})) held += units
  return checkRecordAnswer(
    {
      limit: document.limit === undefined || document.limit === null ? null : clamped(document.limit),
      extra: clamped(document.extra ?? 0),
      used: clamped(document.count ?? 0),
      held: clamped(held),
      expiresAt: document.expiresAt instanceof Date ? document.expiresAt.getTime() : null,
    },
    name,
  )
}

/** A record's limit + extra, as the server computes it (for a filter) and as read here. */
const allowanceOf = (root) => ({ $add: [{ $ifNull: [`${root}.limit`, 0] }, { $ifNull: [`${root}.extra`, 0] }] })
const allowance = (document) => (document.limit ?? 0) + (document.extra ?? 0)

const GIVE_BACK = (units, instance) => [
  { $set: { count: { $max: [0, { $subtract: [{ $ifNull: ['$count', 0] }, units] }] }, ...(instance === '' ? {} : { [`held.${instance}`]: '$$REMOVE' }) } },
]

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

  const blockOps = blockOperations(records)

  return makeQuotaStore('mongo', {
    async reserve(request, roundTrip = noTrip) {
      const { name, key, periodId, expiresAtMs } = request
      const _id = recordKey(name, key, periodId)
      const expiresAt = new Date(Math.ceil(expiresAtMs))
      const pipeline = reservePipeline(request, expiresAt, new Date(Date.now() + RECORD_GRACE_MS))
      const document = await createThenUpdate(
        async () => {
          roundTrip()
          return documentOf(await records().findOneAndUpdate({ _id }, pipeline, WITH_DOCUMENT), `a reservation for "${name}"`)
        },
        async () => {
          roundTrip()
          const made = await records().updateOne({ _id }, { $setOnInsert: { name, key, periodId, count: 0, expiresAt, rid: newRecordId() } }, UPSERT)
          // A record made after the key was blocked carries the block too.
          if (made?.upsertedCount > 0) await blockOps.stampNew(name, key, _id, roundTrip)
        },
        (attempts) => storeResponse(`quota store (MongoDB) lost the record of "${name}" for key ${describe(key)} in ${periodId}: not found after ${attempts} attempts to create it`),
      )
      const unreserved = typeof document.count === 'number' ? clamped(Math.max(0, request.limit + (document.extra ?? 0) - document.count)) : document.count
      // A block stamped on the record comes with it, while it lasts.
      const blockedMs = typeof document._bl === 'number' ? document._bl : 0
      return checkReserveAnswer({ granted: document.granted, unreserved, recordId: document.rid, ...(blockedMs > 0 ? { blockedMs } : {}) }, request)
    },
    async giveBack(request, roundTrip = noTrip) {
      const { name, key, periodId, units } = request
      const { instance, recordId } = instanceFields(request)
      // Only to the record the units were reserved in.
      const filter = recordId === 0 ? { _id: recordKey(name, key, periodId) } : { _id: recordKey(name, key, periodId), rid: recordId }
      roundTrip()
      await records().updateOne(filter, GIVE_BACK(units, instance))
    },
    async usage({ name, key, periodId }) {
      return recordOf(await records().findOne({ _id: recordKey(name, key, periodId) }), name)
    },
    async grant({ name, key, periodId, units, recordId }, roundTrip = noTrip) {
      const _id = recordKey(name, key, periodId)
      const update = {
        $inc: { extra: units },
        $setOnInsert: { name, key, periodId, count: 0, rid: recordId, provisional: true, expiresAt: new Date(Date.now() + KEEP_GRANTED_MS) },
      }
      // Only a record whose limit + extra + units stays a safe integer matches; one that does not
      // is not updated, and the upsert's insert of its _id fails as a duplicate key.
      const fits = { _id, $expr: { $lte: [allowanceOf('$$ROOT'), Number.MAX_SAFE_INTEGER - units] } }
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        try {
          roundTrip()
          const document = documentOf(await records().findOneAndUpdate(fits, update, { ...WITH_DOCUMENT, upsert: true }), `a grant for "${name}"`)
          if (document !== null) return recordOf(document, name)
        } catch (error) {
          if (!isDuplicateKey(error)) throw error
          // A record that does not fit, or a racing creator's: refused if it does not fit, else again.
          roundTrip()
          const found = await records().findOne({ _id })
          if (found !== null && !(allowance(found) <= Number.MAX_SAFE_INTEGER - units)) {
            return checkRefusedGrant({ refused: clamped(allowance(found)) }, name)
          }
        }
      }
      throw storeResponse(`quota store (MongoDB) lost the record of "${name}" for key ${describe(key)} in ${periodId}: not found after ${ATTEMPTS} attempts to grant`)
    },
    async reset({ name, key, periodId }) {
      return recordOf(documentOf(await records().findOneAndUpdate({ _id: recordKey(name, key, periodId) }, RESET, WITH_DOCUMENT), `a reset for "${name}"`), name)
    },
    ...bucketOperations(records, blockOps),
    blockSet: blockOps.blockSet,
    blockClear: blockOps.blockClear,
    blockRead: blockOps.blockRead,
    keys: blockOps.keys,
  })
}

module.exports = { mongoStore }
