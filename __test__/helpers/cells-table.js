'use strict'
// A keyed table with a shared bucket (share.bucket) on a manual clock, made as lib/keyed-table.js
// makes one, for tests that drive the native cell book directly; and a store clock that steps.
const native = require('../../lib/native.js')
const { manualClock } = require('../..')
const { parseOptions } = require('../../lib/options.js')
const { KeyedTable } = require('../../lib/keyed-table.js')
const { registerListener } = require('../../lib/anomalies.js')

const LEASE_MS = 10_000

/**
 * `{ keyed, clock, owner }`: `owner` holds the onAnomaly listener (keep it alive). With
 * `resolvePolicy(key)` (a normalized KeyPolicy, as lib/key-policy.js makes it), the table has a policy.
 */
function cellsTable({ capacity = 10, refillPerSecond = 2, onAnomaly, leaseMs = LEASE_MS, resolvePolicy } = {}) {
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15) })
  const { limiterOptions, clockArgs } = parseOptions({ capacity, refillPerSecond, suspendPolicy: 'ignore', clock })
  const owner = {}
  const listener = () => (onAnomaly === undefined ? undefined : registerListener(owner, onAnomaly))
  const policy = resolvePolicy === undefined ? undefined : () => {}
  const keyed = new KeyedTable({ limiterOptions, clockArgs, maxKeys: 100, policy, listener, share: { bucket: true, leaseMs }, resolvePolicy: resolvePolicy ?? (() => undefined) })
  return { keyed, clock, owner }
}

/** Two acquires of `key` (held by `keyed`) 5 s apart here, 65 s apart at the store: one store-clock-step. */
function stepTheStoreClock(keyed, clock, key) {
  const handle = keyed.handle
  const answer = (storeNowMs) => ({ granted: 0, tokens: 0, held: 0, fair: 10, waiting: 0, recordId: 5, storeNowMs })
  native.keyedCellsCredit(handle, key, native.keyedCellsRequest(handle, key).sentMs, answer(1e12))
  clock.advance(5_000)
  native.keyedCellsCredit(handle, key, native.keyedCellsRequest(handle, key).sentMs, answer(1e12 + 65_000))
}

/** Waits (on timers: a delivery keeps no process alive) until `predicate()` or 10 s. */
async function waitFor(predicate, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs
  while (!predicate() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  return predicate()
}

module.exports = { cellsTable, stepTheStoreClock, waitFor, LEASE_MS }
