'use strict'
// A shared limiter's give-backs: units returned to the store (idle, dropped or deleted keys, a
// late answer no key can take, close()) and failOpen units charged to it. Each is one store call,
// bounded by share.timeoutMs, counted in the driver's store counters; close() waits for their
// outcomes.

const { withTimeout, quietTimer } = require('../common/timeout.js')
const { startStoreCall, outcomeOf, OK } = require('./store-call.js')
const native = require('../native/native.js')
const { keyText } = require('./key-flights.js')

class GiveBacks {
  #handle
  #ops
  #name
  #instance
  #stats
  #outage
  #timeoutMs
  // The outcomes still to come (undefined when done, else the error).
  #pending = new Set()

  /** `stats`: the driver's store counters (calls, errors, timeouts, returned are counted here). */
  constructor(handle, ops, name, instance, stats, outage, timeoutMs) {
    this.#handle = handle
    this.#ops = ops
    this.#name = name
    this.#instance = instance
    this.#stats = stats
    this.#outage = outage
    this.#timeoutMs = timeoutMs
  }

  /** Gives back the units of keys idle for `idleMs`; returns whether the book still has units. */
  sendIdle(idleMs, readMonotonic) {
    let giveBacks
    try {
      giveBacks = native.keyedShareGiveBack(this.#handle, idleMs, readMonotonic())
    } catch {
      return true // an unreadable clock: next time
    }
    this.sendAll(giveBacks)
    return native.keyedShareHolds(this.#handle)
  }

  /** Sends the give-backs waiting in the reservation book (keys dropped or deleted). */
  sendDropped() {
    return this.sendAll(native.keyedShareGiveBack(this.#handle, Infinity, undefined))
  }

  /** Sends the give-backs waiting in the book; resolves once the store has them, or at `deadline`. */
  sendDroppedWithin(deadline) {
    const giveBacks = native.keyedShareGiveBack(this.#handle, Infinity, undefined)
    if (giveBacks.length === 0) return undefined
    const sent = Promise.all(this.sendAll(giveBacks)).then(() => undefined)
    return withTimeout(sent, Math.max(0, deadline - performance.now()), () => undefined, quietTimer)
  }

  /** Sends give-backs (and failOpen charges); returns the promises of their outcomes. */
  sendAll(giveBacks) {
    const sent = []
    for (const giveBack of giveBacks) {
      const key = keyText(giveBack.key)
      // (Units 0 and no charge: the store is told this limiter has nothing unadmitted for the key.)
      if (giveBack.units > 0 || giveBack.charge === 0) sent.push(this.send({ key, periodId: giveBack.periodId, units: giveBack.units, recordId: giveBack.recordId }))
      if (giveBack.charge > 0) sent.push(this.#charge(key, giveBack))
    }
    return sent
  }

  /** Gives units back (to the record they were reserved in); the promise is kept until it settles (close() waits for it). */
  send({ key, periodId, units, recordId }) {
    const request = { name: this.#name, key, periodId, units, instance: this.#instance, recordId }
    return this.#track((roundTrip) => this.#ops.giveBack(request, roundTrip), () => (this.#stats.returned += units))
  }

  /**
   * Adds failOpen units still owed to the store's count without reserving anything: a reserve
   * that asks for nothing (leaseUnits and lacking 0) and carries the charge.
   */
  #charge(key, { periodId, periodEndMs, charge }) {
    // (It has nothing unadmitted after the give-back it follows; recordId 0: a lost record is noticed and
    // charged by the key's next reservation, which knows what it owns.)
    const request = { name: this.#name, key, periodId, limit: 0, leaseUnits: 0, lacking: 0, charge, expiresAtMs: periodEndMs, instance: this.#instance, held: 0, owned: 0, recordId: 0 }
    return this.#track((roundTrip) => this.#ops.reserve(request, roundTrip), () => {})
  }

  /** Runs a store call (lib/share/store-call.js) whose outcome close() waits for (undefined when done, else its error). */
  #track(call, done) {
    const flight = startStoreCall({
      call,
      answered: (answer) => {
        done(answer)
        this.#outage.answered()
        return OK
      },
      timeoutMs: this.#timeoutMs,
      stats: this.#stats,
    })
    const tracked = outcomeOf(flight, this.#timeoutMs)
    this.#pending.add(tracked)
    tracked.then(() => this.#pending.delete(tracked))
    return tracked
  }

  /** The outcomes of every give-back and charge still under way (undefined: done, else its error). */
  outcomes() {
    return Promise.all([...this.#pending])
  }
}

module.exports = { GiveBacks }
