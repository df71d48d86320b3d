'use strict'
// Blocks of a KeyedQuotaClock (the `block` option, block(key, forMs), unblock(key)): which keys are
// blocked and until when, each key's level and its run of denials. Times are the limiter's
// timeline (real elapsed time, a suspend credited as its buckets are), so a wall clock step
// neither shortens nor lengthens a block. A blocked key's call is denied here, before any native
// call or store call. A blocked key is marked in the native table (`pin`) while its block lasts,
// so that it is never dropped; an unref'd timer at the earliest end unmarks a key left alone. A
// zone's blocks are the zone file's (lib/keyed/zone-blocks.js).

const zlib = require('node:zlib')
const { coded, describe, isPlainObject, readOptions, typeError, rangeError, checkNumber } = require('../common/validate.js')

const BLOCK_KEYS = ['after', 'withinMs', 'forMs', 'resetAfterMs']
const DAY_MS = 24 * 60 * 60 * 1000
const MAX_BLOCK_MS = 365 * DAY_MS
const DEFAULT_RESET_AFTER_MS = DAY_MS
// The longest delay setTimeout takes as it is (a longer one fires at once).
const MAX_TIMER_MS = 2 ** 31 - 1

// Snapshot format version 2: a version-1 image of the keys' buckets and quota use (the core's,
// src/keyed/snapshot.rs) followed by the blocks and levels:
//   "QCKS" | version u16 = 2 | flags u16 = 0 | keys image length u32 | keys image (version 1) |
//   entry count u32 | per entry: key length u16 (UTF-16 code units) | key UTF-16LE |
//   block left ms f64 (0: not blocked) | level u16 | ms since its last block ended f64 (-1: none,
//   or blocked now) | trailer CRC-32 (IEEE) of every byte before it, u32
const MAGIC = 'QCKS'
const BLOCKS_VERSION = 2
const ENVELOPE_HEADER_BYTES = 12
const TRAILER_BYTES = 4

/**
 * A snapshot's blocks and levels: [{ key, leftMs, level, sinceEndMs }] for every key blocked
 * (`leftMsOf(key)` > 0, among `blockedKeys`) or with a level in `levels` (key -> { level,
 * endedMs }), at `now`.
 */
function blockEntries(blockedKeys, leftMsOf, levels, now) {
  const out = []
  for (const key of new Set([...blockedKeys, ...levels.keys()])) {
    const leftMs = leftMsOf(key)
    const entry = levels.get(key)
    const level = entry === undefined ? 0 : entry.level
    if (leftMs === 0 && level === 0) continue
    const sinceEndMs = leftMs > 0 || entry === undefined ? -1 : Math.max(0, now - entry.endedMs)
    out.push({ key, leftMs, level, sinceEndMs })
  }
  return out
}

/** The `block` option read and checked: `{ after, withinMs, forMs: number[], resetAfterMs }`. */
function parseBlockOptions(value) {
  if (!isPlainObject(value)) throw typeError('ERR_INVALID_OPTION', 'block', 'an object { after, withinMs, forMs, resetAfterMs? }', value)
  const read = readOptions(value, BLOCK_KEYS, 'block')
  const after = positiveInteger(read.after, 'block.after', Number.MAX_SAFE_INTEGER)
  const withinMs = positiveInteger(read.withinMs, 'block.withinMs', Number.MAX_SAFE_INTEGER)
  const resetAfterMs = read.resetAfterMs === undefined ? DEFAULT_RESET_AFTER_MS : positiveInteger(read.resetAfterMs, 'block.resetAfterMs', Number.MAX_SAFE_INTEGER)
  let forMs
  if (Array.isArray(read.forMs)) {
    if (read.forMs.length === 0) throw coded(RangeError, 'ERR_INVALID_OPTION', 'block.forMs must be a number of milliseconds or a non-empty array of them; received an empty array')
    forMs = read.forMs.map((ms, i) => positiveInteger(ms, `block.forMs[${i}]`, MAX_BLOCK_MS))
  } else {
    forMs = [positiveInteger(read.forMs, 'block.forMs', MAX_BLOCK_MS)]
  }
  return { after, withinMs, forMs, resetAfterMs }
}

/** A positive safe integer up to `max` (ERR_INVALID_OPTION naming `name`). */
function positiveInteger(value, name, max, code = 'ERR_INVALID_OPTION') {
  checkNumber(value, name, code)
  if (!Number.isSafeInteger(value) || value < 1 || value > max) {
    const most = max === MAX_BLOCK_MS ? ' up to 365 days (31536000000)' : ''
    throw rangeError(code, name, `a positive safe integer${most}`, value)
  }
  return value
}

/** block(key, forMs)'s forMs: a positive safe integer up to 365 days (ERR_INVALID_ARG). */
function checkBlockMs(forMs) {
  return positiveInteger(forMs, 'forMs', MAX_BLOCK_MS, 'ERR_INVALID_ARG')
}

class BlockBook {
  // The block option (undefined: manual blocks only) and the limiter's monotonic clock, in ms.
  #policy
  #now
  #maxKeys
  // key -> end of its block (monotonic ms); only keys blocked now (or until the next look).
  #until = new Map()
  // key -> { level, endedMs }: a key's level and when its last block ends or ended.
  #levels = new Map()
  // key -> { startMs, count }: a run of denials not yet blocked.
  #runs = new Map()
  // A shared limiter's store (lib/keyed/shared-table.js's sendBlock), else undefined: its blocks
  // are the fleet's, written in the background and asked again at most once a second.
  #store
  // key -> blockSet calls under way (an answer of the store read before it lands ends no block).
  #writing = new Map()
  // key -> when the store was last asked about the key's block (monotonic ms).
  #asked = new Map()
  // The latest reading of the clock (snapshot() reads none).
  #seen = 0
  // pin(key, blocked): marks a held key blocked (never dropped) or not in the native table.
  #pin
  // The timer at the earliest end of a block (unref'd), and that end (Infinity: none set).
  #timer
  #timerAt = Infinity
  // Counters for stats(): calls a block denied (not counted as denied natively: `short`; of those,
  // counted as allowed natively: `unallowed`), blocks started.
  blocked = 0
  short = 0
  unallowed = 0
  blocks = 0

  constructor(policy, now, maxKeys, store, pin) {
    this.#policy = policy
    this.#now = () => (this.#seen = now())
    this.#maxKeys = maxKeys
    this.#store = store
    this.#pin = pin
  }

  /** Stops the timer (a zone's book closes its levels file). */
  close() {
    clearTimeout(this.#timer)
    this.#timerAt = Infinity
  }

  /** `key`'s block runs until `until`: the key is held while it lasts. */
  #started(key, until) {
    this.#pin(key, true)
    this.#schedule(until)
  }

  /** The timer set for `until` unless set for earlier (and not yet past). */
  #schedule(until) {
    if (until >= this.#timerAt && this.#timerAt > this.#seen) return
    clearTimeout(this.#timer)
    this.#timerAt = until
    // (A weak reference: a pending timer keeps no dropped limiter alive.)
    const book = new WeakRef(this)
    this.#timer = setTimeout(() => book.deref()?.letGo(), Math.min(MAX_TIMER_MS, Math.max(0, until - this.#seen)))
    this.#timer.unref()
  }

  /** `key`'s block ended: the key may be dropped again. */
  #ended(key) {
    this.#until.delete(key)
    this.#asked.delete(key)
    this.#pin(key, false)
    if (this.#until.size === 0) this.close()
  }

  /**
   * Lets go of every key whose block has ended (and sets the timer for the next end): true if
   * there was one. The timer's work at the earliest end, and the table's when it is full
   * (ERR_KEY_LIMIT): a manual clock moved past a block's end, or a loop that never yields, fires
   * no timer.
   */
  letGo() {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#timerAt = Infinity
    if (this.#until.size === 0) return false
    let now
    try {
      now = this.#now()
    } catch {
      // A clock that fails here leaves each block to end at its key's next look.
      return false
    }
    let next = Infinity
    let ended = false
    for (const [key, until] of this.#until) {
      if (until <= now) {
        this.#ended(key)
        ended = true
      } else next = Math.min(next, until)
    }
    if (next !== Infinity) this.#schedule(next)
    return ended
  }

  /**
   * The fleet's block of `key` as the store answered it: blockedMs left (0: none, or lifted). (A
   * block learnt so is not one this process started: `blocks` counts those alone, as a zone's.)
   */
  fleet(key, blockedMs) {
    if (blockedMs > 0) {
      const now = this.#now()
      const until = now + blockedMs
      this.#until.set(key, until)
      this.#started(key, until)
      this.#asked.set(key, now)
      const levels = this.#levels.get(key)
      if (levels !== undefined) levels.endedMs = Math.max(levels.endedMs, until)
      this.#runs.delete(key)
    } else if (!this.#writing.has(key) && this.#until.has(key)) {
      this.#ended(key)
    }
  }

  /**
   * A blockSet sent to the store; its answer is the fleet's block, and its level the key's here.
   * Resolves to the answer, or undefined when none came.
   */
  #write(key, fields) {
    this.#writing.set(key, (this.#writing.get(key) ?? 0) + 1)
    this.#asked.set(key, this.#now())
    const written = this.#store.sendBlock('blockSet', { key, resetAfterMs: this.#policy?.resetAfterMs ?? DEFAULT_RESET_AFTER_MS, ...fields }, (answer) => {
      const left = this.#writing.get(key) - 1
      if (left === 0) this.#writing.delete(key)
      else this.#writing.set(key, left)
      this.fleet(key, answer.blockedMs)
      this.#fleetLevel(key, answer.level)
    })
    // A write that fails or times out lands no answer: the count goes with the next answer's key.
    setTimeout(() => this.#writing.delete(key), 60_000).unref()
    return written
  }

  /** The fleet's level of `key` as a store answer has it (with the block option). */
  #fleetLevel(key, level) {
    const policy = this.#policy
    if (policy === undefined) return
    const levels = this.#levels.get(key)
    if (levels !== undefined) levels.level = Math.min(level, policy.forMs.length - 1)
    else if (level > 0) {
      this.#bounded(this.#levels)
      this.#levels.set(key, { level: Math.min(level, policy.forMs.length - 1), endedMs: this.#until.get(key) ?? this.#seen })
    }
  }

  /** A blocked key called on a shared limiter: the store is asked again, at most once a second. */
  #askAgain(key) {
    if (this.#store === undefined) return
    const now = this.#now()
    const asked = this.#asked.get(key)
    if (asked !== undefined && now - asked < 1000) return
    this.#asked.set(key, now)
    this.#store.sendBlock('blockRead', { key }, (answer) => {
      this.fleet(key, answer.blockedMs)
      this.#fleetLevel(key, answer.level)
    })
  }

  /** How many keys may be blocked now: 0 means no call needs a look. */
  get active() {
    return this.#until.size
  }

  /** Whether the blocks are a shared limiter's (the fleet's). */
  get shared() {
    return this.#store !== undefined
  }

  /** Whether denials are counted (the `block` option). */
  get counting() {
    return this.#policy !== undefined
  }

  /** Whether `key` may be blocked (its block may have ended: `leftMs` tells). */
  has(key) {
    return this.#until.has(key)
  }

  /** What is left of `key`'s block, in ms (0: not blocked); a block that has ended is forgotten. */
  leftMs(key) {
    if (this.#until.size === 0) return 0
    const until = this.#until.get(key)
    if (until === undefined) return 0
    const left = until - this.#now()
    if (left > 0) return left
    this.#ended(key)
    return 0
  }

  /**
   * A call of a blocked key, denied: the decision (tokens and quota as `status` has them).
   * `decided`: how the native call counted it, when one decided it before the block was seen (a
   * block the call's store answer brought, or one that began meanwhile): 'allowed' or 'denied';
   * undefined: no native call counted it.
   */
  deny(key, leftMs, status, decided) {
    this.#askAgain(key)
    this.blocked++
    if (decided !== 'denied') this.short++
    if (decided === 'allowed') this.unallowed++
    return blockDecision(leftMs, status.tokens, status.quotaRemaining)
  }

  /** A decision that denied `key` (not for a block): counted in the key's run, maybe starting a block. */
  denied(key, decision) {
    const policy = this.#policy
    if (policy === undefined) return decision
    const now = this.#now()
    let run = this.#runs.get(key)
    if (run === undefined || now - run.startMs > policy.withinMs) {
      if (run !== undefined) this.#runs.delete(key)
      run = { startMs: now, count: 0 }
      this.#bounded(this.#runs)
      this.#runs.set(key, run)
    }
    run.count++
    if (run.count < policy.after) return decision
    this.#runs.delete(key)
    let levels = this.#levels.get(key)
    if (levels === undefined) {
      levels = { level: 0, endedMs: now }
      this.#bounded(this.#levels)
      this.#levels.set(key, levels)
    }
    const forMs = levelBlockMs(policy, levels, now)
    levels.level = Math.min(levels.level + 1, policy.forMs.length - 1)
    const until = now + forMs
    levels.endedMs = Math.max(levels.endedMs, until)
    const longest = Math.max(this.#until.get(key) ?? 0, until)
    this.#until.set(key, longest)
    this.#started(key, longest)
    this.blocks++
    this.blocked++
    if (this.#store === undefined) return blockAnswer(decision, forMs)
    // The level is the fleet's: the denial answers with the block the store wrote (this process's
    // own when no answer came within timeoutMs).
    return this.#write(key, { forMs: policy.forMs[0], levels: policy.forMs }).then((answer) => blockAnswer(decision, Math.max(forMs, answer?.blockedMs ?? 0)))
  }

  /** block(key, forMs): blocked until forMs from now unless already blocked for longer; true if a block started. */
  block(key, forMs) {
    const now = this.#now()
    const until = now + forMs
    const current = this.#until.get(key)
    const started = current === undefined || current <= now
    if (!started && current >= until) return false
    this.#until.set(key, until)
    this.#started(key, until)
    const levels = this.#levels.get(key)
    if (levels !== undefined) levels.endedMs = Math.max(levels.endedMs, until)
    else if (this.#policy !== undefined) this.#levels.set(key, { level: 0, endedMs: until })
    this.#runs.delete(key)
    if (this.#store !== undefined) this.#write(key, { forMs })
    if (started) this.blocks++
    return started
  }

  /** unblock(key): true if it was blocked; its level goes back to 0. */
  unblock(key) {
    const blocked = this.leftMs(key) > 0
    if (this.#until.has(key)) this.#ended(key)
    this.#levels.delete(key)
    this.#runs.delete(key)
    if (this.#store !== undefined) {
      this.#writing.delete(key)
      this.#store.sendBlock('blockClear', { key })
    }
    return blocked
  }

  /** delete(key): the block, the level and the run go with the key (the table drops its mark with it). */
  delete(key) {
    this.#asked.delete(key)
    this.#until.delete(key)
    this.#levels.delete(key)
    this.#runs.delete(key)
  }

  /** The key's level now (0 after resetAfterMs without a block). */
  level(key) {
    const levels = this.#levels.get(key)
    if (levels === undefined) return 0
    if (this.#policy !== undefined && this.#now() - levels.endedMs >= this.#policy.resetAfterMs && this.leftMs(key) === 0) return 0
    return levels.level
  }

  /** A full map drops its oldest entry (runs and levels of keys long gone), never a block. */
  #bounded(map) {
    if (map.size < this.#maxKeys) return
    const oldest = map.keys().next().value
    map.delete(oldest)
  }

  /** The blocks and levels, for a snapshot: [{ key, leftMs, level, sinceEndMs }], as of the latest reading (reading no clock). */
  entries() {
    if (this.#until.size === 0 && this.#levels.size === 0) return []
    const now = this.#seen
    const leftMsOf = (key) => {
      const until = this.#until.get(key)
      return until !== undefined && until > now ? until - now : 0
    }
    return blockEntries(this.#until.keys(), leftMsOf, this.#levels, now)
  }

  /** Blocks and levels from a snapshot, on this limiter's clock. */
  restore(entries) {
    const now = this.#now()
    for (const { key, leftMs, level, sinceEndMs } of entries) {
      if (leftMs > 0) {
        this.#until.set(key, now + leftMs)
        this.#started(key, now + leftMs)
      }
      if (level > 0 || leftMs > 0) {
        const capped = this.#policy === undefined ? level : Math.min(level, this.#policy.forMs.length - 1)
        this.#levels.set(key, { level: capped, endedMs: leftMs > 0 ? now + leftMs : now - sinceEndMs })
      }
    }
  }
}

/**
 * The length of the block a key at `levels` ({ level, endedMs }) starts now: `forMs[level]`, its
 * level back to 0 first when no block ended within `resetAfterMs`.
 */
function levelBlockMs(policy, levels, now) {
  if (now - levels.endedMs >= policy.resetAfterMs) levels.level = 0
  return policy.forMs[Math.min(levels.level, policy.forMs.length - 1)]
}

/** The denial that starts a block of `forMs`: the longer of its own wait and the block's, the block's on a tie. */
function blockAnswer(decision, forMs) {
  const leftMs = Math.ceil(forMs)
  if (decision.retryAfterMs > leftMs) return decision
  return { ...decision, retryAfterMs: leftMs, retryAfterBasis: 'block' }
}

/** The decision of a call a block denied. */
function blockDecision(leftMs, tokens, quotaRemaining) {
  return { allowed: false, retryAfterMs: Math.ceil(leftMs), retryAfterBasis: 'block', tokens, quotaRemaining, anomalies: [] }
}

/**
 * A snapshot: with blocks or levels to carry, version 2 (the core's image of the keys and the
 * book's blocks and levels); without, the core's version 1 image as it is, which every reader reads.
 */
function writeSnapshot(keysImage, entries) {
  if (entries.length === 0) return keysImage
  const parts = []
  const header = Buffer.alloc(ENVELOPE_HEADER_BYTES)
  header.write(MAGIC, 0, 'latin1')
  header.writeUInt16LE(BLOCKS_VERSION, 4)
  header.writeUInt16LE(0, 6)
  header.writeUInt32LE(keysImage.length, 8)
  parts.push(header, Buffer.from(keysImage.buffer, keysImage.byteOffset, keysImage.byteLength))
  const count = Buffer.alloc(4)
  count.writeUInt32LE(entries.length, 0)
  parts.push(count)
  for (const { key, leftMs, level, sinceEndMs } of entries) {
    const entry = Buffer.alloc(2 + 2 * key.length + 8 + 2 + 8)
    entry.writeUInt16LE(key.length, 0)
    entry.write(key, 2, 'utf16le')
    let at = 2 + 2 * key.length
    entry.writeDoubleLE(leftMs, at)
    entry.writeUInt16LE(level, at + 8)
    entry.writeDoubleLE(sinceEndMs, at + 10)
    at += 18
    parts.push(entry)
  }
  const body = Buffer.concat(parts)
  const trailer = Buffer.alloc(TRAILER_BYTES)
  trailer.writeUInt32LE(zlib.crc32(body), 0)
  return new Uint8Array(Buffer.concat([body, trailer]))
}

function notASnapshot(why) {
  return coded(RangeError, 'ERR_INVALID_OPTION', `restore must be a snapshot() of a KeyedQuotaClock; ${why}`)
}

/**
 * A snapshot split into the core's keys image and the blocks: a version-2 one is read here, a
 * version-1 one (no blocks) passes whole to the core, which checks it.
 */
function readSnapshot(bytes) {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  if (view.length < 6 || view.toString('latin1', 0, 4) !== MAGIC) return { keysImage: bytes, entries: [] }
  const version = view.readUInt16LE(4)
  if (version === 1) return { keysImage: bytes, entries: [] }
  if (version !== BLOCKS_VERSION) {
    throw coded(RangeError, 'ERR_INVALID_OPTION', `restore is a snapshot in format version ${version}, and this version of quota-clock-source reads format versions 1 and 2 only`)
  }
  if (view.length < ENVELOPE_HEADER_BYTES + 4 + TRAILER_BYTES) throw notASnapshot(`it is truncated (${view.length} bytes)`)
  const bodyLength = view.length - TRAILER_BYTES
  if (zlib.crc32(view.subarray(0, bodyLength)) !== view.readUInt32LE(bodyLength)) throw notASnapshot('its checksum does not match (corrupt or truncated)')
  const keysLength = view.readUInt32LE(8)
  let at = ENVELOPE_HEADER_BYTES + keysLength
  if (at + 4 > bodyLength) throw notASnapshot('its keys image is truncated')
  const keysImage = new Uint8Array(view.subarray(ENVELOPE_HEADER_BYTES, at))
  const count = view.readUInt32LE(at)
  at += 4
  const entries = []
  for (let i = 0; i < count; i++) {
    if (at + 2 > bodyLength) throw notASnapshot('its blocks are truncated')
    const units = view.readUInt16LE(at)
    if (units < 1 || units > 256 || at + 2 + 2 * units + 18 > bodyLength) throw notASnapshot(`its block ${i} is not one`)
    const key = view.toString('utf16le', at + 2, at + 2 + 2 * units)
    at += 2 + 2 * units
    const leftMs = view.readDoubleLE(at)
    const level = view.readUInt16LE(at + 8)
    const sinceEndMs = view.readDoubleLE(at + 10)
    at += 18
    if (!(leftMs >= 0 && leftMs <= MAX_BLOCK_MS) || !(sinceEndMs >= -1 && Number.isFinite(sinceEndMs))) throw notASnapshot(`its block ${i} (${describe(key)}) holds a time out of range`)
    entries.push({ key, leftMs, level, sinceEndMs })
  }
  if (at !== bodyLength) throw notASnapshot('it has bytes after its blocks')
  return { keysImage, entries }
}

module.exports = { BlockBook, blockEntries, parseBlockOptions, checkBlockMs, blockDecision, blockAnswer, levelBlockMs, writeSnapshot, readSnapshot, MAX_BLOCK_MS }
