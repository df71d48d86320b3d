'use strict'
// The backend of a shared KeyedQuotaClock (`share`), with the backends' one interface
// (lib/keyed/keyed-backend.js): the in-process table (lib/keyed/keyed-table.js) with its
// reservation book, and the driver of its store calls (lib/share/driver.js's ShareDriver).
//
// - tryConsume is refused (ERR_SHARED_ASYNC): a call its reservation does not cover waits for the
//   store. Its `tryCall` throws; `tryRefusal()` is the same error, thrown before bad arguments are.
// - A consume its reservation covers is decided in one native call (operation sharedConsume);
//   one it does not cover waits for the store (the driver's `uncovered`).
// - A decision that was not the plain covered one starts the driver's background work.
// - delete() gives a dropped key's units back; close() gives back every reservation; stats() adds
//   the store counters (`store`).

const { AT } = require('../native/contract.js')
const { coded } = require('../common/validate.js')
const { KeyedTable } = require('./keyed-table.js')
const { ShareDriver, SHARED_CONSUME } = require('../share/driver.js')
const { N_OR_STATUS, DECIDED, NO_ANOMALIES, readDecision } = require('../limiter/native-call.js')
const { PERIOD_SLOT } = require('./keyed-backend.js')
const { isNeed } = require('../share/need.js')

function sharedAsync() {
  return coded(TypeError, 'ERR_SHARED_ASYNC', 'tryConsume cannot be used on a limiter with share: a call its reservation does not cover waits for the store; use `await limiter.consume(key, n)`')
}

/** tryConsume's call on a shared limiter. */
function refuseTryConsume() {
  throw sharedAsync()
}

class SharedTable {
  #table
  #call
  #result
  #driver

  /** `limiter`: the KeyedQuotaClock (registered as shared); `args`: KeyedTable's; `share`: the parsed `share` option. */
  constructor(limiter, args, share) {
    const table = new KeyedTable({ ...args, share })
    this.#table = table
    this.#call = table.call
    this.#result = table.result
    const js = table.js
    this.#driver = new ShareDriver(
      limiter,
      table.handle,
      share,
      (key, n, operation) => this.#decide(key, n, operation),
      js === undefined ? () => undefined : () => js.readings()[0],
      () => this.#result[PERIOD_SLOT],
    )
  }

  get call() {
    return this.#call
  }

  get tryCall() {
    return refuseTryConsume
  }

  tryRefusal() {
    return sharedAsync()
  }

  /** `onBlock(key, blockedMs)`: a store call's answer of the key's fleet block. */
  set onBlock(onBlock) {
    this.#driver.onBlock = onBlock
  }

  /** A block operation sent to the store in the background (ShareDriver's sendBlock). */
  sendBlock(operation, fields, then) {
    return this.#driver.sendBlock(operation, fields, then)
  }

  get result() {
    return this.#result
  }

  /** A refund's rest (a shared consume's goes through #settleShared). */
  settle(key, n, operation) {
    return this.#table.settle(key, n, operation)
  }

  /**
   * A shared consume in one of its modes (lib/share/driver.js): a Decision, or the units it lacks. (Its
   * own copy of keyed-backend's decide: a call site of its own keeps the covered path's feedback
   * apart from the other backends'.)
   */
  #decide(key, n, operation) {
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = operation
    this.#call(key)
    return result[N_OR_STATUS] === DECIDED ? readDecision(result, NO_ANOMALIES) : this.#settleShared(key, n, operation)
  }

  #settleShared(key, n, operation) {
    const decision = this.#table.settle(key, n, operation)
    if (!isNeed(decision)) this.#driver.afterDecision(key)
    return decision
  }

  /** Decided against the key's reservation (one native call when it covers `n`), else after one store call. */
  consume(key, n) {
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = SHARED_CONSUME
    this.#call(key)
    if (result[N_OR_STATUS] === DECIDED) return Promise.resolve(readDecision(result, NO_ANOMALIES))
    let decision
    try {
      decision = this.#settleShared(key, n, SHARED_CONSUME)
    } catch (error) {
      return Promise.reject(error)
    }
    if (isNeed(decision)) return this.#driver.uncovered(key, n, decision)
    return Promise.resolve(decision)
  }

  consumeTaken(key, n) {
    const taken = { decision: undefined, period: undefined }
    try {
      const decision = this.#decide(key, n, SHARED_CONSUME)
      if (isNeed(decision)) return this.#driver.uncovered(key, n, decision, taken).then((decided) => ({ decision: decided, period: taken.period }))
      return Promise.resolve({ decision, period: this.#result[PERIOD_SLOT] })
    } catch (error) {
      return Promise.reject(error)
    }
  }

  status(key) {
    return this.#table.status(key)
  }

  hold(key) {
    this.#table.hold(key)
  }

  /** KeyedTable's onKeyLimit. */
  set onKeyLimit(letGo) {
    this.#table.onKeyLimit = letGo
  }

  setBlocked(key, blocked) {
    return this.#table.setBlocked(key, blocked)
  }

  /** Drops the key; its unused units go back to the store. */
  delete(key) {
    const held = this.#table.delete(key)
    if (held) this.#driver.flushDropped()
    return held
  }

  /** As the table's (a key the store left short asks it again at its next call under a changed limit: the core's reservation clears its mark). */
  refreshPolicy(key) {
    this.#table.refreshPolicy(key)
  }

  setPolicyTtl(ttlMs) {
    this.#table.setPolicyTtl(ttlMs)
  }

  get size() {
    return this.#table.size
  }

  timelineMs() {
    return this.#table.timelineMs()
  }

  stats() {
    const stats = this.#table.stats()
    stats.store = this.#driver.storeStats()
    return stats
  }

  giveBack(key, n, periodSlot) {
    this.#table.giveBack(key, n, periodSlot)
  }

  snapshot() {
    return this.#table.snapshot()
  }

  /** Gives back every reservation and resolves once the store has it (see ShareDriver's close); the limiter stays usable. */
  close() {
    this.#table.close()
    return this.#driver.close()
  }

  get closed() {
    return false
  }
}

module.exports = { SharedTable }
