'use strict'
// One process warning per outage of a store (a shared limiter's quota store, a throttle's store):
// the first failure after the store last answered warns; later failures do not, until it answers.

class OutageWarning {
  #code
  #down = false

  /** `code`: the warning's code (QUOTA_CLOCK_STORE_UNAVAILABLE, QUOTA_CLOCK_THROTTLE_UNAVAILABLE). */
  constructor(code) {
    this.#code = code
  }

  /** The store failed: warns with `message()` unless this outage was warned of already. */
  failed(message) {
    if (this.#down) return
    this.#down = true
    process.emitWarning(message(), { code: this.#code })
  }

  /** The store answered: its next failure is a new outage. */
  answered() {
    this.#down = false
  }
}

module.exports = { OutageWarning }
