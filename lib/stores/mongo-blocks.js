'use strict'
// Blocks on MongoDB (lib/share/protocol.js: blockSet, blockClear, blockRead, keys; docs/blocking.md),
// in the quota store's collection:
//   { _id: 'block:' + part(name) + ':' + part(key), name, key,
//     until,      the block's end (ms since the epoch)       level   the level
//     ended,      the latest end of a block (for the reset)  rev     a revision, for the write
//     expiresAt } a Date: ended + resetAfterMs (the TTL index of the collection removes it)
// A block is also stamped on the key's quota records (`blk`: its end), so that a reservation,
// which answers its whole record, carries it with no call of its own. Times are this process's
// wall clock (the store's own has no answer in an update here; the hosts of a fleet keep theirs in step).

const { checkBlockAnswer, checkKeysAnswer } = require('../share/protocol.js')
const { part } = require('./record-key.js')
const { storeResponse } = require('./mongo-calls.js')

const ATTEMPTS = 8

const blockId = (name, key) => `block:${part(name)}:${part(key)}`
const escapeRegex = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** What is left of a block ending at `until` (ms), by this process's wall clock. */
function leftOf(until) {
  return typeof until === 'number' ? Math.max(0, until - Date.now()) : 0
}

/** The MongoDB operations of blocks on `records()`, the store's collection. */
function blockOperations(records) {
  const noTrip = () => {}
  /** Stamps the key's quota records with the block's end (0: none). */
  async function stamp(name, key, until, roundTrip = noTrip) {
    roundTrip()
    await records().updateMany({ _id: { $regex: `^${escapeRegex(`${part(name)}:${part(key)}:`)}` } }, { $set: { blk: until } })
  }

  async function read(name, key, roundTrip = noTrip) {
    roundTrip()
    return records().findOne({ _id: blockId(name, key) })
  }

  return {
    async blockSet({ name, key, forMs, levels, resetAfterMs }, roundTrip = noTrip) {
      const _id = blockId(name, key)
      for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
        const found = await read(name, key, roundTrip)
        const now = Date.now()
        let level = found?.level ?? 0
        let ms = forMs
        if (levels !== undefined) {
          if (now - (found?.ended ?? 0) >= resetAfterMs) level = 0
          ms = levels[Math.min(level, levels.length - 1)]
          level = Math.min(level + 1, levels.length - 1)
        }
        const until = Math.max(found?.until ?? 0, now + ms)
        const ended = Math.max(found?.ended ?? 0, until)
        const fields = { name, key, until, level, ended, rev: (found?.rev ?? 0) + 1, expiresAt: new Date(ended + resetAfterMs) }
        roundTrip()
        try {
          const written =
            found === null
              ? await records().insertOne({ _id, ...fields })
              : await records().updateOne({ _id, rev: found.rev ?? { $exists: false } }, { $set: fields })
          if (found !== null && written.matchedCount === 0) continue
        } catch (error) {
          if (error?.code === 11000) continue // another writer made it first
          throw error
        }
        await stamp(name, key, until, roundTrip)
        return checkBlockAnswer({ blockedMs: leftOf(until), level }, name)
      }
      throw storeResponse(`quota store (MongoDB) could not write the block of "${name}" for key ${key}: ${ATTEMPTS} writers raced`)
    },
    async blockClear({ name, key }, roundTrip = noTrip) {
      roundTrip()
      const found = await records().findOneAndDelete({ _id: blockId(name, key) }, { includeResultMetadata: false })
      const document = found !== null && typeof found === 'object' && 'value' in found && !('_id' in found) ? found.value : found
      await stamp(name, key, 0, roundTrip)
      return checkBlockAnswer({ blockedMs: leftOf(document?.until), level: 0 }, name)
    },
    async blockRead({ name, key }, roundTrip = noTrip) {
      const found = await read(name, key, roundTrip)
      return checkBlockAnswer({ blockedMs: leftOf(found?.until), level: found?.level ?? 0 }, name)
    },
    async keys({ name, blocked, limit }, roundTrip = noTrip) {
      // Prefix queries on _id: ranges of its index, at most `limit` documents each.
      const out = new Map()
      roundTrip()
      const blocks = await records().find({ _id: { $regex: `^${escapeRegex(`block:${part(name)}:`)}` } }).limit(limit).toArray()
      for (const document of blocks) {
        const blockedMs = leftOf(document.until)
        if (!blocked || blockedMs > 0) out.set(document.key, blockedMs)
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

module.exports = { blockOperations, leftOf }
