'use strict'
// What a shared limiter's two drivers (the quota's ShareDriver, lib/share/driver.js, and the fleet
// bucket's BucketDriver, lib/share/bucket.js) do alike around a key's store calls: one store call
// under way per key (`flights`), the units the calls waiting for a key want together (its demand),
// the give-back timer that runs while the book holds something, the close generation (answers to
// calls made before close() are given back, not credited), and the outage path of a call its
// store call did not serve. The key as the binding hands it over is decoded here too.

const { QuotaClockError } = require('../native/errors.js')
const { flyStoreCall } = require('./store-call.js')
const { MAX_TIMER_MS } = require('../common/validate.js')
const { withTimeout, storeDeadline } = require('../common/timeout.js')

/** A key handed over by the binding as UTF-16 code units. */
function keyText(units) {
  return String.fromCharCode(...units)
}

class KeyFlights {
  // The key's store call under way (a StoreFlight, lib/share/store-call.js), one per key.
  flights = new Map()
  // Units the calls waiting for a key want together.
  #demand = new Map()
  // Bumped by close(): answers to store calls made before it are not the key's any more.
  #generation = 0
  #timer
  #everyMs
  #tick
  #name
  #stats
  #outage
  #timeoutMs
  #failOpen

  /**
   * `shared`: `{ name, stats, outage }` of the limiter's share. `idleMs`: how long a key is
   * unused before its give-back; `tick()`: the timer's work (every idleMs / 4, at least 5 ms),
   * returning whether the book still holds something (else the timer stops).
   */
  constructor(shared, { timeoutMs, failOpen, idleMs }, tick) {
    this.#name = shared.name
    this.#stats = shared.stats
    this.#outage = shared.outage
    this.#timeoutMs = timeoutMs
    this.#failOpen = failOpen
    this.#everyMs = Math.min(MAX_TIMER_MS, Math.max(5, Math.floor(idleMs / 4)))
    this.#tick = tick
  }

  /** Makes a store call the key's only one under way (flyStoreCall), bounded by timeoutMs and counted. */
  fly(key, options) {
    return flyStoreCall(this.flights, key, { ...options, timeoutMs: this.#timeoutMs, stats: this.#stats })
  }

  /** The key's store call when it timed out and has not settled yet (the key's calls fail at once), else undefined. */
  hanging(key) {
    const flight = this.flights.get(key)
    return flight !== undefined && flight.timedOut && !flight.abandoned(this.#timeoutMs) ? flight : undefined
  }

  /** The units the calls waiting for `key` want together. */
  demand(key) {
    return this.#demand.get(key) ?? 0
  }

  /** Counts `units` more (negative: fewer) in the key's demand. */
  addDemand(key, units) {
    const demand = this.demand(key) + units
    if (demand > 0) this.#demand.set(key, demand)
    else this.#demand.delete(key)
  }

  /** Whether calls wait for the key. */
  waitedFor(key) {
    return this.#demand.has(key)
  }

  /** The generation a store call is made in (current: its answer is still the key's). */
  get generation() {
    return this.#generation
  }

  /** Starts the give-back timer (unref'd) unless it runs. */
  arm() {
    if (this.#timer !== undefined) return
    this.#timer = setInterval(() => {
      if (!this.#tick()) this.#disarm()
    }, this.#everyMs)
    this.#timer.unref()
  }

  #disarm() {
    if (this.#timer === undefined) return
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /** close(): a new generation, the timer stopped. */
  closing() {
    this.#generation++
    this.#disarm()
  }

  /** Resolves once every store call under way has settled or timed out. */
  async settled() {
    await Promise.all([...this.flights.values()].map((flight) => flight.done))
  }

  /**
   * Resolves once every store call under way has settled, an answer that came after its timeout
   * included, or `timeoutMs` after this call at the latest.
   */
  async finished(timeoutMs) {
    const flights = [...this.flights]
    await withTimeout(Promise.all(flights.map(([, flight]) => flight.finished)), timeoutMs, () => undefined, storeDeadline)
    // (One that did not settle by then is no longer waited for: the store writes its slice off.)
    for (const [key, flight] of flights) if (!flight.settled && this.flights.get(key) === flight) this.flights.delete(key)
  }

  /**
   * The store did not serve a call (`flight` failed or went unanswered, after `waitedMs`): an
   * answer that makes no sense is thrown as it is; else the outage is told once, and failOpen
   * decides the call (`failOpenDecision()`), or it is refused with ERR_STORE_UNAVAILABLE.
   * `uncovered`: the calls this holds back, `failOpenDoes`: what failOpen does with them.
   */
  unavailable(flight, waitedMs, failOpenDecision, uncovered, failOpenDoes) {
    if (flight.error !== undefined && flight.error.code === 'ERR_STORE_RESPONSE' && flight.error instanceof QuotaClockError) throw flight.error
    const why = flight.why(this.#timeoutMs)
    this.#outage.failed(
      () =>
        `quota store of share "${this.#name}" unavailable (${why}); ${uncovered} are ${this.#failOpen ? failOpenDoes : 'refused with ERR_STORE_UNAVAILABLE'} until it answers again`,
    )
    if (this.#failOpen) return failOpenDecision()
    throw flight.unavailable(this.#name, why, waitedMs)
  }

  /**
   * The store did not serve a call within timeoutMs though it answers (`why`: a store call of the
   * call's still unanswered, or answers that brought it nothing it could spend): no outage is
   * told; with failOpen the call is decided by `failOpenDecision()`, else refused with
   * ERR_STORE_UNAVAILABLE after waiting `waitedMs`.
   */
  outOfTime(why, waitedMs, failOpenDecision) {
    if (this.#failOpen) return failOpenDecision()
    throw new QuotaClockError(
      'ERR_STORE_UNAVAILABLE',
      `quota store of share "${this.#name}" did not serve the call within share.timeoutMs (${this.#timeoutMs} ms): ${why}; the call was refused after waiting ${Math.round(waitedMs)} ms and consumed nothing`,
    )
  }
}

module.exports = { KeyFlights, keyText }
