'use strict'
// The cell driver of a shared bucket (`share.bucket`): the store calls that move a
// key's cells. The cell book (per key: cells held, the local bucket, the lease, the failOpen
// bucket) is native (src/keyed/cells.rs); this file asks the store what the book says is needed and
// hands the answers back.
//
// - A consume its cells cover is decided in one native call and never comes here; nor does one
//   the book denies locally (it holds every cell, or its last call found none free less than
//   leaseMs / 4 ago).
// - One that needs more cells waits for one `cellsAcquire` (one flight per key, shared by every
//   concurrent call for it), bounded by timeoutMs, then is decided on what it brought.
// - A key has at most one store call under way, an acquire or a renewal: the store's count of the
//   cells a process holds is then never behind what the process decides from. (A renewal says
//   what the key holds after its give-back; one overtaken by an acquire would undo the grant.)
// - A tick every leaseMs / 8 (an unref'd timer, running only while cells are held) renews the
//   leases of every key that holds cells in one `cellsRenew`, gives back the cells of keys idle for
//   idleMs, and learns which keys others wait for: an answer that says so is followed at once by
//   the give-back of what this process holds beyond its fair share.
// - A key whose acquire left it below its fair share asks again at its next two ticks, in the
//   background (its calls are still denied locally meanwhile): the cells the holders give back
//   when they learn of it, within leaseMs / 8, are taken then, not only after leaseMs / 4.
// - Keys deleted or dropped give their cells back at the next tick; close() gives back every
//   cell and resolves once the store has it.

const { QuotaClockError, internalError } = require('./errors.js')
const { thrownText } = require('./validate.js')
const { withTimeout, storeDeadline } = require('./timeout.js')
const { flyStoreCall, OK } = require('./store-flight.js')
const { asError, boundedOutcome } = require('./share-give-backs.js')
const native = require('./native.js')

const { sharedConsume: SHARED_CONSUME, sharedAfterStore: AFTER_STORE, sharedFailOpen: FAIL_OPEN } = require('./contract.js').OPERATION

// A renewal that timed out keeps its keys out of other store calls until it settles, or until it
// is this many timeouts old (as a StoreFlight is abandoned).
const ABANDON_AFTER_TIMEOUTS = 10
const MIN_ABANDON_MS = 1_000
// How many times a call asks the store for cells before it is decided on what it holds (a key
// dropped and held again between the answer and the decision asks again).
const MAX_ROUNDS = 8
// How many ticks a key below its fair share asks again in the background, after a call asked.
const BACKGROUND_ASKS = 2

/** A key handed over by the binding as UTF-16 code units. */
function keyText(units) {
  return String.fromCharCode(...units)
}

class CellDriver {
  #handle
  #ops
  #name
  #instance
  #stats
  #outage
  #leaseMs
  #idleMs
  #timeoutMs
  #failOpen
  #decide
  #readMonotonic
  // Acquires under way, one per key.
  #flights = new Map()
  // Renewals under way: key -> the renewal (a promise of nothing, settled when the store answered).
  #renewing = new Map()
  #timer
  // Bumped by close(): acquires answered after it are given back.
  #generation = 0
  // Renewals' outcomes close() waits for (undefined: done, else the error).
  #pending = new Set()
  // Keys below their fair share after a call's acquire: key -> background asks left.
  #wanting = new Map()

  /**
   * `shared`: what the share driver and this one have in common: `{ handle, ops, name, instance,
   * stats, outage }`. `decide(key, n, operation)`: the limiter's native shared consume (a Decision,
   * or a number: what the store must be asked first, < 0 for cells).
   */
  constructor(shared, options, decide, readMonotonic) {
    this.#handle = shared.handle
    this.#ops = shared.ops
    this.#name = shared.name
    this.#instance = shared.instance
    this.#stats = shared.stats
    this.#outage = shared.outage
    this.#leaseMs = options.leaseMs
    this.#idleMs = options.idleMs
    this.#timeoutMs = options.timeoutMs
    this.#failOpen = options.failOpen
    this.#decide = decide
    this.#readMonotonic = readMonotonic
  }

  /**
   * A consume the key's cells do not cover: waits for one store call that takes cells, then
   * decides. Resolves to a Decision, or to the quota units the call still lacks (a number >= 0:
   * the quota's store call comes next).
   */
  async acquire(key, n) {
    for (let round = 0; ; round++) {
      const roundStartMs = performance.now()
      const renewing = this.#renewing.get(key)
      if (renewing !== undefined) {
        // One store call per key: the acquire follows the renewal under way.
        const settled = await withTimeout(renewing, this.#timeoutMs, () => false, storeDeadline)
        if (!settled) return this.#unavailable(key, n, undefined, performance.now() - roundStartMs)
      }
      let flight = this.#flights.get(key)
      if (flight !== undefined && flight.timedOut && !flight.abandoned(this.#timeoutMs)) return this.#unavailable(key, n, flight, 0)
      if (flight === undefined || flight.timedOut) {
        const request = native.keyedCellsRequest(this.#handle, key, this.#readMonotonic())
        if (request == null) {
          // The key was dropped (maxKeys) since the call began: held again by deciding anew.
          const decision = this.#decide(key, n, SHARED_CONSUME)
          if (typeof decision !== 'number' || decision >= 0 || round >= MAX_ROUNDS) return this.#settled(key, n, decision)
          continue
        }
        flight = this.#fly(key, request)
      }
      const outcome = flight.settled ? flight.outcome : await flight.done
      if (outcome !== OK) return this.#unavailable(key, n, flight, performance.now() - roundStartMs)
      const decision = this.#decide(key, n, AFTER_STORE)
      if (typeof decision !== 'number' || decision >= 0 || round >= MAX_ROUNDS) return this.#settled(key, n, decision)
    }
  }

  /** A decision, or the quota units lacking; never "cells" (decided on what the key holds). */
  #settled(key, n, decision) {
    if (typeof decision === 'number' && decision < 0) {
      const held = this.#decide(key, n, AFTER_STORE)
      if (typeof held === 'number' && held < 0) throw internalError('a shared bucket asked for cells right after a store answer')
      return held
    }
    return decision
  }

  /** The store is unavailable for this call: failOpen decides it by a local bucket of C and R. */
  #unavailable(key, n, flight, waitedMs) {
    if (flight !== undefined && flight.error !== undefined && flight.error.code === 'ERR_STORE_RESPONSE' && flight.error instanceof QuotaClockError) throw flight.error
    const why = flight === undefined ? `a renewal of the key's lease got no answer within share.timeoutMs (${this.#timeoutMs} ms)` : flight.why(this.#timeoutMs)
    this.#outage.failed(
      () =>
        `quota store of share "${this.#name}" unavailable (${why}); calls that the cells held here do not cover are ${this.#failOpen ? 'decided by a local bucket (failOpen)' : 'refused with ERR_STORE_UNAVAILABLE'} until it answers again`,
    )
    if (this.#failOpen) return this.#decide(key, n, FAIL_OPEN)
    if (flight === undefined) {
      throw new QuotaClockError('ERR_STORE_UNAVAILABLE', `quota store of share "${this.#name}" unavailable (${why}); the call was refused after waiting ${Math.round(waitedMs)} ms and consumed nothing`)
    }
    throw flight.unavailable(this.#name, why, waitedMs)
  }

  /** Makes the acquire a request of the cell book describes; its answer is credited whenever it comes. */
  #fly(key, request, background = false) {
    const generation = this.#generation
    const args = {
      name: this.#name,
      key,
      capacity: request.capacity,
      refillPerSecond: request.refillPerSecond,
      initial: request.initial,
      instance: this.#instance,
      leaseMs: this.#leaseMs,
      held: request.held,
      recordId: request.recordId,
    }
    return flyStoreCall(this.#flights, key, {
      call: () => this.#ops.cellsAcquire(args),
      failed: () => native.keyedCellsFailed(this.#handle, key),
      answered: (answer) => {
        this.#outage.answered()
        const credited = generation === this.#generation && native.keyedCellsCredit(this.#handle, key, request.sentMs, answer, this.#readMonotonic())
        if (credited) {
          this.#arm()
          if (answer.held >= answer.fair) this.#wanting.delete(key)
          else if (!background) this.#wanting.set(key, BACKGROUND_ASKS)
        } else {
          // Not the key's any more (dropped, or the limiter was closed): the cells go back.
          if (generation === this.#generation) native.keyedCellsFailed(this.#handle, key)
          this.#renew([{ key, held: 0, tokens: answer.tokens, recordId: answer.recordId, sentMs: request.sentMs }], false)
        }
        return OK
      },
      timeoutMs: this.#timeoutMs,
      stats: this.#stats,
    })
  }

  /** The tick runs only while some key holds cells. */
  #arm() {
    if (this.#timer !== undefined) return
    const every = Math.max(5, Math.floor(this.#leaseMs / 8))
    this.#timer = setInterval(() => this.#tick(false), every)
    this.#timer.unref()
  }

  /** Renews what the keys hold, gives back idle keys' cells (and, `urgent`, only what others wait for). */
  #tick(urgent) {
    let renewals
    try {
      renewals = native.keyedCellsTick(this.#handle, this.#idleMs, urgent, this.#readMonotonic())
    } catch {
      return // an unreadable clock: next time
    }
    if (renewals.length > 0) this.#renew(renewals.map((renewal) => ({ ...renewal, key: keyText(renewal.key) })), true)
    if (!urgent) this.#askAgain()
    if (!urgent && this.#wanting.size === 0 && !native.keyedCellsHolds(this.#handle) && this.#timer !== undefined) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
  }

  /** The background asks of keys below their fair share (one per key and tick, none while the key has a store call under way). */
  #askAgain() {
    for (const [key, left] of this.#wanting) {
      if (this.#flights.has(key) || this.#renewing.has(key)) continue
      if (left <= 1) this.#wanting.delete(key)
      else this.#wanting.set(key, left - 1)
      let request
      try {
        request = native.keyedCellsRequest(this.#handle, key, this.#readMonotonic())
      } catch {
        continue // an unreadable clock: the call that needs the cells asks
      }
      if (request == null) this.#wanting.delete(key)
      else this.#fly(key, request, true)
    }
  }

  /** Sends the keys' deleted or dropped since the last tick back at once. */
  flushDropped() {
    this.#tick(true)
  }

  /**
   * One `cellsRenew` for `renewals` ({ key, held, tokens, recordId, sentMs }); `booked`: the keys
   * are the cell book's (marked in flight by it), whose answers it takes.
   */
  #renew(renewals, booked) {
    const request = {
      name: this.#name,
      instance: this.#instance,
      leaseMs: this.#leaseMs,
      keys: renewals.map(({ key, held, tokens, recordId }) => ({ key, held, tokens, recordId })),
    }
    this.#stats.calls++
    let call
    try {
      call = Promise.resolve(this.#ops.cellsRenew(request))
    } catch (error) {
      call = Promise.reject(error)
    }
    const state = { timedOut: false }
    const settled = call.then(
      (answer) => {
        this.#outage.answered()
        if (booked) this.#renewed(renewals, answer)
        return undefined
      },
      (error) => {
        if (!state.timedOut) this.#stats.errors++
        if (booked) for (const { key } of renewals) native.keyedCellsRenewFailed(this.#handle, key)
        return asError(error)
      },
    )
    // Every renewal and release is the key's store call under way: an acquire of the key waits for
    // it (a release overtaken by the acquire that follows it would free the cells it brings).
    const renewal = settled.then(() => true)
    for (const { key } of renewals) this.#renewing.set(key, renewal)
    settled.then(() => {
      for (const { key } of renewals) if (this.#renewing.get(key) === renewal) this.#renewing.delete(key)
    })
    // A renewal that never settles stops holding its keys back once it is long abandoned.
    const abandon = setTimeout(() => {
      for (const { key } of renewals) {
        if (this.#renewing.get(key) !== renewal) continue
        this.#renewing.delete(key)
        if (booked) native.keyedCellsRenewFailed(this.#handle, key)
      }
    }, Math.max(MIN_ABANDON_MS, ABANDON_AFTER_TIMEOUTS * this.#timeoutMs))
    abandon.unref()
    settled.then(() => clearTimeout(abandon))
    const bounded = boundedOutcome(settled, this.#timeoutMs, this.#stats, state)
    this.#pending.add(bounded)
    bounded.then(() => this.#pending.delete(bounded))
    return bounded
  }

  /** A renewal's answer, key by key; gives back at once what others wait for. */
  #renewed(renewals, answer) {
    let urgent = false
    const monotonicMs = this.#readMonotonic()
    for (let i = 0; i < renewals.length; i++) {
      const { key, sentMs } = renewals[i]
      if (native.keyedCellsRenewed(this.#handle, key, sentMs, answer.keys[i], answer.storeNowMs, monotonicMs)) urgent = true
    }
    if (urgent) this.#tick(true)
  }

  /**
   * Gives back every cell and resolves once the store has it; rejects with ERR_STORE_UNAVAILABLE
   * when the store did not take them within timeoutMs (they come back to the others, empty, once
   * the lease has lapsed: leaseMs * 1.1 + 1 s after the last renewal). The limiter stays usable.
   */
  async close() {
    this.#generation++
    this.#wanting.clear()
    if (this.#timer !== undefined) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
    await Promise.all([...this.#flights.values()].map((flight) => flight.done))
    await Promise.all([...new Set(this.#renewing.values())].map((renewal) => withTimeout(renewal, this.#timeoutMs, () => false, storeDeadline)))
    const releases = native.keyedCellsReleaseAll(this.#handle)
    if (releases.length > 0) this.#renew(releases.map((release) => ({ ...release, key: keyText(release.key) })), true)
    const outcomes = await Promise.all([...this.#pending])
    const failed = outcomes.find((outcome) => outcome !== undefined)
    if (failed !== undefined) {
      throw new QuotaClockError(
        'ERR_STORE_UNAVAILABLE',
        `quota store of share "${this.#name}" did not take back every cell on close (${thrownText(failed)}); others get them, empty, once this process's lease has lapsed`,
        { cause: failed },
      )
    }
  }
}

module.exports = { CellDriver }
