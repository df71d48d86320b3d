'use strict'
// stats(): what a limiter has done since it was made. The Rust core counts; its binding writes the
// counters into the limiter's result buffer (lib/native/contract.js's `stats` layout) and this file
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

module.exports = { readStats }
