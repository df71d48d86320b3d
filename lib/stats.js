'use strict'
// stats(): what a limiter has done since it was made. The Rust core counts; its binding writes
// the counters into the limiter's result buffer (lib/contract.js's `stats` layout) and this file
// builds the object, as a decision is built (no napi-built object).

const { CONTRACT } = require('./contract.js')

const AT = CONTRACT.stats
const KINDS = CONTRACT.anomalyKinds

/** The counters `limiterStats` / `keyedStats` just wrote into `result`; every anomaly kind is present. */
function readStats(result) {
  const anomalies = {}
  for (let i = 0; i < KINDS.length; i++) anomalies[KINDS[i]] = result[AT.anomalies + i]
  return {
    allowed: result[AT.allowed],
    denied: result[AT.denied],
    anomalies,
    keys: result[AT.keys],
    evicted: result[AT.evicted],
    keyLimitRefusals: result[AT.keyLimitRefusals],
  }
}

// A shared limiter's store counters: the shared-quota driver registers a reader for its limiter
// (attachStoreStats(limiter, () => ({ calls, errors, timeouts, reserved, returned }))) and
// KeyedQuotaClock's stats() adds what it returns as `store`. Weak: it never keeps a limiter alive.
const storeReaders = new WeakMap()
const STORE_FIELDS = ['calls', 'errors', 'timeouts', 'reserved', 'returned']

/** Makes `read()` the source of `limiter.stats().store`. */
function attachStoreStats(limiter, read) {
  storeReaders.set(limiter, read)
}

/** `stats` with the limiter's store counters added, when it has a store. */
function withStoreStats(limiter, stats) {
  const read = storeReaders.get(limiter)
  if (read === undefined) return stats
  const counts = read()
  const store = {}
  for (const field of STORE_FIELDS) store[field] = counts[field]
  stats.store = store
  return stats
}

module.exports = { readStats, attachStoreStats, withStoreStats }
