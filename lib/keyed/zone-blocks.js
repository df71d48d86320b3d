'use strict'
// The blocks of a zone (lib/keyed/zone.js): every process of the host that makes a limiter on the
// zone reads and writes them in a file beside it, <zone.path>.blocks (JSON: [[key, untilMs, level,
// endedMs], ...], times on the host's monotonic clock, which every process reads alike). A change
// is written whole (to a file of its own, then renamed over it: a reader sees the old table or the
// new one), and every process reads it again as soon as the file changes (inotify), so a block
// made in one process denies in the others from their next turn of the event loop.

const fs = require('node:fs')
const path = require('node:path')

class ZoneBlockFile {
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

  /** The table now: [[key, untilMs, level, endedMs], ...] (none: no file, or one being replaced). */
  read() {
    let text
    try {
      text = fs.readFileSync(this.#file, 'utf8')
    } catch {
      return []
    }
    try {
      const table = JSON.parse(text)
      return Array.isArray(table) ? table.filter((row) => Array.isArray(row) && typeof row[0] === 'string' && row.slice(1).every(Number.isFinite)) : []
    } catch {
      return []
    }
  }

  /** Applies `change(rows: Map(key -> row))` to the table as it is now, and writes it. */
  update(change) {
    const rows = new Map(this.read().map((row) => [row[0], row]))
    change(rows)
    const temporary = `${this.#file}.${process.pid}`
    fs.writeFileSync(temporary, JSON.stringify([...rows.values()]))
    fs.renameSync(temporary, this.#file)
    this.#onChange([...rows.values()])
  }

  close() {
    this.#watcher.close()
  }
}

module.exports = { ZoneBlockFile }
