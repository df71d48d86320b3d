'use strict'
// A shared limiter's give-backs: units returned to the store (idle, dropped or deleted keys, a
// late answer no key can take, close()) and failOpen units charged to it. Each is one store call,
// bounded by share.timeoutMs, counted in the driver's store counters; close() waits for their
// outcomes.

const { checkReserveAnswer } = require('./protocol.js')
const { thrownText } = require('../validate.js')
const { QuotaClockError } = require('../errors.js')
const { withTimeout, storeDeadline, quietTimer } = require('../timeout.js')
const native = require('../native.js')

/** A thrown value as an Error (a non-Error is wrapped, as its cause). */
function asError(value) {
  if (value instanceof Error) return value
  return new QuotaClockError('ERR_CALLBACK', `quota store threw a non-Error value: ${thrownText(value)}`, { cause: value })
}

/**
 * A store call's outcome (undefined: done, else its error), or ERR_STORE_UNAVAILABLE once it has
 * had `timeoutMs` (storeDeadline): then `state.timedOut` is set and `stats.timeouts` counts it.
 */
function boundedOutcome(promise, timeoutMs, stats, state) {
  return withTimeout(
    promise,
    timeoutMs,
    () => {
      state.timedOut = true
      stats.timeouts++
      return new QuotaClockError('ERR_STORE_UNAVAILABLE', `no answer within share.timeoutMs (${timeoutMs} ms)`)
    },
    storeDeadline,
  )
}

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

  /** Gives back what keys idle for `idleMs` hold; returns whether the book still holds units. */
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
      const key = String.fromCharCode(...giveBack.key)
      // (Units 0 and no charge: the store is told this limiter holds nothing for the key now.)
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
    // (It holds nothing after the give-back it follows; recordId 0: a lost record is noticed and
    // charged by the key's next reservation, which knows what it owns.)
    const request = { name: this.#name, key, periodId, limit: 0, leaseUnits: 0, lacking: 0, charge, expiresAtMs: periodEndMs, instance: this.#instance, held: 0, owned: 0, recordId: 0 }
    return this.#track((roundTrip) => this.#ops.reserve(request, roundTrip), (answer) => checkReserveAnswer(answer, request))
  }

  /** Runs a store call whose outcome close() waits for (undefined when done, else its error). */
  #track(call, done) {
    this.#stats.calls++
    const state = { timedOut: false }
    let promise
    try {
      promise = Promise.resolve(call(roundTripCounter(this.#stats)))
    } catch (error) {
      promise = Promise.reject(error)
    }
    const sent = promise.then(done).then(
      () => {
        this.#outage.answered()
        return undefined
      },
      (error) => {
        if (!state.timedOut) this.#stats.errors++ // (a call is a timeout or an error, never both)
        return asError(error)
      },
    )
    const tracked = boundedOutcome(sent, this.#timeoutMs, this.#stats, state)
    this.#pending.add(tracked)
    tracked.then(() => this.#pending.delete(tracked))
    return tracked
  }

  /** The outcomes of every give-back and charge still under way (undefined: done, else its error). */
  outcomes() {
    return Promise.all([...this.#pending])
  }
}

/**
 * The round-trip hook a store operation is given (lib/share/protocol.js): `stats.calls` counts each
 * round trip to the store (docs/metrics.md). The first is counted when the call is made; the store reports
 * each one it sends, and those after the first (EVAL after a NOSCRIPT, MongoDB's
 * create-then-reserve) are added as they go.
 */
function roundTripCounter(stats) {
  let trips = 0
  return () => {
    trips++
    if (trips > 1) stats.calls++
  }
}

module.exports = { GiveBacks, asError, boundedOutcome, roundTripCounter }
