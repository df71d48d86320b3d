'use strict'
// quota-clock-source/otel (its entry lib/otel.js): `registerOtelMetrics`, the counters of
// registerMetrics (./register.js) as OpenTelemetry observable instruments, read from each limiter's
// stats() when the meter collects (nothing runs per decision). @opentelemetry/api is an optional
// peer dependency, loaded when registerOtelMetrics is first called. A limiter that cannot be read
// (closed, or a stats() that throws or answers nonsense) is left out of that collection, warned once.

const { parseLimiters, readStats } = require('./register.js')
const { coded, describe, isPlainObject, readOptions } = require('../common/validate.js')
const { requirePeer } = require('../common/peer.js')

const OPTIONS = ['limiters', 'meter']
const METER_NAME = 'quota-clock-source'
const optionError = (ErrorClass, message) => coded(ErrorClass, 'ERR_INVALID_OPTION', `registerOtelMetrics: ${message}`)

function loadApi() {
  return requirePeer('@opentelemetry/api', 'otel', '@opentelemetry/api >= 1.4', () => require('@opentelemetry/api'))
}

function checkMeter(meter) {
  const isMeter = typeof meter === 'object' && meter !== null && ['createObservableCounter', 'createObservableGauge', 'addBatchObservableCallback', 'removeBatchObservableCallback'].every((m) => typeof meter[m] === 'function')
  if (!isMeter) throw optionError(TypeError, `meter must be an OpenTelemetry Meter (metrics.getMeter(name)), received ${describe(meter)}`)
  return meter
}

const isCount = (value) => typeof value === 'number' && value >= 0 && value !== Infinity

/**
 * Reports `limiters` (by name: the `limiter` attribute) through `meter` (default: the global
 * MeterProvider's meter named quota-clock-source). Returns `{ unregister() }`.
 */
function registerOtelMetrics(options) {
  if (!isPlainObject(options)) throw optionError(TypeError, `options must be an object { limiters, meter? }, received ${describe(options)}`)
  options = readOptions(options, OPTIONS, '')
  const entries = parseLimiters(options.limiters)
  const api = loadApi()
  const meter = options.meter === undefined ? api.metrics.getMeter(METER_NAME) : checkMeter(options.meter)
  const counter = (name, description, unit = '{call}') => meter.createObservableCounter(name, { description, unit, valueType: api.ValueType.INT })
  const instruments = {
    decisions: counter('quota_clock.decisions', 'Rate-limit decisions since the limiter was made, by result (allowed, denied, blocked).', '{decision}'),
    anomalies: counter('quota_clock.anomalies', 'Clock anomalies the limiter raised, by kind.', '{anomaly}'),
    evictions: counter('quota_clock.evictions', 'Keys the limiter dropped by itself (to make room at maxKeys, or idle keys swept).', '{key}'),
    keyLimitRefusals: counter('quota_clock.key_limit_refusals', 'New keys refused at maxKeys because every held key had quota use (ERR_KEY_LIMIT).', '{key}'),
    blocks: counter('quota_clock.blocks', 'Blocks started on keys.', '{block}'),
    storeCalls: counter('quota_clock.store.calls', "Calls a shared limiter made to its store, by outcome (ok, error, or timeout: no answer within share.timeoutMs).", '{call}'),
    keys: meter.createObservableGauge('quota_clock.keys', { description: 'Keys the limiter holds now (1 for a QuotaClock).', unit: '{key}', valueType: api.ValueType.INT }),
  }
  const observables = Object.values(instruments)
  // One stats() per limiter per collection, for every instrument (a batch callback).
  const collect = (result) => {
    for (const entry of entries) {
      const stats = readStats(entry, 'registerOtelMetrics')
      if (stats === undefined) continue
      const limiter = entry.name
      const blocked = isCount(stats.blocked) ? stats.blocked : 0
      result.observe(instruments.decisions, stats.allowed, { limiter, result: 'allowed' })
      result.observe(instruments.decisions, Math.max(0, stats.denied - blocked), { limiter, result: 'denied' })
      if (isCount(stats.blocked)) result.observe(instruments.decisions, blocked, { limiter, result: 'blocked' })
      for (const [kind, count] of Object.entries(stats.anomalies)) result.observe(instruments.anomalies, count, { limiter, kind })
      result.observe(instruments.evictions, stats.evicted, { limiter })
      if (isCount(stats.keyLimitRefusals)) result.observe(instruments.keyLimitRefusals, stats.keyLimitRefusals, { limiter })
      // (A limiter that cannot block keys has started none.)
      result.observe(instruments.blocks, isCount(stats.blocks) ? stats.blocks : 0, { limiter })
      if (entry.shared) {
        const { calls, errors, timeouts } = stats.store
        result.observe(instruments.storeCalls, Math.max(0, calls - errors - timeouts), { limiter, outcome: 'ok' })
        result.observe(instruments.storeCalls, errors, { limiter, outcome: 'error' })
        result.observe(instruments.storeCalls, timeouts, { limiter, outcome: 'timeout' })
      }
      result.observe(instruments.keys, stats.keys, { limiter })
    }
  }
  meter.addBatchObservableCallback(collect, observables)
  let live = true
  return {
    /** Stops reporting these limiters (the meter's instruments stay, with nothing observed). */
    unregister() {
      if (!live) return
      live = false
      meter.removeBatchObservableCallback(collect, observables)
    },
  }
}

module.exports = { registerOtelMetrics }
