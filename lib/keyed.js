'use strict'
// KeyedQuotaClock, many keys in one limiter: argument checks, the policy call, and the decision
// object. The Rust core holds every key.

const native = require('./native.js')
const { registerListener } = require('./anomalies.js')
const { toPeriod } = require('./calendar.js')
const { startingReadings, JsClock } = require('./clocks.js')
const { toPublicError, callNative, internalError } = require('./errors.js')
const { rememberLimiter } = require('./http/limiter-facts.js')
const { parseOptions, quotaInput, checkPositiveCount } = require('./options.js')
const { LAYOUT, AT, STATUS, OPERATION, BASIS } = require('./contract.js')
const { REGISTRY, NO_ANOMALIES } = require('./registry.js')
const { readStats, withStoreStats } = require('./stats.js')
const { coded, isPlainObject, readOptions, typeError, rangeError, checkNumber, thrownText } = require('./validate.js')

const KEYED_KEYS = ['policy', 'maxKeys', 'restore']
const POLICY_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'quota']
const DEFAULT_MAX_KEYS = 1_000_000
const MAX_KEY_UNITS = 256
// Each limiter's result buffer, laid out as the contract's (lib/contract.js): in, `n`, the
// operation and readings taken in JS; out, the status (what the native side needs first, having
// read and changed nothing: the JS elapsed-realtime reader, a JS clock's readings, or the key's
// policy), then the decision (quotaRemaining NaN: no quota).
const { consume: CONSUME, refund: REFUND } = OPERATION
const N_OR_STATUS = AT.nOrStatus
const DECIDED = STATUS.decided
const DEFAULT_CHOICE = 0xffffffff

/** A string of 1 to 256 UTF-16 code units, checked before any clock is read. */
function checkKey(key) {
  if (typeof key !== 'string') throw typeError('ERR_INVALID_ARG', 'key', 'a string of 1 to 256 UTF-16 code units', key)
  if (key.length === 0 || key.length > MAX_KEY_UNITS) {
    throw coded(RangeError, 'ERR_INVALID_ARG', `key must be a string of 1 to 256 UTF-16 code units; received a string of ${key.length}`)
  }
}

/** A KeyPolicy merged with the defaults, type-checked; its values are checked natively (once). */
function normalizePolicy(policy, path, defaults) {
  if (policy === undefined) return { ...defaults, path }
  if (!isPlainObject(policy)) throw typeError('ERR_INVALID_OPTION', path, 'a KeyPolicy object { capacity?, refillPerSecond?, initialTokens?, quota? } or undefined', policy)
  // Read once, own properties only (a getter that throws is ERR_INVALID_OPTION with its error as cause).
  policy = readOptions(policy, POLICY_KEYS, path)
  const capacity = policy.capacity === undefined ? defaults.capacity : checkNumber(policy.capacity, `${path}.capacity`)
  const refillPerSecond = policy.refillPerSecond === undefined ? defaults.refillPerSecond : checkNumber(policy.refillPerSecond, `${path}.refillPerSecond`)
  let initialTokens
  if (policy.initialTokens !== undefined) initialTokens = checkNumber(policy.initialTokens, `${path}.initialTokens`)
  // The limiter's own initialTokens if it set one (never above this key's capacity), else a full bucket.
  else initialTokens = defaults.initialTokensGiven ? Math.min(defaults.initialTokens, capacity) : capacity
  let { quotaLimit, quotaPeriod } = defaults
  if (policy.quota === null) {
    quotaLimit = undefined
    quotaPeriod = undefined
  } else if (policy.quota !== undefined) {
    ;({ quotaLimit, quotaPeriod } = quotaInput(policy.quota, `${path}.quota`, 'an object { limit, period } or null'))
  }
  return { capacity, refillPerSecond, initialTokens, quotaLimit, quotaPeriod, path }
}

/** Calls the user's policy for a key and normalizes what it returned. */
function resolvePolicy(policy, key, defaults) {
  const path = `policy(${JSON.stringify(key)})`
  let returned
  try {
    returned = policy(key)
  } catch (error) {
    const wrapped = coded(TypeError, 'ERR_INVALID_OPTION', `${path} threw: ${thrownText(error)}`)
    wrapped.cause = error
    throw wrapped
  }
  return normalizePolicy(returned, path, defaults)
}

/** Gives a snapshot's keys their policies (one call per key; equal policies are passed once). */
function assignPolicies(plan, policy, defaults) {
  const inputs = []
  const bySignature = new Map()
  const choices = new Uint32Array(native.snapshotLength(plan))
  const length = native.snapshotLength(plan)
  for (let i = 0; i < length; i++) {
    const key = native.snapshotKeyAt(plan, i)
    const normalized = resolvePolicy(policy, key, defaults)
    const { capacity, refillPerSecond, initialTokens, quotaLimit, quotaPeriod } = normalized
    if (capacity === defaults.capacity && refillPerSecond === defaults.refillPerSecond && initialTokens === defaults.initialTokens && quotaLimit === defaults.quotaLimit && quotaPeriod === defaults.quotaPeriod) {
      choices[i] = DEFAULT_CHOICE
      continue
    }
    const signature = JSON.stringify([capacity, refillPerSecond, initialTokens, quotaLimit, quotaPeriod])
    let choice = bySignature.get(signature)
    if (choice === undefined) {
      choice = inputs.length
      inputs.push(normalized)
      bySignature.set(signature, choice)
    }
    choices[i] = choice
  }
  callNative(() => native.snapshotSetPolicies(plan, inputs, choices))
}

function readDecision(result, anomalies) {
  const quotaRemaining = result[AT.quotaRemaining]
  return {
    allowed: result[AT.allowed] === 1,
    retryAfterMs: result[AT.retryAfterMs],
    retryAfterBasis: BASIS[result[AT.basis]],
    tokens: result[AT.tokens],
    quotaRemaining: quotaRemaining === quotaRemaining ? quotaRemaining : null,
    anomalies,
  }
}

// Whether a value is a KeyedQuotaClock this class made (as isQuotaClock in lib/quota-clock.js).
let isKeyedQuotaClock

class KeyedQuotaClock {
  static {
    isKeyedQuotaClock = (value) => typeof value === 'object' && value !== null && #native in value
  }

  #native
  #call
  #result
  #policy
  #defaults
  // The JsClock of a limiter that reads a clock (or systemClock's reader) in JS, as QuotaClock's.
  #js

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly, initialTokensGiven, read } = parseOptions(options, KEYED_KEYS)
    const { policy, restore } = read
    if (policy !== undefined && typeof policy !== 'function') throw typeError('ERR_INVALID_OPTION', 'policy', 'a function (key) => KeyPolicy | undefined', policy)
    let maxKeys = DEFAULT_MAX_KEYS
    if (read.maxKeys !== undefined) {
      maxKeys = checkNumber(read.maxKeys, 'maxKeys')
      if (!(Number.isSafeInteger(maxKeys) && maxKeys >= 1)) throw rangeError('ERR_INVALID_OPTION', 'maxKeys', 'a positive safe integer', maxKeys)
    }
    if (restore !== undefined && !(restore instanceof Uint8Array)) {
      throw typeError('ERR_INVALID_OPTION', 'restore', 'a Uint8Array from snapshot()', restore)
    }
    const defaults = { ...limiterOptions, initialTokensGiven }
    let plan
    if (restore !== undefined) {
      // The options' values first: bad options call no policy.
      if (policy !== undefined) callNative(() => native.checkLimiterOptions(limiterOptions))
      plan = callNative(() => native.snapshotParse(restore, maxKeys))
      if (policy !== undefined) assignPolicies(plan, policy, defaults)
    }
    const { kind, manual } = clockArgs
    const { monotonicMs, wallMs, elapsedRealtimeMs } = startingReadings(clockArgs)
    const result = new Float64Array(LAYOUT.length)
    const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
    this.#native = callNative(() =>
      native.keyedCreate({
        registry: REGISTRY,
        options: limiterOptions,
        maxKeys,
        hasPolicy: policy !== undefined,
        result,
        clock: { kind, manual, monotonicMs, wallMs, elapsedRealtimeMs },
        anomalyListener: listener,
        restore: plan,
      }),
    )
    this.#call = native.keyedCallFunction(this.#native)
    this.#result = result
    this.#policy = policy
    this.#defaults = defaults
    this.#js = JsClock.of(clockArgs)
    rememberLimiter(this, clockArgs, policy === undefined) // for the HTTP middleware
  }

  /** `n` (default 1) against the key's own capacity; being limited is a value, not an error. */
  tryConsume(key, n = 1) {
    checkKey(key)
    // `n`'s capacity bound is checked natively, against the key's own.
    if (n !== 1) checkPositiveCount(n)
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = CONSUME
    this.#call(key)
    if (result[N_OR_STATUS] === DECIDED) return readDecision(result, NO_ANOMALIES)
    return this.#settle(key, n, CONSUME)
  }

  /** Reconciles, then gives back `n` tokens and quota units; a key not held is left alone. */
  refund(key, n = 1) {
    checkKey(key)
    if (n !== 1) checkPositiveCount(n)
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = REFUND
    this.#call(key)
    if (result[N_OR_STATUS] !== DECIDED) this.#settle(key, n, REFUND)
  }

  /** The rare outcomes: anomalies, an error, or what the native side needs first (a policy, readings). */
  #settle(key, n, operation) {
    const result = this.#result
    let policy
    for (;;) {
      const status = result[N_OR_STATUS]
      if (status === DECIDED) return operation === CONSUME ? readDecision(result, NO_ANOMALIES) : undefined
      if (status === STATUS.decidedWithAnomalies) {
        const anomalies = callNative(() => native.keyedTakeAnomalies(this.#native))
        return operation === CONSUME ? readDecision(result, anomalies) : undefined
      }
      if (status === STATUS.error) throw this.#failed(toPublicError(native.keyedTakeError(this.#native)))
      let readings
      if (status === STATUS.needsPolicy) policy = resolvePolicy(this.#policy, key, this.#defaults)
      else if (status === STATUS.needsReadings) readings = this.#js.readings()
      else if (status === STATUS.needsReader) readings = [result[AT.monotonicMs], result[AT.wallMs], this.#js.elapsedRealtime()]
      else throw internalError(`status ${status}`)
      // `policy` and a JS clock may have made calls of their own on this limiter: write it all again.
      result[N_OR_STATUS] = n
      result[AT.operation] = operation
      if (readings !== undefined) {
        result[AT.monotonicMs] = readings[0]
        result[AT.wallMs] = readings[1]
        result[AT.elapsedRealtimeMs] = readings[2] === undefined ? NaN : readings[2]
        result[AT.hasElapsedRealtime] = readings[2] === undefined ? 0 : 1
      }
      this.#slow(() => native.keyedCallSlow(this.#native, key, policy, readings !== undefined))
    }
  }

  /** A public error about to be thrown (a monotonic regression latches a JS clock). */
  #failed(error) {
    return this.#js === undefined ? error : this.#js.failed(error)
  }

  /** A native call of the slow paths, its coded errors made public. */
  #slow(body) {
    try {
      return body()
    } catch (error) {
      throw error && typeof error.code === 'string' ? this.#failed(toPublicError(error)) : error
    }
  }

  /** QuotaClock's status() for one key (a key not held: what a fresh key would have, not holding it). */
  status(key) {
    checkKey(key)
    let policy
    let readings = []
    for (;;) {
      const status = this.#slow(() => native.keyedStatus(this.#native, key, policy, readings[0], readings[1], readings[2]))
      const { needs } = status
      if (needs === 'policy') policy = resolvePolicy(this.#policy, key, this.#defaults)
      else if (needs === 'readings') readings = this.#js.readings()
      else if (needs === 'reader') readings = [status.takenMonotonicMs, status.takenWallMs, this.#js.elapsedRealtime()]
      else {
        return {
          tokens: status.tokens,
          quotaUsed: status.quotaUsed ?? null,
          quotaRemaining: status.quotaRemaining ?? null,
          period: status.period == null ? null : toPeriod(status.period),
          capacity: status.capacity,
          refillPerSecond: status.refillPerSecond,
          quotaLimit: status.quotaLimit ?? null,
        }
      }
    }
  }

  /** Drops the key and all its state; true if it was held. Reads no clock. */
  delete(key) {
    checkKey(key)
    return callNative(() => native.keyedDelete(this.#native, key))
  }

  /** Keys held now (idle keys may be dropped at any time, so it can shrink by itself). */
  get size() {
    return callNative(() => native.keyedSize(this.#native))
  }

  /** Counters since construction: decisions, anomalies, keys held now, evictions, key-limit refusals (and `store`, when shared). Reads no clock. */
  stats() {
    callNative(() => native.keyedStats(this.#native))
    return withStoreStats(this, readStats(this.#result))
  }

  /** A versioned binary image of every held key, for `new KeyedQuotaClock({ ..., restore })`. Reads no clock. */
  snapshot() {
    return callNative(() => native.keyedSnapshot(this.#native))
  }
}

module.exports = { KeyedQuotaClock, isKeyedQuotaClock }
