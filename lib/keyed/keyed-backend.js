'use strict'
// The one interface of the backends behind a KeyedQuotaClock (lib/keyed/keyed.js): the in-process
// table (lib/keyed/keyed-table.js's KeyedTable), a zone (lib/keyed/zone.js's ZoneFace) and a shared
// table (lib/keyed/shared-table.js's SharedTable). Each has:
//
// - `call`, `result`: the raw call(key) and its result buffer (refund's path); `tryCall`: the
//   call tryConsume makes (`call` itself, or a shared table's, which throws ERR_SHARED_ASYNC),
//   `tryRefusal()`: the error tryConsume throws before checking its arguments (undefined: none);
// - `settle(key, n, operation)`: the rest of a call the raw function did not finish;
// - `consume(key, n)` → Promise<Decision>; `consumeTaken(key, n)` → Promise<{ decision, period }>
//   (the period the decision took its quota units in, read right after it);
// - `status`, `delete` (true if held), `size`, `stats()`, `giveBack`, `snapshot`;
// - `close()` → Promise, and `closed`: whether the limiter was closed for good (a zone's);
// - blocks: the tables' `hold(key)` (`block` holds its key), `setBlocked(key, blocked)` (a blocked
//   key is never dropped) and `timelineMs()` (the block book's clock); a zone's `block`, `unblock`, `blockedMs`, `denied`, `blocks()` and `created`, its blocks
//   kept in the zone file (lib/keyed/zone-blocks.js).
//
// The key and `n` are checked by the limiter before any of these is called.

const { AT, OPERATION } = require('../native/contract.js')
const { readStats } = require('../native/stats.js')
const { N_OR_STATUS, DECIDED, NO_ANOMALIES, readDecision } = require('../limiter/native-call.js')

const { consume: CONSUME } = OPERATION
const PERIOD_SLOT = AT.periodSlot

/**
 * One call of `backend` on `key` (`call` and `result` its own): the Decision, or what `settle`
 * answers. KeyedQuotaClock's tryConsume and a shared table write these steps at their own call
 * sites: one site shared by every backend would see every backend's call function (the hot paths'
 * feedback mixed), measured 6-12 % slower.
 */
function decide(backend, call, result, key, n, operation) {
  result[N_OR_STATUS] = n
  result[AT.operation] = operation
  call(key)
  if (result[N_OR_STATUS] === DECIDED) return readDecision(result, NO_ANOMALIES)
  return backend.settle(key, n, operation)
}

/** What the backends that decide every call at once (the in-process table, a zone) do alike. */
class ImmediateBackend {
  get tryCall() {
    return this.call
  }

  tryRefusal() {
    return undefined
  }

  consume(key, n) {
    try {
      return Promise.resolve(decide(this, this.call, this.result, key, n, CONSUME))
    } catch (error) {
      return Promise.reject(error)
    }
  }

  consumeTaken(key, n) {
    try {
      const decision = decide(this, this.call, this.result, key, n, CONSUME)
      return Promise.resolve({ decision, period: this.result[PERIOD_SLOT] })
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Whether the limiter was closed for good (a zone's close). */
  get closed() {
    return false
  }

  /** Counters since construction (`writeStats` writes them into the result buffer). */
  stats() {
    this.writeStats()
    return readStats(this.result)
  }
}

module.exports = { ImmediateBackend, PERIOD_SLOT }
