'use strict'
// The fleet bucket's operations on MongoDB (lib/share/protocol.js: bucketTake, bucketRead,
// bucketFill). One document per (name, key) in the quota collection:
//   { _id: 'bucket:' + part(name) + ':' + part(key)   (distinct from the quota records', which
//          start with a digit, and from the retired cells documents' 'b:'),
//     name, key, C, R, tk (a double), F, S, rid (the record's identity),
//     h: { <X>: { o: tokens out, a: fleet ms of X's last call (or of the call that gave its slice
//                 one more margin), l: leaseMs, e: true when its slice had that one more margin,
//                 d: until when (fleet ms) X counts as hungry (-1: not) }
//          (an instance holding no slice is listed as { o: 0, d } while it is hungry) }
//          (instance ids are field names: the driver's are hex),
//     ans: { g, h, k, n, r, bl }  the latest take's granted, held, others, store time, whether it
//                           repaired the document, and the key's block left, read back from its own
//                           update
//     blk, blkRev           the key's block stamped on it (lib/stores/mongo-blocks.js)
//     expiresAt }           a Date for the TTL index, bucketTerms.keptAfterTake (lib/share/protocol.js)
//                           of store time after the latest take
// Store time is `$$NOW` turned into ms by `$toLong` before any arithmetic: the MongoDB-compatible
// test server compares and adds Date values computed from $$NOW wrongly, while $toLong of $$NOW is
// right; on MongoDB the two are the same. Each operation that writes is one pipeline update of one
// document, which MongoDB applies atomically. A document is created first ($setOnInsert of its
// identity and `fresh`, a racing creator's duplicate-key error tolerated) and then taken from by an
// update without upsert (lib/stores/mongo.js says why); the first take of a fresh document makes
// the bucket, as step 1 of the protocol does.

const { checkBucketAnswer, checkBucketUsage, unsoundBucketRecord, newRecordId, writeOffAfterMs, bucketTerms, SHARE_REFILL_MS, MAX_CLOCK_MS, MAX_BUCKET_CAPACITY, MAX_RECORD_ID } = require(
  '../share/protocol.js',
)
const { describe } = require('../common/validate.js')
const { storeResponse, documentOf, createThenUpdate } = require('./mongo-calls.js')
const { mongoBucketId } = require('./record-key.js')
const { blockLeftAt } = require('./mongo-blocks.js')

const AFTER = { returnDocument: 'after', includeResultMetadata: true }
const UPSERT = { upsert: true }
// A fresh document no take has made a bucket of yet is kept this long.
const FRESH_KEPT_MS = 60_000

const documentId = mongoBucketId

const EMPTY = { $literal: {} }
const entries = (field) => ({ $objectToArray: { $ifNull: [field, EMPTY] } })
const othersOf = (me) => ({ $filter: { input: entries('$h'), cond: { $ne: ['$$this.k', me] } } })
const sumOut = (list) => ({ $sum: { $map: { input: list, in: '$$this.v.o' } } })
// The fleet bucket's terms (lib/share/protocol.js) written as pipeline expressions.
const PIPELINE = { add: (x, y) => ({ $add: [x, y] }), mul: (x, y) => ({ $multiply: [x, y] }), div: (x, y) => ({ $divide: [x, y] }), max: (x, y) => ({ $max: [x, y] }) }
const writeOffAt = (holder) => ({ $add: [`${holder}.a`, bucketTerms.writeOffAfter(PIPELINE, `${holder}.l`)] })
const TEMPORARY = ['_now', '_bad', '_lost', '_F', '_gone', '_goneUntil', '_spentUntil', '_m1', '_m2', '_prev', '_others', '_keep', '_back', '_k', '_hungry', '_sharing', '_hungryMe', '_granted', '_slice', '_recorded', '_longest']

// A sound bucket document (lib/share/protocol.js): each field a number (NaN and infinities fail the
// range), in its range, whole where it counts; `h` an object of holders { o, a, l, e?, d? } (a and
// l where o > 0; a hungry instance holding nothing is { o: 0, d }). Each
// check is guarded by $cond, so a field of another type is judged, never an error of the pipeline.
const MAX_SAFE = Number.MAX_SAFE_INTEGER
// (d, until when an instance counts as hungry, is at most a few seconds past the fleet clock.)
const MAX_HUNGER_MS = MAX_CLOCK_MS + 60_000
const ranged = (field, low, high) => ({ $cond: [{ $isNumber: field }, { $and: [{ $gte: [field, low] }, { $lte: [field, high] }] }, false] })
const whole = (field, low, high) => ({ $cond: [ranged(field, low, high), { $eq: [field, { $trunc: field }] }, false] })
const holderSound = (v) => ({
  $cond: [
    { $eq: [{ $type: v }, 'object'] },
    {
      $and: [
        whole(`${v}.o`, 0, MAX_SAFE),
        { $cond: [{ $gt: [`${v}.o`, 0] }, { $and: [ranged(`${v}.a`, 0, MAX_CLOCK_MS), whole(`${v}.l`, 1, MAX_BUCKET_CAPACITY)] }, true] },
        // (e and d may be absent.)
        { $eq: [{ $ifNull: [`${v}.e`, true] }, true] },
        ranged({ $ifNull: [`${v}.d`, -1] }, -1, MAX_HUNGER_MS),
      ],
    },
    false,
  ],
})
const SOUND = {
  $and: [
    whole('$C', 1, MAX_BUCKET_CAPACITY),
    { $cond: [{ $and: [{ $isNumber: '$R' }, { $gt: ['$R', 0] }] }, { $lt: ['$R', Number.POSITIVE_INFINITY] }, false] },
    { $cond: [whole('$C', 1, MAX_BUCKET_CAPACITY), ranged('$tk', -MAX_SAFE, '$C'), false] },
    ranged('$F', 0, MAX_CLOCK_MS),
    ranged('$S', 0, MAX_CLOCK_MS),
    whole('$rid', 1, MAX_RECORD_ID - 1),
    { $cond: [{ $eq: [{ $type: '$h' }, 'object'] }, { $allElementsTrue: [{ $map: { input: { $objectToArray: '$h' }, in: holderSound('$$this.v') } }] }, false] },
  ],
}
/** `_bad`: the document is not a sound bucket (a fresh one is judged by the take that makes it). */
const JUDGED = { $set: { _bad: { $cond: [{ $eq: ['$fresh', true] }, false, { $not: [SOUND] }] } } }

const isNumber = (x) => typeof x === 'number' && !Number.isNaN(x)
const inRange = (x, low, high) => isNumber(x) && x >= low && x <= high
const isWhole = (x, low, high) => inRange(x, low, high) && Number.isInteger(x)

/** Why a bucket document is not a sound one (SOUND, read here), or undefined. */
function unsoundField(d) {
  const numeric = (x) => (typeof x === 'object' && x !== null && typeof x.valueOf() === 'number' ? x.valueOf() : x) // Int32, Long, Double
  const C = numeric(d.C)
  const R = numeric(d.R)
  if (!isWhole(C, 1, MAX_BUCKET_CAPACITY)) return d.C === undefined ? 'field C missing' : 'field C not a number in range'
  if (!(isNumber(R) && R > 0 && R < Infinity)) return d.R === undefined ? 'field R missing' : 'field R not a number in range'
  for (const [field, low, high, integer] of [['tk', -MAX_SAFE, C], ['F', 0, MAX_CLOCK_MS], ['S', 0, MAX_CLOCK_MS], ['rid', 1, MAX_RECORD_ID - 1, true]]) {
    const x = numeric(d[field])
    if (!(integer ? isWhole(x, low, high) : inRange(x, low, high))) return d[field] === undefined ? `field ${field} missing` : `field ${field} not a number in range`
  }
  if (typeof d.h !== 'object' || d.h === null || Array.isArray(d.h)) return 'field h not an object'
  for (const [who, holder] of Object.entries(d.h)) {
    const v = typeof holder === 'object' && holder !== null ? holder : {}
    const o = numeric(v.o)
    const checks = [['o', 0, MAX_SAFE, true], ...(o > 0 ? [['a', 0, MAX_CLOCK_MS], ['l', 1, MAX_BUCKET_CAPACITY, true]] : []), ...(v.d === undefined ? [] : [['d', -1, MAX_HUNGER_MS]])]
    for (const [field, low, high, integer] of checks) {
      const x = numeric(v[field])
      if (!(integer ? isWhole(x, low, high) : inRange(x, low, high))) return `field h.${who}.${field} missing or not a number in range`
    }
    if (!(v.e === undefined || v.e === true)) return `field h.${who}.e not true`
  }
  return undefined
}

// Whether a holder past its margin gets one more margin instead (step 4): the fleet clock moved
// from `from` to `at` by more than a margin at once, and the holder has not had one more yet.
const extended = (holder, from, at) => ({
  $and: [{ $gt: [{ $subtract: [at, from] }, bucketTerms.writeOffAfter(PIPELINE, `${holder}.l`)] }, { $ne: [`${holder}.e`, true] }],
})

/**
 * Step 4 (lib/share/protocol.js), judged at the fleet clock `at`, moved there from `from`: the
 * others past their margin get one more margin, once, when the move passed it at once; otherwise
 * they are written off, spent for good (removed from the record).
 */
function writeOffStage(me, at = '$F', from = at) {
  const other = { $ne: ['$$this.k', me] }
  const holds = { $gt: ['$$this.v.o', 0] }
  const judged = {
    $switch: {
      branches: [
        {
          case: { $and: [other, holds, { $lt: [writeOffAt('$$this.v'), at] }] },
          then: { $cond: [extended('$$this.v', from, at), { k: '$$this.k', v: { o: '$$this.v.o', a: at, l: '$$this.v.l', e: true, d: { $ifNull: ['$$this.v.d', -1] } } }, null] },
        },
        // an instance holding nothing, no longer hungry: forgotten
        { case: { $and: [other, { $not: [holds] }, { $lt: [{ $ifNull: ['$$this.v.d', -1] }, at] }] }, then: null },
      ],
      default: '$$this',
    },
  }
  return { $set: { h: { $arrayToObject: { $filter: { input: { $map: { input: entries('$h'), in: judged } }, cond: { $ne: ['$$this', null] } } } } } }
}

/** The others written off at the fleet clock `_F`, moved there from `F` (step 4). */
const goneOf = (me) => ({
  $filter: { input: othersOf(me), cond: { $and: [{ $lt: [writeOffAt('$$this.v'), '$_F'] }, { $gt: ['$$this.v.o', 0] }, { $not: [extended('$$this.v', '$F', '$_F')] }] } },
})

/**
 * Step 5's refill over the fleet clock from `from` to `to`, capped by C minus what is out then:
 * the others' slices, those written off now until their margin (`_goneUntil`), and X's slice in
 * full until it was last spent from (`_spentUntil`), what X keeps and gives back after.
 */
function refillStage(from, to) {
  const mine = { $cond: [{ $lt: [from, '$_spentUntil'] }, '$_prev', { $add: ['$_keep', '$_back'] }] }
  const gone = { $cond: [{ $lt: [from, '$_goneUntil'] }, '$_gone', 0] }
  const room = { $subtract: ['$C', { $add: ['$_others', gone, mine] }] }
  const refilled = { $min: ['$$room', { $add: ['$tk', { $divide: [{ $multiply: [{ $subtract: [to, from] }, '$R'] }, 1000] }] }] }
  return { $set: { tk: { $let: { vars: { room }, in: { $cond: [{ $and: [{ $gt: [to, from] }, { $lt: ['$tk', '$$room'] }] }, refilled, '$tk'] } } } } }
}

/** bucketTake's steps as one update pipeline. */
function takePipeline({ capacity, refillPerSecond, instance: me, leaseMs, want, more, held, give, charge, fleetMs, recordId: known, most = 0, spentMs = 0, spend = false }, newId) {
  const fresh = { $eq: ['$fresh', true] }
  // A fresh document, or one that is not a bucket (`_bad`), is made the bucket anew.
  const made = { $or: [fresh, '$_bad'] }
  const refillAll = { $add: ['$F', { $multiply: [{ $divide: ['$C', '$R'] }, 1000] }] }
  const byCaller = fleetMs >= 0 ? { $cond: ['$_lost', refillAll, fleetMs] } : refillAll
  const least = more > 0 ? Math.max(want, 1) : want
  const beyond = { $subtract: ['$tk', least] }
  const unlimited =
    more === 0
      ? 0
      : more === 1
        ? {
            $let: {
              vars: { fair: { $min: [{ $divide: [beyond, { $add: ['$_sharing', 1] }] }, { $divide: ['$C', { $add: ['$_sharing', 2] }] }] } },
              in: { $floor: { $min: ['$$fair', { $max: [{ $divide: ['$$fair', 4] }, { $multiply: ['$R', SHARE_REFILL_MS / 1000] }] }] } },
            },
          }
        : { $floor: { $divide: [beyond, { $add: ['$_hungry', 1] }] } }
  const hungryOther = { $gte: [{ $ifNull: ['$$this.v.d', -1] }, '$F'] }
  // hungerMs (lib/share/protocol.js) of the tokens left after the take
  const floorMs = { $min: [leaseMs / 8, 1_000, { $multiply: [{ $divide: ['$C', '$R'] }, 500] }] }
  const waitMs = { $divide: [{ $multiply: [{ $max: [0, { $subtract: [1, '$tk'] }] }, 1_000] }, '$R'] }
  const hungerUntil = { $add: ['$F', { $multiply: [{ $min: [{ $max: [waitMs, { $min: [{ $multiply: [1.3, floorMs] }, 1_000] }] }, 1_000] }, 1.25] }, 50] }
  // (`most` > 0: the take stops there; `least` <= most as the request is checked.)
  const extra = most > 0 ? { $max: [0, { $min: [unlimited, most - least] }] } : unlimited
  const without = { $arrayToObject: othersOf(me) }
  return [
    { $set: { _now: { $toLong: '$$NOW' } } },
    JUDGED,
    // 1. a fresh document becomes the bucket; one X knew comes back empty, and so does one that is
    // not a bucket (repaired: a new identity); fill's stand-in (fresh and full) comes back full
    {
      $set: {
        _lost: known === 0 ? '$_bad' : { $or: [fresh, '$_bad', { $ne: ['$rid', known] }] },
        C: { $cond: [made, capacity, '$C'] },
        R: { $cond: [made, refillPerSecond, '$R'] },
        tk: { $cond: [made, { $cond: ['$_bad', 0, { $cond: [{ $eq: ['$full', true] }, capacity, known === 0 ? capacity : 0] }] }, '$tk'] },
        F: { $cond: [made, 0, '$F'] },
        S: { $cond: [made, '$_now', '$S'] },
        rid: { $cond: ['$_bad', newId, '$rid'] },
        h: { $cond: [made, EMPTY, { $ifNull: ['$h', EMPTY] }] },
        fresh: '$$REMOVE',
        full: '$$REMOVE',
      },
    },
    // 2. the request's capacity and refill: at 5b, once refilled at the old ones
    // 3. the fleet clock (the refill waits for the write-offs and X's report, step 5 applies it piece by piece)
    { $set: { _F: { $max: ['$F', { $min: [{ $add: ['$F', { $max: [0, { $subtract: ['$_now', '$S'] }] }] }, byCaller] }] } } },
    // 4. the others past their margin (what they held, and the latest margin passed, first)
    {
      $set: {
        _gone: sumOut(goneOf(me)),
        _goneUntil: { $min: ['$_F', { $max: ['$F', { $ifNull: [{ $max: { $map: { input: goneOf(me), in: writeOffAt('$$this.v') } } }, '$F'] }] }] },
        _spentUntil: { $min: ['$_F', { $max: ['$F', { $subtract: ['$_F', spentMs] }] }] },
      },
    },
    writeOffStage(me, '$_F', '$F'),
    // 5. X's report
    {
      $set: {
        _prev: { $cond: ['$_lost', 0, { $ifNull: [`$h.${me}.o`, 0] }] },
        _others: sumOut(othersOf(me)),
        _k: { $size: { $filter: { input: othersOf(me), cond: { $gt: ['$$this.v.o', 0] } } } },
      },
    },
    { $set: { _keep: { $min: [held, '$_prev'] } } },
    { $set: { _back: { $min: [give, { $subtract: ['$_prev', '$_keep'] }] } } },
    // the refill piece by piece (from F to the nearer of the two marks, on to the other, on to F')
    { $set: { _m1: { $min: ['$_spentUntil', '$_goneUntil'] }, _m2: { $max: ['$_spentUntil', '$_goneUntil'] } } },
    refillStage('$F', '$_m1'),
    refillStage('$_m1', '$_m2'),
    refillStage('$_m2', '$_F'),
    { $set: { F: '$_F', S: '$_now' } },
    // what X gives back, under C minus what is out
    { $set: { tk: { $min: [{ $subtract: [{ $subtract: ['$C', '$_others'] }, '$_keep'] }, { $add: ['$tk', '$_back'] }] } } },
    // 5b. a plan change: what was used stays used
    {
      $set: {
        tk: {
          $cond: [
            { $or: [{ $ne: ['$C', capacity] }, { $ne: ['$R', refillPerSecond] }] },
            { $min: [{ $subtract: [{ $subtract: [capacity, '$_others'] }, '$_keep'] }, { $add: ['$tk', { $subtract: [capacity, '$C'] }] }] },
            '$tk',
          ],
        },
        C: capacity,
        R: refillPerSecond,
      },
    },
    // 6. failOpen's charge
    { $set: { tk: { $subtract: ['$tk', charge] } } },
    // 7. the take: shared among the others holding a slice or hungry lately
    {
      $set: {
        _hungry: { $size: { $filter: { input: othersOf(me), cond: hungryOther } } },
        _sharing: { $size: { $filter: { input: othersOf(me), cond: { $or: [{ $gt: ['$$this.v.o', 0] }, hungryOther] } } } },
      },
    },
    { $set: { _granted: { $cond: [{ $gte: ['$tk', least] }, { $add: [least, extra] }, 0] } } },
    // (a take the asking call spends at once, spend, is not recorded)
    { $set: { tk: { $subtract: ['$tk', '$_granted'] }, _slice: { $add: ['$_keep', '$_granted'] }, _recorded: spend ? '$_keep' : { $add: ['$_keep', '$_granted'] } } },
    // X found the bucket short: denied, or it took the last whole token
    {
      $set: {
        _hungryMe: {
          $or: [
            { $and: [least > 0, { $eq: ['$_granted', 0] }] },
            { $and: [{ $gt: ['$_granted', 0] }, { $lt: ['$tk', 1] }] },
          ],
        },
      },
    },
    // 8. X's slice (and X listed with nothing while it is hungry)
    {
      $set: {
        h: {
          $switch: {
            branches: [
              { case: { $gt: ['$_recorded', 0] }, then: { $mergeObjects: [without, { [me]: { o: '$_recorded', a: '$F', l: leaseMs, d: { $cond: ['$_hungryMe', hungerUntil, -1] } } }] } },
              { case: '$_hungryMe', then: { $mergeObjects: [without, { [me]: { o: 0, d: hungerUntil } }] } },
            ],
            default: without,
          },
        },
      },
    },
    // 9. the expiry, and the answer
    { $set: { _longest: { $max: [leaseMs, { $max: { $map: { input: entries('$h'), in: '$$this.v.l' } } }] } } },
    {
      $set: {
        expiresAt: { $toDate: { $add: ['$_now', { $ceil: bucketTerms.keptAfterTake(PIPELINE, '$C', '$R', '$_longest') }] } },
        ans: { g: '$_granted', h: '$_slice', k: '$_k', n: '$_now', r: '$_bad', bl: blockLeftAt('$_now') },
      },
    },
    { $unset: TEMPORARY },
  ]
}

/**
 * bucketFill's pipeline: the bucket back to full (C - out). A document that is not a bucket is
 * replaced: by a full bucket of its C and R and a new identity when those two are sound, else by a
 * stand-in (fresh and full, identity newId) that the next take makes a full bucket of.
 */
function fillPipeline(newId) {
  const sizeSound = { $and: [whole('$C', 1, MAX_BUCKET_CAPACITY), { $cond: [{ $and: [{ $isNumber: '$R' }, { $gt: ['$R', 0] }] }, { $lt: ['$R', Number.POSITIVE_INFINITY] }, false] }] }
  const standIn = { $and: ['$_bad', { $not: [sizeSound] }] }
  const kept = { $cond: [{ $eq: [{ $type: '$expiresAt' }, 'date'] }, '$expiresAt', { $toDate: { $add: [{ $toLong: '$$NOW' }, bucketTerms.keptAfterTake(PIPELINE, 0, 1, 0)] } }] }
  const remade = (value, field) => ({ $cond: ['$_bad', { $cond: [standIn, '$$REMOVE', value] }, field] })
  return [
    JUDGED,
    {
      $set: {
        fresh: { $cond: [standIn, true, '$$REMOVE'] },
        full: { $cond: [standIn, true, '$$REMOVE'] },
        tk: remade(0, '$tk'),
        F: remade(0, '$F'),
        S: remade({ $toLong: '$$NOW' }, '$S'),
        h: remade(EMPTY, '$h'),
        C: { $cond: [standIn, '$$REMOVE', '$C'] },
        R: { $cond: [standIn, '$$REMOVE', '$R'] },
        rid: { $cond: ['$_bad', newId, '$rid'] },
        expiresAt: { $cond: ['$_bad', kept, '$expiresAt'] },
        ans: { $cond: ['$_bad', '$$REMOVE', '$ans'] },
      },
    },
    { $unset: ['_bad'] },
    writeOffStage(null),
    { $set: { tk: { $cond: [{ $eq: ['$fresh', true] }, '$$REMOVE', { $subtract: ['$C', sumOut(entries('$h'))] }] } } },
  ]
}

/** A bucket document as the operator's view answers it, its tokens refilled to store time `now` (or as they are). */
function viewOf(document, name, now) {
  if (document === null || document === undefined || document.fresh === true) return checkBucketUsage(null, name)
  const { C, R, tk, F, S } = document
  const holders = Object.values(document.h ?? {})
  const at = now === undefined ? F : F + Math.min(Math.max(0, now - S), (C / R) * 1000)
  let out = 0
  for (const holder of holders) if (holder.a + writeOffAfterMs(holder.l) >= at) out += holder.o
  const tokens = now === undefined || tk >= C - out ? tk : Math.min(C - out, tk + ((at - F) * R) / 1000)
  const expiresAt = document.expiresAt instanceof Date ? document.expiresAt.getTime() : null
  return checkBucketUsage({ capacity: C, refillPerSecond: R, tokens, out, expiresAt }, name)
}

/**
 * The three operations for a mongoStore over `records()` (the collection, asked for on first use);
 * `blockOps` the store's block operations (lib/stores/mongo-blocks.js), which stamp a new bucket.
 */
function bucketOperations(records, blockOps) {
  return {
    async bucketTake(request, roundTrip = () => {}) {
      const { name, key } = request
      const _id = documentId(name, key)
      const rid = request.newId ?? newRecordId()
      const pipeline = takePipeline(request, rid)
      const document = await createThenUpdate(
        async () => {
          roundTrip()
          return documentOf(await records().findOneAndUpdate({ _id }, pipeline, AFTER), `a bucket request for "${name}"`)
        },
        async () => {
          roundTrip()
          const made = await records().updateOne({ _id }, { $setOnInsert: { name, key, rid, fresh: true, expiresAt: new Date(Date.now() + FRESH_KEPT_MS) } }, UPSERT)
          // A bucket made after the key was blocked carries the block too.
          if (made?.upsertedCount > 0) await blockOps.stampNew(name, key, _id, roundTrip)
        },
        (attempts) => storeResponse(`quota store (MongoDB) lost the bucket record of "${name}" for key ${describe(key)}: not found after ${attempts} attempts to create it`),
      )
      const a = document.ans ?? {}
      const blockedMs = typeof a.bl === 'number' && a.bl > 0 ? { blockedMs: a.bl } : {}
      return checkBucketAnswer({ granted: a.g, held: a.h, tokens: document.tk, fleetMs: document.F, storeNowMs: a.n, recordId: document.rid, others: a.k, repaired: a.r, ...blockedMs }, request)
    },
    // One aggregate: the document and the store's time, read together; nothing written.
    async bucketRead({ name, key }) {
      const _id = documentId(name, key)
      const [document] = await records()
        .aggregate([{ $match: { _id, fresh: { $ne: true } } }, { $set: { _now: { $toLong: '$$NOW' } } }])
        .toArray()
      const why = document === undefined ? undefined : unsoundField(document)
      if (why !== undefined) throw unsoundBucketRecord('MongoDB', _id, name, key, why)
      return viewOf(document ?? null, name, document === undefined ? undefined : Number(document._now))
    },
    async bucketFill({ name, key }) {
      const reply = await records().findOneAndUpdate({ _id: documentId(name, key), fresh: { $ne: true } }, fillPipeline(newRecordId()), AFTER)
      return viewOf(documentOf(reply, `a bucket fill for "${name}"`), name, undefined)
    },

  }
}

module.exports = { bucketOperations }
