'use strict'
// The fleet bucket's two operations on MongoDB (lib/quota-store.js: cellsAcquire, cellsRenew).
// One document per (name, key) in the quota collection:
//   { _id: 'b:' + part(name) + ':' + part(key),
//     cap,  capacity;  ft, free tokens (a double);  rid, the record's identity;  R, the refill/s
//     h: { <X>: { c: cells, t: store ms of X's last renewing call, l: X's leaseMs } },
//     w: { <X>: store ms X asked for a fair share },
//     ans: { g, tk, h, f, wt, n }  the latest acquire's answer, read back from its own update
//     expiresAt }  a Date for the TTL index: pushed out (never in) to
//                  max(C / R, max l * 1.1 + 1 s) + 60 s after each write, by this process's clock
//
// Store time is `$$NOW` turned into ms by `$toLong` before any arithmetic: the MongoDB-compatible
// test server compares and adds Date values computed from $$NOW wrongly (a comparison of $$NOW
// with a Date is false both ways; storing $$NOW fails), while $toLong of $$NOW is right; on MongoDB
// the two are the same. Every operation's step runs in one update of one document, which MongoDB
// applies atomically: no read-modify-write race between processes.

const { checkCellsAnswer, checkRenewAnswer, newRecordId } = require('../quota-store.js')
const { QuotaClockError } = require('../errors.js')
const { describe } = require('../validate.js')
const { part } = require('./record-key.js')

const DUPLICATE_KEY = 11000
const ATTEMPTS = 3
const NEVER_REFILLS_MS = 400 * 86_400_000
const AFTER = { returnDocument: 'after', includeResultMetadata: true }
const UPSERT = { upsert: true }

const recordId = (name, key) => `b:${part(name)}:${part(key)}`

// Expressions over the document, one store time `$_now` (ms) fixed by the first stage.
const entries = (field) => ({ $objectToArray: { $ifNull: [field, {}] } })
const sumCells = { $sum: { $map: { input: entries('$h'), in: '$$this.v.c' } } }
const without = (field, me) => ({ $arrayToObject: { $filter: { input: entries(field), cond: { $ne: ['$$this.k', me] } } } })
const NOW = { $set: { _now: { $toLong: '$$NOW' } } }

/** Holders other than me past their margin lose their cells; waiters other than me past their lease are forgotten. */
function reclaimStages(me, leaseMs) {
  const margin = { $add: ['$$this.v.t', { $multiply: [1.1, '$$this.v.l'] }, 1000] }
  const leaseOf = {
    $ifNull: [{ $arrayElemAt: [{ $map: { input: { $filter: { input: entries('$h'), as: 'y', cond: { $eq: ['$$y.k', '$$this.k'] } } }, as: 'y', in: '$$y.v.l' } }, 0] }, leaseMs],
  }
  return [
    { $set: { h: { $arrayToObject: { $filter: { input: entries('$h'), cond: { $or: [{ $eq: ['$$this.k', me] }, { $lte: ['$_now', margin] }] } } } } } },
    { $set: { w: { $arrayToObject: { $filter: { input: entries('$w'), cond: { $or: [{ $eq: ['$$this.k', me] }, { $lte: ['$_now', { $add: ['$$this.v', leaseOf] }] }] } } } } } },
  ]
}

/** How long the record is kept after this write, by this process's clock. */
function keptUntil(capacity, refillPerSecond, leaseMs) {
  const refill = refillPerSecond > 0 ? Math.min(Math.ceil((capacity / refillPerSecond) * 1000), NEVER_REFILLS_MS) : NEVER_REFILLS_MS
  return new Date(Date.now() + Math.max(refill, leaseMs * 1.1 + 1000) + 60_000)
}

/** The record's time to live after a renewal, from its own capacity and refill: ms. */
function keptFor(leaseMs) {
  const refill = { $cond: [{ $gt: ['$R', 0] }, { $min: [{ $ceil: { $multiply: [{ $divide: ['$cap', '$R'] }, 1000] } }, NEVER_REFILLS_MS] }, NEVER_REFILLS_MS] }
  return { $add: [{ $max: [refill, leaseMs * 1.1 + 1000] }, 60_000] }
}

/** cellsAcquire's steps (lib/quota-store.js) as one update pipeline. */
function acquirePipeline({ capacity, refillPerSecond, instance: me, leaseMs, held, recordId: known }, expiresAt) {
  const mine = { $ifNull: [`$h.${me}.c`, 0] }
  const holdersNow = { $map: { input: { $filter: { input: entries('$h'), cond: { $gt: ['$$this.v.c', 0] } } }, in: '$$this.k' } }
  const waitersNow = { $map: { input: entries('$w'), in: '$$this.k' } }
  const others = { $anyElementTrue: [{ $map: { input: waitersNow, in: { $ne: ['$$this', me] } } }] }
  const heldAfter = { $add: ['$_hx', '$_take'] }
  return [
    NOW,
    {
      $set: {
        ft: { $cond: [{ $eq: ['$cap', capacity] }, '$ft', { $max: [0, { $min: ['$ft', { $subtract: [capacity, sumCells] }] }] }] },
        cap: capacity,
        R: refillPerSecond,
        _lost: { $and: [{ $ne: [known, 0] }, { $ne: ['$rid', known] }] },
      },
    },
    ...reclaimStages(me, leaseMs),
    { $set: { _hx: { $cond: ['$_lost', 0, { $min: [mine, held] }] }, _others: { $subtract: [sumCells, mine] } } },
    { $set: { _hx: { $min: ['$_hx', { $max: [0, { $subtract: ['$cap', '$_others'] }] }] } } },
    {
      $set: {
        _free: { $max: [0, { $subtract: [{ $subtract: ['$cap', '$_others'] }, '$_hx'] }] },
        _waiting: { $cond: [others, 1, 0] },
        _fair: { $ceil: { $divide: ['$cap', { $size: { $setUnion: [holdersNow, waitersNow, [me]] } }] } },
      },
    },
    { $set: { _take: { $cond: [{ $eq: ['$_waiting', 1] }, { $max: [0, { $min: ['$_free', { $subtract: ['$_fair', '$_hx'] }] }] }, '$_free'] } } },
    { $set: { _tokens: { $cond: [{ $gt: ['$_free', 0] }, { $min: ['$_take', { $divide: [{ $multiply: ['$ft', '$_take'] }, '$_free'] }] }, 0] } } },
    {
      $set: {
        ft: { $max: [0, { $subtract: ['$ft', '$_tokens'] }] },
        h: { $mergeObjects: ['$h', { [me]: { c: heldAfter, t: '$_now', l: leaseMs } }] },
        w: { $cond: [{ $gt: ['$_others', 0] }, { $mergeObjects: [{ $ifNull: ['$w', {}] }, { [me]: '$_now' }] }, without('$w', me)] },
        ans: { g: '$_take', tk: '$_tokens', h: heldAfter, f: '$_fair', wt: '$_waiting', n: '$_now' },
        expiresAt: { $max: ['$expiresAt', expiresAt] },
      },
    },
    { $unset: ['_now', '_lost', '_hx', '_others', '_free', '_waiting', '_fair', '_take', '_tokens'] },
  ]
}

/** One key's renewal as one update pipeline. */
function renewPipeline({ instance: me, leaseMs }, { held, tokens }, sentAt) {
  const mine = { $ifNull: [`$h.${me}.c`, 0] }
  return [
    NOW,
    ...reclaimStages(me, leaseMs),
    { $set: { _newH: { $min: [mine, held] }, ft: { $add: ['$ft', { $min: [tokens, { $subtract: [mine, { $min: [mine, held] }] }] }] } } },
    {
      $set: {
        h: { $cond: [{ $gt: ['$_newH', 0] }, { $mergeObjects: ['$h', { [me]: { c: '$_newH', t: '$_now', l: leaseMs } }] }, without('$h', me)] },
        w: { $cond: [{ $gt: ['$_newH', 0] }, { $ifNull: ['$w', {}] }, without('$w', me)] },
      },
    },
    { $set: { ft: { $max: [0, { $min: ['$ft', { $subtract: ['$cap', sumCells] }] }] }, expiresAt: { $max: ['$expiresAt', { $add: [sentAt, keptFor(leaseMs)] }] } } },
    { $unset: ['_now', '_newH'] },
  ]
}

function storeResponse(message) {
  return new QuotaClockError('ERR_STORE_RESPONSE', message)
}

/** The two operations for a mongoStore over `records()` (the collection, asked for on first use). */
function cellsOperations(records) {
  return {
    async cellsAcquire(request) {
      const { name, key, capacity, refillPerSecond, initial, leaseMs } = request
      const _id = recordId(name, key)
      const expiresAt = keptUntil(capacity, refillPerSecond, leaseMs)
      const pipeline = acquirePipeline(request, expiresAt)
      // Created first, then updated without upsert (the reserve's reason: lib/shared/mongo.js).
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        const reply = await records().findOneAndUpdate({ _id }, pipeline, AFTER)
        if (typeof reply !== 'object' || reply === null || !('value' in reply)) {
          throw storeResponse(`quota store (MongoDB) answered a cells request for "${name}" with ${describe(reply)}; expected a findOneAndUpdate result`)
        }
        const document = reply.value
        if (document !== null) {
          const a = document.ans ?? {}
          return checkCellsAnswer({ granted: a.g, tokens: a.tk, held: a.h, fair: a.f, waiting: a.wt, recordId: document.rid, storeNowMs: a.n }, request)
        }
        try {
          await records().updateOne({ _id }, { $setOnInsert: { name, key, cap: capacity, ft: initial, rid: newRecordId(), R: refillPerSecond, h: {}, w: {}, expiresAt } }, UPSERT)
        } catch (error) {
          if (!error || error.code !== DUPLICATE_KEY) throw error
        }
      }
      throw storeResponse(`quota store (MongoDB) lost the cells record of "${name}" for key ${describe(key)}: not found after ${ATTEMPTS} attempts to create it`)
    },

    // Two round trips: one unordered bulkWrite, then one aggregate reading every key's document
    // back with the store's time. The keys are grouped by what they say (held, tokens, whether
    // they name an identity): one updateMany per group, whose pipeline is that group's step and
    // whose filter is { _id: { $in: the group's records }, rid: { $in: their identities } }. A
    // tick's renewals say few different things, so the statements are few and the driver sends
    // them as one update command (it splits only past 100,000 statements or 48 MB: a pipeline is
    // ~2.5 kB, a key ~60 bytes of filter).
    // Atomic per key: each key's whole step (reclaim, keep, free, tokens) is one pipeline update of
    // its one document, which MongoDB applies to each document atomically (an updateMany is atomic
    // per document, not across them: that is all a key needs).
    // The identity filter: a record remade under another identity matches only if that new random
    // identity (< 2^48) equals one of the group's others; and even then the step changes nothing
    // that matters, since X holds nothing in a record it has not acquired in (newH = 0, no tokens
    // added): the filter saves the write, the answer is decided by the read back, which compares
    // each key's identity exactly.
    // Correct read back: what the answer needs of X's own holding cannot change between the two
    // round trips (only X writes h.X, and another process may take it only after
    // t:X + 1.1 * l + 1 s, t:X just set); waiting and fair read a moment later are as fresh as a
    // later renewal's. A record remade in between reads as another identity: held 0.
    async cellsRenew(request) {
      const { name, instance, keys } = request
      if (keys.length === 0) return checkRenewAnswer({ storeNowMs: 0, keys: [] }, request)
      const sentAt = new Date()
      const ids = keys.map((one) => recordId(name, one.key))
      const groups = new Map()
      keys.forEach((one, at) => {
        const said = `${one.held}/${one.tokens}/${one.recordId === 0}`
        if (!groups.has(said)) groups.set(said, { one, ids: [], rids: [] })
        const group = groups.get(said)
        group.ids.push(ids[at])
        group.rids.push(one.recordId)
      })
      const operations = [...groups.values()].map((group) => ({
        updateMany: {
          filter: group.one.recordId === 0 ? { _id: { $in: group.ids } } : { _id: { $in: group.ids }, rid: { $in: group.rids } },
          update: renewPipeline(request, group.one, sentAt),
        },
      }))
      await records().bulkWrite(operations, { ordered: false })
      const holding = { $filter: { input: entries('$h'), cond: { $gt: ['$$this.v.c', 0] } } }
      const waiters = { $map: { input: entries('$w'), in: '$$this.k' } }
      const compact = {
        _id: 1,
        r: '$rid',
        c: '$cap',
        h: { $ifNull: [`$h.${instance}.c`, 0] },
        n: { $size: { $setUnion: [{ $map: { input: holding, in: '$$this.k' } }, waiters] } },
        wt: { $cond: [{ $anyElementTrue: [{ $map: { input: waiters, in: { $ne: ['$$this', instance] } } }] }, 1, 0] },
      }
      const [read] = await records()
        .aggregate([{ $match: { _id: { $in: ids } } }, { $facet: { docs: [{ $project: compact }] } }, { $set: { now: { $toLong: '$$NOW' } } }])
        .toArray()
      if (!read || !Array.isArray(read.docs)) return checkRenewAnswer(read, request)
      const byId = new Map(read.docs.map((document) => [document._id, document]))
      const answers = keys.map((one, at) => {
        const document = byId.get(ids[at])
        if (document === undefined || (one.recordId !== 0 && document.r !== one.recordId)) return { held: 0, waiting: 0, fair: 0 }
        return { held: document.h, waiting: document.wt, fair: Math.ceil(document.c / Math.max(1, document.n)) }
      })
      return checkRenewAnswer({ storeNowMs: Number(read.now), keys: answers }, request)
    },
  }
}

module.exports = { cellsOperations }
