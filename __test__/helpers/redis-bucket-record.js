'use strict'

// The Redis fleet bucket record as docs/several-instances.md documents it, read and written here
// with Buffer's own methods (not the store's code), for tests that look into a record or write a
// damaged one. Little-endian: C u32, R f64, tk f64, F f64, S f64, i u48 (42 bytes), then per
// instance listed: its name's length u16, the name, flags u8 (1 a slice, 2 e, 4 d), with a slice
// o f64, a f64, l u32, with d d f64.

const HEAD_BYTES = 42

/** The record's fields { C, R, tk, F, S, i, instances: { X: { o?, a?, l?, e?, d? } } } from its bytes; throws when they are not a record. */
function decodeBucketRecord(bytes) {
  const b = Buffer.from(bytes)
  if (b.length < HEAD_BYTES) throw new Error(`a bucket record has at least ${HEAD_BYTES} bytes; this one ${b.length}`)
  const record = { C: b.readUInt32LE(0), R: b.readDoubleLE(4), tk: b.readDoubleLE(12), F: b.readDoubleLE(20), S: b.readDoubleLE(28), i: b.readUIntLE(36, 6), instances: {} }
  let at = HEAD_BYTES
  while (at < b.length) {
    const size = b.readUInt16LE(at)
    const name = b.toString('utf8', at + 2, at + 2 + size)
    const flags = b.readUInt8(at + 2 + size)
    at += 3 + size
    const entry = {}
    if (flags & 1) {
      Object.assign(entry, { o: b.readDoubleLE(at), a: b.readDoubleLE(at + 8), l: b.readUInt32LE(at + 16) })
      at += 20
    }
    if (flags & 2) entry.e = 1
    if (flags & 4) {
      entry.d = b.readDoubleLE(at)
      at += 8
    }
    record.instances[name] = entry
  }
  return record
}

/** The bytes of a record with these fields (instances as decodeBucketRecord answers them). */
function encodeBucketRecord({ C, R, tk, F, S, i, instances = {} }) {
  const head = Buffer.alloc(HEAD_BYTES)
  head.writeUInt32LE(C, 0)
  head.writeDoubleLE(R, 4)
  head.writeDoubleLE(tk, 12)
  head.writeDoubleLE(F, 20)
  head.writeDoubleLE(S, 28)
  head.writeUIntLE(i, 36, 6)
  const parts = [head]
  for (const [name, entry] of Object.entries(instances)) {
    const nameBytes = Buffer.from(name)
    const flags = (entry.o !== undefined ? 1 : 0) | (entry.e ? 2 : 0) | (entry.d !== undefined ? 4 : 0)
    const part = Buffer.alloc(3 + nameBytes.length + (flags & 1 ? 20 : 0) + (flags & 4 ? 8 : 0))
    part.writeUInt16LE(nameBytes.length, 0)
    nameBytes.copy(part, 2)
    let at = 2 + nameBytes.length
    part.writeUInt8(flags, at++)
    if (flags & 1) {
      part.writeDoubleLE(entry.o, at)
      part.writeDoubleLE(entry.a, at + 8)
      part.writeUInt32LE(entry.l, at + 16)
      at += 20
    }
    if (flags & 4) part.writeDoubleLE(entry.d, at)
    parts.push(part)
  }
  return Buffer.concat(parts)
}

/**
 * Rewrites the record at `redisKey` through ioredis `client` with `change(fields)` applied to its
 * decoded fields (or `bytes(buffer)` to its bytes), keeping its TTL.
 */
async function rewriteBucketRecord(client, redisKey, { change, bytes }) {
  const before = await client.getBuffer(redisKey)
  const next = bytes ? bytes(before) : encodeBucketRecord(change(decodeBucketRecord(before)) ?? decodeBucketRecord(before))
  await client.set(redisKey, next, 'KEEPTTL')
}

module.exports = { decodeBucketRecord, encodeBucketRecord, rewriteBucketRecord, HEAD_BYTES }
