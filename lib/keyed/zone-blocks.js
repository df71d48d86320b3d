'use strict'
// The blocks of a zone (lib/keyed/zone.js; docs/blocking.md): a key's block and its run of
// denials live in the zone file beside the key (src/zone/blocks.rs), so a block made in one
// process denies in every process on the zone from its next call, and every process's denials
// count in one run. The native call denies a blocked key itself. The levels (which `forMs` an
// automatic block takes, and when the key's last block ended) live in a file beside the zone,
// <zone.path>.blocks (JSON: [[key, level, endedMs], ...], times on the host's monotonic clock,
// which every process reads alike), written whole (to a file of its own, then renamed over it)
// under a lock file (<zone.path>.blocks.lock, naming its holder's pid: a dead holder's lock is
// taken over), so two processes changing levels at once lose neither change, and read again by
// every process as it changes.

const fs = require('node:fs')
const path = require('node:path')
const { blockAnswer, blockEntries, levelBlockMs } = require('./blocks.js')

// How long a change of the levels waits for another process's (a change takes a millisecond or
// so): past it, the lock is taken as a dead process's would be.
const LOCK_PATIENCE_MS = 2_000
const pause = new Int32Array(new SharedArrayBuffer(4))

/** Whether the process `pid` is alive (a signal 0 reaches it, or it is another user's). */
function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error.code === 'EPERM'
  }
}

/**
 * Takes the lock file `lock` (made exclusively, holding this process's pid) and answers its
 * release. A lock whose holder is dead, or that outlasts LOCK_PATIENCE_MS, is taken over.
 */
function lockFile(lock) {
  const giveUpAt = performance.now() + LOCK_PATIENCE_MS
  for (;;) {
    try {
      const fd = fs.openSync(lock, 'wx')
      fs.writeSync(fd, String(process.pid))
      fs.closeSync(fd)
      return () => fs.rmSync(lock, { force: true })
    } catch (error) {
      if (error.code !== 'EEXIST') throw error
    }
    let holder = NaN
    try {
      holder = Number(fs.readFileSync(lock, 'utf8'))
    } catch {
      continue // released meanwhile
    }
    // (A holder that has not written its pid yet reads as 0: alive, waited for.)
    if ((Number.isInteger(holder) && holder > 0 && !alive(holder)) || performance.now() > giveUpAt) {
      fs.rmSync(lock, { force: true })
      continue
    }
    Atomics.wait(pause, 0, 0, 1)
  }
}

class ZoneLevelFile {
  #file
  #watcher
  #onChange

  /** `onChange(table)`: the table written by any process (this one included). */
  constructor(zonePath, onChange) {
    this.#file = `${zonePath}.blocks`
    this.#onChange = onChange
    const base = path.basename(this.#file)
    this.#watcher = fs.watch(path.dirname(this.#file), { persistent: false }, (_event, name) => {
      if (name === base) this.#onChange(this.read())
    })
    // A watcher that fails (the folder removed) leaves the table as last read.
    this.#watcher.on('error', () => {})
  }

  /** The table now: [[key, level, endedMs], ...] (none: no file, or one being replaced). */
  read() {
    let text
    try {
      text = fs.readFileSync(this.#file, 'utf8')
    } catch {
      return []
    }
    try {
      const table = JSON.parse(text)
      return Array.isArray(table) ? table.filter((row) => Array.isArray(row) && row.length === 3 && typeof row[0] === 'string' && row.slice(1).every(Number.isFinite)) : []
    } catch {
      return []
    }
  }

  /** Applies `change(rows: Map(key -> row))` to the table as it is now, and writes it (under the lock). */
  update(change) {
    const release = lockFile(`${this.#file}.lock`)
    let rows
    try {
      rows = new Map(this.read().map((row) => [row[0], row]))
      change(rows)
      const temporary = `${this.#file}.${process.pid}`
      fs.writeFileSync(temporary, JSON.stringify([...rows.values()]))
      fs.renameSync(temporary, this.#file)
    } finally {
      release()
    }
    this.#onChange([...rows.values()])
  }

  close() {
    this.#watcher.close()
  }
}

/** A zone's blocks, behind the block book's interface (lib/keyed/blocks.js's BlockBook). */
class ZoneBlockBook {
  #policy
  #now
  // The zone backend (lib/keyed/zone.js): block, unblock, blockedMs, denied, blocks, created.
  #zone
  #file
  // key -> { level, endedMs }, as the levels file has it.
  #levels = new Map()
  // The latest reading of the clock (snapshot() reads none).
  #seen = 0
  // Counters for stats(): calls a block denied (counted in `denied` natively), blocks started here.
  // (No call a zone's block denies is counted otherwise: `short` and `unallowed` stay 0.)
  blocked = 0
  short = 0
  unallowed = 0
  blocks = 0

  constructor(policy, now, zone, zonePath) {
    this.#policy = policy
    this.#now = () => (this.#seen = now())
    this.#zone = zone
    this.#file = new ZoneLevelFile(zonePath, (table) => this.#adopt(table))
    this.#adopt(this.#file.read())
  }

  #adopt(table) {
    this.#levels.clear()
    for (const [key, level, endedMs] of table) this.#levels.set(key, { level, endedMs })
  }

  /** The key's level and when its last block ended, written for every process (none: forgotten). */
  #write(key, levels) {
    this.#file.update((rows) => {
      if (levels === undefined) rows.delete(key)
      else rows.set(key, [key, levels.level, levels.endedMs])
    })
  }

  close() {
    this.#file.close()
  }

  /** The native call denies a blocked key: no look before it. */
  get active() {
    return 0
  }

  get shared() {
    return false
  }

  /** Every denial is looked at: a block's (the native call's) is counted as one. */
  get counting() {
    return true
  }

  has() {
    return false
  }

  leftMs(key) {
    return this.#zone.blockedMs(key)
  }

  /** A decision that denied `key`: a block's counted, another counted in the key's run (every process's). */
  denied(key, decision) {
    if (decision.retryAfterBasis === 'block') {
      this.blocked++
      return decision
    }
    const policy = this.#policy
    if (policy === undefined) return decision
    const now = this.#now()
    const levels = { ...(this.#levels.get(key) ?? { level: 0, endedMs: now }) }
    const forMs = levelBlockMs(policy, levels, now)
    const answer = this.#zone.denied(key, policy.withinMs, policy.after, forMs)
    if (answer === null || answer.leftMs === 0) return decision
    this.blocked++
    if (answer.started) {
      this.blocks++
      this.#write(key, { level: Math.min(levels.level + 1, policy.forMs.length - 1), endedMs: Math.max(levels.endedMs, now + answer.leftMs) })
    }
    return blockAnswer(decision, answer.leftMs)
  }

  /** block(key, forMs): the key held and blocked in every process; its level unchanged. */
  block(key, forMs) {
    const { leftMs, started } = this.#zone.block(key, forMs)
    const levels = this.#levels.get(key)
    const endedMs = this.#now() + leftMs
    if (levels !== undefined && endedMs > levels.endedMs) this.#write(key, { level: levels.level, endedMs })
    if (started) this.blocks++
    return started
  }

  /** unblock(key): true if it was blocked; its level goes back to 0. */
  unblock(key) {
    const was = this.#zone.unblock(key)
    if (this.#levels.has(key)) this.#write(key, undefined)
    return was
  }

  /** delete(key): the block went with the key's record; the level goes too. */
  delete(key) {
    if (this.#levels.has(key)) this.#write(key, undefined)
  }

  level(key) {
    const levels = this.#levels.get(key)
    if (levels === undefined) return 0
    if (this.#policy !== undefined && this.#now() - levels.endedMs >= this.#policy.resetAfterMs && this.leftMs(key) === 0) return 0
    return levels.level
  }

  /** The blocks and levels, for a snapshot: [{ key, leftMs, level, sinceEndMs }] (the levels as of the latest reading: no clock is read). */
  entries() {
    const blocks = this.#zone.blocks()
    if (blocks.size === 0 && this.#levels.size === 0) return []
    return blockEntries(blocks.keys(), (key) => blocks.get(key) ?? 0, this.#levels, this.#seen)
  }

  /** Blocks and levels from a snapshot, applied only by the process that made the zone (as its keys are). */
  restore(entries) {
    if (entries.length === 0 || !this.#zone.created) return
    const now = this.#now()
    for (const { key, leftMs, level, sinceEndMs } of entries) {
      if (leftMs > 0) this.#zone.block(key, leftMs)
      if (level > 0 || leftMs > 0) {
        const capped = this.#policy === undefined ? level : Math.min(level, this.#policy.forMs.length - 1)
        this.#write(key, { level: capped, endedMs: leftMs > 0 ? now + leftMs : now - sinceEndMs })
      }
    }
  }
}

module.exports = { ZoneBlockBook, ZoneLevelFile }
