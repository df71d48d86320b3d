'use strict'
// The keys a shared limiter's store reported exhausted: each denied in the process, with no store
// call, for EXHAUSTED_MS after the answer (so a flood on it costs one store call a second, and a
// grant is seen within a second). lib/share/driver.js decides such a call on what the store said then.

const EXHAUSTED_MS = 1_000
// The marks are swept of expired ones when they grow past this (and twice the last size).
const MIN_EXHAUSTED_SWEEP = 1_024

class ExhaustedMarks {
  // key -> until when (performance.now()) it is denied here.
  #marks = new Map()
  #sweepAt = MIN_EXHAUSTED_SWEEP

  /** Whether `key` is marked now (an expired mark is removed). */
  has(key) {
    const until = this.#marks.get(key)
    if (until === undefined) return false
    if (performance.now() >= until) {
      this.#marks.delete(key)
      return false
    }
    return true
  }

  /** Notes a store answer for a key: one that left nothing to reserve marks the key exhausted. */
  note(key, granted, unreserved, lacking) {
    const marks = this.#marks
    if (unreserved > 0 && (granted > 0 || lacking === 0)) {
      marks.delete(key)
      return
    }
    const now = performance.now()
    marks.set(key, now + EXHAUSTED_MS)
    if (marks.size < this.#sweepAt) return
    for (const [marked, until] of marks) if (until <= now) marks.delete(marked)
    this.#sweepAt = Math.max(MIN_EXHAUSTED_SWEEP, 2 * marks.size)
  }

  /** Forgets `key`'s mark (every key's without one): its next call asks the store again. */
  forget(key) {
    if (key === undefined) this.#marks.clear()
    else this.#marks.delete(key)
  }

  clear() {
    this.#marks.clear()
  }
}

module.exports = { ExhaustedMarks }
