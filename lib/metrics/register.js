'use strict'
// quota-clock-source/metrics (its entry lib/metrics.js): `registerMetrics`, prom-client
// collectors that read each limiter's stats() when the registry is scraped (nothing is counted
// twice, nothing runs per decision). prom-client is an optional peer dependency, loaded when
// registerMetrics is first called. A limiter that cannot be read (closed, or a stats() that
// throws or answers something that is not counters) is left out of the scrape, with one process
// warning; the others are collected.

const { createRequire } = require('node:module')
const path = require('node:path')
const { isClosed, isLimiter } = require('../limiter/limiter-facts.js')
const { isSharedLimiter } = require('../share/drivers.js')
const { coded, describe, isPlainObject, readOptions, thrownText } = require('../common/validate.js')

const OPTIONS = ['register', 'limiters']
const OPENMETRICS = 'application/openmetrics-text'

/** Whether `error` says that prom-client itself (not one of its own dependencies) is not installed. */
function isMissing(error) {
  return Boolean(error) && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes("'prom-client'")
}

/** The application's main module: require.main's file, or (an ES module main) the script node was started with. */
function mainModule() {
  if (typeof require.main?.filename === 'string') return require.main.filename
  const script = process.argv[1]
  return typeof script === 'string' && path.isAbsolute(script) ? script : undefined
}

/**
 * The prom-client the application loads: resolved from its main module, then from the working
 * directory, never from this package's folder (in a linked install that folder has a copy of its
 * own, whose default registry the application never serves). With `register` given, any copy
 * makes collectors it can hold (a registry takes any object that answers get()): this package's
 * own is the last resort. Else ERR_MISSING_PEER_DEPENDENCY, naming `register`.
 */
function loadPromClient(registerGiven) {
  const bases = [mainModule(), path.join(process.cwd(), 'package.json')].filter((base) => base !== undefined)
  let missing
  for (const base of bases) {
    try {
      return createRequire(base)('prom-client')
    } catch (error) {
      if (!isMissing(error)) throw error
      missing ??= error
    }
  }
  if (registerGiven) {
    try {
      return require('prom-client')
    } catch (error) {
      if (!isMissing(error)) throw error
    }
  }
  throw coded(
    Error,
    'ERR_MISSING_PEER_DEPENDENCY',
    'quota-clock-source/metrics needs prom-client, an optional peer dependency, and found none in the application (looked from its main module, then the working directory): ' +
      `run \`npm install prom-client\` (version 15 or later) in the application${registerGiven ? '' : ', or pass `register`, the prom-client Registry the application serves'}`,
    { cause: missing },
  )
}

const optionError = (ErrorClass, message) => coded(ErrorClass, 'ERR_INVALID_OPTION', message)

/** The `limiters` option as [name, limiter, stats reader] entries. */
function parseLimiters(limiters) {
  if (!isPlainObject(limiters)) {
    throw optionError(TypeError, `limiters must be an object of { <name>: QuotaClock | KeyedQuotaClock }, received ${describe(limiters)}`)
  }
  let entries
  try {
    // Own enumerable properties, read once (a getter that throws is a coded error, with its error as cause).
    entries = Object.keys(limiters).map((name) => [name, limiters[name]]).filter(([, limiter]) => limiter !== undefined)
  } catch (error) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `limiters could not be read: ${thrownText(error)}`, { cause: error })
  }
  if (entries.length === 0) throw optionError(RangeError, 'limiters must name at least one limiter, received an empty object')
  return entries.map(([name, limiter]) => {
    if (name === '') throw optionError(RangeError, 'limiters: a limiter name (the `limiter` label) must not be empty')
    if (!isLimiter(limiter)) {
      throw optionError(TypeError, `limiters.${name} must be a QuotaClock or a KeyedQuotaClock from quota-clock-source, received ${describe(limiter)}`)
    }
    return { name, limiter, shared: isSharedLimiter(limiter), warned: false }
  })
}

const isCount = (value) => typeof value === 'number' && value >= 0 && value !== Infinity // (NaN >= 0 is false)
const STORE_COUNTS = ['calls', 'errors', 'timeouts', 'reserved', 'returned']
// A KeyedQuotaClock's denials by a block, of `denied` (a QuotaClock has none).
const blockedOf = (stats) => (isCount(stats.blocked) ? Math.min(stats.blocked, stats.denied) : 0)

/** Whether `stats` is what stats() promises: counts, and on a shared limiter the store's counts. */
function isCounters(stats, shared) {
  if (!isPlainObject(stats) || !isPlainObject(stats.anomalies)) return false
  if (![stats.allowed, stats.denied, stats.keys, stats.evicted].every(isCount)) return false
  if (!Object.values(stats.anomalies).every(isCount)) return false
  return !shared || (isPlainObject(stats.store) && STORE_COUNTS.every((name) => isCount(stats.store[name])))
}

/** An entry's stats() for this scrape, or undefined (left out, warned once per entry, `by` naming the caller) when it cannot be read. */
function readStats(entry, by = 'registerMetrics') {
  let why
  if (isClosed(entry.limiter)) why = 'it was closed'
  else {
    try {
      const stats = entry.limiter.stats()
      if (isCounters(stats, entry.shared)) return stats
      why = `its stats() answered ${describe(stats)}, not counters`
    } catch (error) {
      why = `its stats() threw ${thrownText(error)}`
    }
  }
  if (!entry.warned) {
    entry.warned = true
    process.emitWarning(`${by}: limiter "${entry.name}" is left out of the scrape (${why}); the other limiters are collected`, {
      code: 'QUOTA_CLOCK_METRICS_SKIPPED',
    })
  }
  return undefined
}

/** A prom-client registry (duck-typed: the app may have its own copy of prom-client). */
function parseRegister(register, client) {
  if (register === undefined) return client.register
  const isRegistry =
    typeof register === 'object' &&
    register !== null &&
    ['registerMetric', 'getSingleMetric', 'removeSingleMetric', 'metrics'].every((method) => typeof register[method] === 'function')
  if (!isRegistry) throw optionError(TypeError, `register must be a prom-client Registry, received ${describe(register)}`)
  return register
}

/**
 * Registers quota_clock_* collectors for `limiters` on `register` (default: prom-client's global
 * registry). Each reads the limiters' stats() at scrape time. Returns `{ collectors, unregister }`.
 */
function registerMetrics(options) {
  if (!isPlainObject(options)) {
    throw optionError(TypeError, `registerMetrics options must be an object { register?, limiters }, received ${describe(options)}`)
  }
  options = readOptions(options, OPTIONS, '')
  const entries = parseLimiters(options.limiters)
  const client = loadPromClient(options.register !== undefined)
  const register = parseRegister(options.register, client)
  // An OpenMetrics registry appends `_total` to a counter's name itself.
  const openMetrics = String(register.contentType ?? '').startsWith(OPENMETRICS)
  const counterName = (name) => (openMetrics ? name : `${name}_total`)
  const definitions = {
    decisions: {
      Type: client.Counter,
      name: counterName('quota_clock_decisions'),
      help: 'Rate-limit decisions since the limiter was made, by result (allowed, blocked: denied by a block, or denied: the other denials).',
      labelNames: ['limiter', 'result'],
      entries,
      write(metric, name, stats) {
        const blocked = blockedOf(stats)
        metric.inc({ limiter: name, result: 'allowed' }, stats.allowed)
        metric.inc({ limiter: name, result: 'denied' }, stats.denied - blocked)
        if (stats.blocked !== undefined) metric.inc({ limiter: name, result: 'blocked' }, blocked)
      },
    },
    blocks: {
      Type: client.Counter,
      name: counterName('quota_clock_blocks'),
      help: 'Blocks the limiter started (by its block option or block(key, forMs); extending one is not a new one).',
      labelNames: ['limiter'],
      entries,
      write(metric, name, stats) {
        metric.inc({ limiter: name }, isCount(stats.blocks) ? stats.blocks : 0)
      },
    },
    anomalies: {
      Type: client.Counter,
      name: counterName('quota_clock_anomalies'),
      help: 'Clock anomalies the limiter raised (wall steps, suspends, period regressions and skips), by kind.',
      labelNames: ['limiter', 'kind'],
      entries,
      write(metric, name, stats) {
        for (const [kind, count] of Object.entries(stats.anomalies)) metric.inc({ limiter: name, kind }, count)
      },
    },
    keys: {
      Type: client.Gauge,
      name: 'quota_clock_keys',
      help: 'Keys the limiter holds now (1 for a QuotaClock).',
      labelNames: ['limiter'],
      entries,
      write(metric, name, stats) {
        metric.set({ limiter: name }, stats.keys)
      },
    },
    evictions: {
      Type: client.Counter,
      name: counterName('quota_clock_evictions'),
      help: 'Keys the limiter dropped by itself (to make room at maxKeys, or idle keys swept).',
      labelNames: ['limiter'],
      entries,
      write(metric, name, stats) {
        metric.inc({ limiter: name }, stats.evicted)
      },
    },
  }
  const sharedEntries = entries.filter((entry) => entry.shared)
  if (sharedEntries.length > 0) {
    definitions.storeCalls = {
      Type: client.Counter,
      name: counterName('quota_clock_store_calls'),
      help: "Calls a shared limiter made to its quota store, by outcome (ok, error, or timeout: no answer within share.timeoutMs).",
      labelNames: ['limiter', 'outcome'],
      entries: sharedEntries,
      write(metric, name, { store }) {
        metric.inc({ limiter: name, outcome: 'ok' }, Math.max(0, store.calls - store.errors - store.timeouts))
        metric.inc({ limiter: name, outcome: 'error' }, store.errors)
        metric.inc({ limiter: name, outcome: 'timeout' }, store.timeouts)
      },
    }
  }
  for (const { name } of Object.values(definitions)) {
    if (register.getSingleMetric(name) !== undefined) {
      throw optionError(
        RangeError,
        `register already has a metric named ${name}: registerMetrics was called on it before (call unregister() on what it returned first, or pass every limiter to one registerMetrics call)`,
      )
    }
  }
  const collectors = {}
  for (const [key, definition] of Object.entries(definitions)) {
    const { Type, name, help, labelNames, entries: sources, write } = definition
    collectors[key] = new Type({
      name,
      help,
      labelNames,
      registers: [],
      // Counters are set to the limiter's own totals at every scrape (stats() counts since construction).
      collect() {
        this.reset()
        for (const entry of sources) {
          const stats = readStats(entry)
          if (stats !== undefined) write(this, entry.name, stats)
        }
      },
    })
  }
  const registered = []
  try {
    for (const collector of Object.values(collectors)) {
      register.registerMetric(collector)
      registered.push(collector)
    }
  } catch (error) {
    for (const collector of registered) register.removeSingleMetric(collector.name)
    throw error
  }
  let live = true
  return {
    collectors,
    /** Removes these collectors from the registry (only those still registered there as ours). */
    unregister() {
      if (!live) return
      live = false
      for (const collector of registered) {
        if (register.getSingleMetric(collector.name) === collector) register.removeSingleMetric(collector.name)
      }
    },
  }
}

module.exports = { registerMetrics, parseLimiters, readStats }
