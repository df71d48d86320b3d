'use strict'
// A keyed table with a shared bucket (share.bucket) on a manual clock, made as
// lib/keyed/keyed-table.js makes one, for tests that drive the native slice book directly; and a
// store clock that steps.
const native = require('../../lib/native/native.js')
const { manualClock } = require('../..')
const { parseOptions } = require('../../lib/limiter/options.js')
const { KeyedTable } = require('../../lib/keyed/keyed-table.js')
const { registerListener } = require('../../lib/time/anomalies.js')

const LEASE_MS = 10_000

/**
 * `{ keyed, clock, owner }`: `owner` holds the onAnomaly listener (keep it alive). With
 * `resolvePolicy(key)` (a normalized KeyPolicy, as lib/keyed/key-policy.js makes it), the table has
 * a policy.
 */
function slicesTable({ capacity = 10, refillPerSecond = 2, onAnomaly, leaseMs = LEASE_MS, resolvePolicy } = {}) {
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15) })
  const { limiterOptions, clockArgs } = parseOptions({ capacity, refillPerSecond, suspendPolicy: 'ignore', clock })
  const owner = {}
  const listener = () => (onAnomaly === undefined ? undefined : registerListener(owner, onAnomaly))
  const policy = resolvePolicy === undefined ? undefined : () => {}
  const keyed = new KeyedTable({ limiterOptions, clockArgs, maxKeys: 100, policy, listener, share: { bucket: true, leaseMs }, resolvePolicy: resolvePolicy ?? (() => undefined) })
  return { keyed, clock, owner }
}

/**
 * Two store calls for `key` (held by `keyed`) 5 s apart here, 65 s apart by the store's clock:
 * one store-clock-step. Each answer grants nothing and leaves the store's bucket full.
 */
function stepTheStoreClock(keyed, clock, key) {
  const handle = keyed.handle
  const monotonic = () => clock.monotonicMs()
  const answer = (storeNowMs) => ({ granted: 0, held: 0, tokens: 10, fleetMs: storeNowMs - 1e12, storeNowMs, recordId: 5 })
  const credit = (storeNowMs) => {
    const request = native.keyedSliceRequest(handle, key, 1, monotonic())
    native.keyedSliceCredit(handle, key, request.sentMs, answer(storeNowMs), monotonic())
  }
  credit(1e12)
  clock.advance(5_000)
  credit(1e12 + 65_000)
}

/** Waits (on timers: a delivery keeps no process alive) until `predicate()` or 10 s. */
async function waitFor(predicate, timeoutMs = 10_000) {
  const until = Date.now() + timeoutMs
  while (!predicate() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 5))
  return predicate()
}

module.exports = { slicesTable, stepTheStoreClock, waitFor, LEASE_MS }
