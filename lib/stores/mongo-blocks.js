'use strict'
// Blocks on MongoDB (lib/share/protocol.js: blockSet, blockClear, blockRead, keys; docs/blocking.md),
// in the quota store's collection:
//   { _id: 'block:' + part(name) + ':' + part(key), name, key,
//     until,      the block's end (store ms; 0: none, lifted)  level   the level
//     ended,      the latest end of a block (for the reset)    at      store ms of the latest write
//     rev,        the revision: every write adds one
//     expiresAt } a Date: ended + resetAfterMs (the TTL index of the collection removes it)
// Store time is `$$NOW` turned into ms by `$toLong` (lib/stores/mongo-bucket.js says why), and each
// write is one pipeline update of the one document, which MongoDB applies atomically. An unblock
// keeps the document (until 0, level 0) as long as a block's reset would: its revision orders the
// stamps below.
// A block is also stamped on the key's quota records and its fleet bucket's (`blk`: its end,
// `blkRev`: the revision it came with; a stamp of an older revision changes nothing), so that a
// reservation or a take, which answers its whole record, carries it with no call of its own; a
// record made later reads the block document once, as it is made (`stampNew`), so it carries it too.

const { checkBlockAnswer, checkKeysAnswer } = require('../share/protocol.js')
const { part, mongoBucketId } = require('./record-key.js')
const { storeResponse, documentOf, createThenUpdate } = require('./mongo-calls.js')

const AFTER = { returnDocument: 'after', includeResultMetadata: true }
const UPSERT = { upsert: true }
const NOW = { $toLong: '$$NOW' }
// A document a block write makes before its update, kept this long if that update never comes.
const FRESH_KEPT_MS = 60_000

const blockId = (name, key) => `block:${part(name)}:${part(key)}`
const escapeRegex = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
// The key's quota records (every period) and its fleet bucket's (lib/stores/mongo-bucket.js).
const keyRecords = (name, key) => ({ $or: [{ _id: { $regex: `^${escapeRegex(`${part(name)}:${part(key)}:`)}` } }, { _id: mongoBucketId(name, key) }] })
const or0 = (field) => ({ $ifNull: [field, 0] })

/** The pipeline of blockSet: the block's end pushed out to now + forMs (or the next level's). */
function setPipeline({ name, key, forMs, levels, resetAfterMs }) {
  const steps = [{ $set: { _now: NOW, _v: or0('$level'), _d: or0('$ended') } }]
  if (levels === undefined) {
    steps.push({ $set: { _f: forMs } })
  } else {
    const last = levels.length - 1
    steps.push(
      { $set: { _v: { $cond: [{ $gte: [{ $subtract: ['$_now', '$_d'] }, resetAfterMs] }, 0, '$_v'] } } },
      { $set: { _f: { $arrayElemAt: [{ $literal: levels }, { $min: ['$_v', last] }] }, _v: { $min: [{ $add: ['$_v', 1] }, last] } } },
    )
  }
  steps.push(
    { $set: { until: { $max: [or0('$until'), { $add: ['$_now', '$_f'] }] } } },
    {
      $set: {
        name,
        key,
        level: '$_v',
        ended: { $max: ['$_d', '$until'] },
        at: '$_now',
        rev: { $add: [or0('$rev'), 1] },
        expiresAt: { $toDate: { $add: [{ $max: ['$_d', '$until'] }, resetAfterMs] } },
        _now: '$$REMOVE',
        _v: '$$REMOVE',
        _d: '$$REMOVE',
        _f: '$$REMOVE',
        fresh: '$$REMOVE',
      },
    },
  )
  return steps
}

/** The pipeline of blockClear: no block, level 0; `was` what was left. */
const CLEAR = [
  { $set: { _now: NOW } },
  {
    $set: {
      was: { $max: [0, { $subtract: [or0('$until'), '$_now'] }] },
      until: 0,
      level: 0,
      at: '$_now',
      rev: { $add: [or0('$rev'), 1] },
      _now: '$$REMOVE',
      fresh: '$$REMOVE',
    },
  },
]

/** A quota record's stamp of a block document's end and revision, unless it has a newer one. */
const stampOf = (until, rev) => [
  {
    $set: {
      blk: { $cond: [{ $lt: [or0('$blkRev'), rev] }, until, '$blk'] },
      blkRev: { $max: [or0('$blkRev'), rev] },
    },
  },
]

/**
 * A block document's answer: what is left of it at store time `now`, and its level, 0 once the
 * document is past its expiresAt (the block's end and resetAfterMs): the TTL monitor deletes it
 * only within a minute of that.
 */
function answerOf(document, now, name) {
  const until = document?.until
  const blockedMs = typeof until === 'number' && typeof now === 'number' ? Math.max(0, until - now) : 0
  const forgotten = document?.expiresAt instanceof Date && typeof now === 'number' && now >= document.expiresAt.getTime()
  return checkBlockAnswer({ blockedMs, level: forgotten ? 0 : (document?.level ?? 0) }, name)
}

/** The MongoDB operations of blocks on `records()`, the store's collection. */
function blockOperations(records) {
  const noTrip = () => {}
  /** A block write: the document made first if there is none, then `pipeline` applied to it. */
  async function write(name, key, pipeline, roundTrip) {
    const _id = blockId(name, key)
    return createThenUpdate(
      async () => {
        roundTrip()
        return documentOf(await records().findOneAndUpdate({ _id }, pipeline, AFTER), `a block of "${name}"`)
      },
      () => {
        roundTrip()
        return records().updateOne({ _id }, { $setOnInsert: { name, key, fresh: true, expiresAt: new Date(Date.now() + FRESH_KEPT_MS) } }, UPSERT)
      },
      (attempts) => storeResponse(`quota store (MongoDB) lost the block record of "${name}" for key ${key}: not found after ${attempts} attempts to create it`),
    )
  }

  /** Stamps the key's quota records with the document's end and revision. */
  async function stamp(name, key, document, roundTrip) {
    roundTrip()
    await records().updateMany(keyRecords(name, key), stampOf(document.until, document.rev))
  }

  return {
    async blockSet(request, roundTrip = noTrip) {
      const document = await write(request.name, request.key, setPipeline(request), roundTrip)
      await stamp(request.name, request.key, document, roundTrip)
      return answerOf(document, document.at, request.name)
    },
    async blockClear({ name, key }, roundTrip = noTrip) {
      const document = await write(name, key, CLEAR, roundTrip)
      await stamp(name, key, document, roundTrip)
      return checkBlockAnswer({ blockedMs: document.was ?? 0, level: 0 }, name)
    },
    async blockRead({ name, key }, roundTrip = noTrip) {
      roundTrip()
      const [document] = await records()
        .aggregate([{ $match: { _id: blockId(name, key), fresh: { $ne: true } } }, { $set: { _now: NOW } }])
        .toArray()
      return answerOf(document, Number(document?._now), name)
    },
    /** A quota or bucket record just made (`_id`) stamped with the key's block document, if it has one. */
    async stampNew(name, key, _id, roundTrip = noTrip) {
      roundTrip()
      const document = await records().findOne({ _id: blockId(name, key), fresh: { $ne: true } })
      if (document === null || typeof document.rev !== 'number') return
      roundTrip()
      await records().updateOne({ _id }, stampOf(document.until, document.rev))
    },
    async keys({ name, blocked, limit }, roundTrip = noTrip) {
      // Prefix queries on _id: ranges of its index, at most `limit` documents each.
      const out = new Map()
      roundTrip()
      const blocks = await records()
        .aggregate([{ $match: { _id: { $regex: `^${escapeRegex(`block:${part(name)}:`)}` }, fresh: { $ne: true } } }, { $limit: limit }, { $set: { _now: NOW } }])
        .toArray()
      for (const document of blocks) {
        const { blockedMs, level } = answerOf(document, Number(document._now), name)
        if (blocked ? blockedMs > 0 : blockedMs > 0 || level > 0) out.set(document.key, blockedMs)
      }
      if (!blocked) {
        for (const prefix of [`${part(name)}:`, `bucket:${part(name)}:`]) {
          if (out.size >= limit) break
          roundTrip()
          const found = await records().find({ _id: { $regex: `^${escapeRegex(prefix)}` } }, { projection: { key: 1 } }).limit(limit).toArray()
          for (const { key } of found) if (typeof key === 'string' && !out.has(key) && out.size < limit) out.set(key, 0)
        }
      }
      return checkKeysAnswer([...out].slice(0, limit).map(([key, blockedMs]) => ({ key, blockedMs })), name)
    },
  }
}

/** The block stamped on a record (`blk`) left at store time `now` (a pipeline expression), in ms: 0 without one. */
const blockLeftAt = (now) => ({ $max: [0, { $subtract: [or0('$blk'), now] }] })

/** The reservation pipeline's field of the block left on the record, in ms at store time (removed when none). */
const RESERVED_BLOCK = { _bl: { $cond: [{ $gt: [blockLeftAt(NOW), 0] }, blockLeftAt(NOW), '$$REMOVE'] } }

module.exports = { blockOperations, blockLeftAt, RESERVED_BLOCK }
