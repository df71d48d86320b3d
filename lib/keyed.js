'use strict'
// KeyedQuotaClock, many keys in one limiter: argument checks, the policy call, and the decision
// object. The Rust core holds every key.

const native = require('./native.js')
const { registerListener } = require('./anomalies.js')
const { startingReadings, JsClock } = require('./clocks.js')
const { callNative } = require('./errors.js')
const { rememberLimiter, rememberClosed } = require('./limiter-facts.js')
const { parseOptions, quotaInput, bucketOptions, noBucketToFill, checkPositiveCount } = require('./options.js')
const { LAYOUT, AT, OPERATION, STATUS } = require('./contract.js')
const { REGISTRY } = require('./registry.js')
const { ZoneFace, zoneInput } = require('./zone.js')
const { N_OR_STATUS, DECIDED, DECIDED_WITH_ANOMALIES, ERROR, NO_ANOMALIES, RESUME, readDecision, resume, failure, callLimiter, toStatus } = require('./native-call.js')
const { coded, isPlainObject, readOptions, typeError, rangeError, checkNumber, thrownText } = require('./validate.js')
const { readStats } = require('./stats.js')
const { ShareDriver, SHARED_CONSUME } = require('./share.js')
const { parseShareOptions } = require('./share-options.js')

const KEYED_KEYS = ['policy', 'maxKeys', 'restore', 'share', 'zone']
const POLICY_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'quota']
const DEFAULT_MAX_KEYS = 1_000_000
// A snapshot's key count is a u32, and a table of more keys than that would not fit in memory anyway.
const MAX_MAX_KEYS = 2 ** 32
const MAX_KEY_UNITS = 256
// Each limiter has its own result buffer (lib/native-call.js): in, `n`, the operation and
// readings taken in JS; out, the status, then the decision.
const { consume: CONSUME, refund: REFUND } = OPERATION
const NEEDS_STORE = STATUS.needsStore
const DECIDED_WITH_WORK = STATUS.decidedWithWork
const DEFAULT_CHOICE = 0xffffffff

/** A string of 1 to 256 UTF-16 code units, checked before any clock is read. */
function checkKey(key) {
  if (typeof key !== 'string') throw typeError('ERR_INVALID_ARG', 'key', 'a string of 1 to 256 UTF-16 code units', key)
  if (key.length === 0 || key.length > MAX_KEY_UNITS) {
    throw coded(RangeError, 'ERR_INVALID_ARG', `key must be a string of 1 to 256 UTF-16 code units; received a string of ${key.length}`)
  }
}

/**
 * A KeyPolicy merged with the defaults, type-checked; its values are checked natively (once).
 * The bucket: `capacity` or `refillPerSecond` alone overrides that one of the defaults' bucket;
 * with defaults that have no bucket (a quota alone), a key gets one only with both, and neither
 * keeps it quota-only.
 */
function normalizePolicy(policy, path, defaults) {
  if (policy === undefined) return { ...defaults, path }
  if (!isPlainObject(policy)) throw typeError('ERR_INVALID_OPTION', path, 'a KeyPolicy object { capacity?, refillPerSecond?, initialTokens?, quota? } or undefined', policy)
  // Read once, own properties only (a getter that throws is ERR_INVALID_OPTION with its error as cause).
  policy = readOptions(policy, POLICY_KEYS, path)
  let { capacity, refillPerSecond, bucket } = defaults
  if (!bucket && (policy.capacity !== undefined || policy.refillPerSecond !== undefined)) {
    ;({ capacity, refillPerSecond, bucket } = bucketOptions(policy.capacity, policy.refillPerSecond, true, `${path}.`))
  } else {
    if (policy.capacity !== undefined) capacity = checkNumber(policy.capacity, `${path}.capacity`)
    if (policy.refillPerSecond !== undefined) refillPerSecond = checkNumber(policy.refillPerSecond, `${path}.refillPerSecond`)
  }
  let initialTokens
  if (policy.initialTokens !== undefined) {
    if (!bucket) throw noBucketToFill(`${path}.initialTokens`, policy.initialTokens)
    initialTokens = checkNumber(policy.initialTokens, `${path}.initialTokens`)
  }
  // The limiter's own initialTokens if it set one (never above this key's capacity), else a full bucket.
  else initialTokens = defaults.initialTokensGiven ? Math.min(defaults.initialTokens, capacity) : capacity
  let { quotaLimit, quotaPeriod } = defaults
  if (policy.quota === null) {
    if (!bucket) throw coded(TypeError, 'ERR_INVALID_OPTION', `${path}.quota is null and the key has no bucket (the limiter's defaults are a quota alone): give it capacity and refillPerSecond, or a quota`)
    quotaLimit = undefined
    quotaPeriod = undefined
  } else if (policy.quota !== undefined) {
    ;({ quotaLimit, quotaPeriod } = quotaInput(policy.quota, `${path}.quota`, 'an object { limit, period } or null'))
  }
  return { capacity, refillPerSecond, initialTokens, bucket, quotaLimit, quotaPeriod, path }
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
  if (isThenable(returned)) {
    // Its rejection is handled here: a refused promise must not kill the process later.
    try {
      Promise.resolve(returned).then(undefined, ignore)
    } catch {
      // A thenable whose `then` throws: nothing is pending.
    }
    throw coded(
      TypeError,
      'ERR_INVALID_OPTION',
      `${path} returned a promise; policy must answer synchronously (load the plans before, keep them in a Map, and return the key's KeyPolicy or undefined from it)`,
    )
  }
  return normalizePolicy(returned, path, defaults)
}

function ignore() {}

/** Whether `value` is a promise or any other thenable (a `then` getter that throws: no, and the KeyPolicy check refuses it). */
function isThenable(value) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false
  if (value instanceof Promise) return true
  try {
    return typeof value.then === 'function'
  } catch {
    return false
  }
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
    const { capacity, refillPerSecond, initialTokens, bucket, quotaLimit, quotaPeriod } = normalized
    if (capacity === defaults.capacity && refillPerSecond === defaults.refillPerSecond && initialTokens === defaults.initialTokens && bucket === defaults.bucket && quotaLimit === defaults.quotaLimit && quotaPeriod === defaults.quotaPeriod) {
      choices[i] = DEFAULT_CHOICE
      continue
    }
    const signature = JSON.stringify([capacity, refillPerSecond, initialTokens, bucket, quotaLimit, quotaPeriod])
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

let takenPeriodOf
let giveBackKeyed
let consumeTakenOf

class KeyedQuotaClock {
  #native
  #call
  #result
  #policy
  #defaults
  // The JsClock of a limiter that reads a clock (or systemClock's reader) in JS, as QuotaClock's.
  #js
  // With `zone`: the shared table every call goes to (lib/zone.js).
  #zone
  // A shared limiter's store calls (lib/share.js); undefined without `share`.
  #share

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly, initialTokensGiven, read } = parseOptions(options, KEYED_KEYS)
    const { policy, restore } = read
    const share = read.share === undefined ? undefined : parseShareOptions(read.share)
    if (share !== undefined && read.zone !== undefined) {
      throw coded(TypeError, 'ERR_INVALID_OPTION', 'zone and share cannot be used together: a zone is one limiter for the processes of one host, share one quota for every instance; pick one')
    }
    if (policy !== undefined && typeof policy !== 'function') throw typeError('ERR_INVALID_OPTION', 'policy', 'a function (key) => KeyPolicy | undefined', policy)
    let maxKeys = DEFAULT_MAX_KEYS
    if (read.maxKeys !== undefined) {
      maxKeys = checkNumber(read.maxKeys, 'maxKeys')
      if (!(Number.isSafeInteger(maxKeys) && maxKeys >= 1 && maxKeys <= MAX_MAX_KEYS)) throw rangeError('ERR_INVALID_OPTION', 'maxKeys', 'a positive integer no larger than 2**32 (4294967296)', maxKeys)
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
    if (read.zone !== undefined) {
      const zone = zoneInput(read.zone)
      const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
      this.#zone = new ZoneFace({ zone, limiterOptions, clockArgs, maxKeys, policy, plan, listener, resolvePolicy: (key) => resolvePolicy(policy, key, defaults) })
      // The keyed call path (tryConsume, refund) runs on the zone's call function and buffer.
      this.#call = this.#zone.call
      this.#result = this.#zone.result
      this.#policy = policy
      this.#defaults = defaults
      rememberLimiter(this, clockArgs, policy === undefined) // for the HTTP middleware
      return
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
        share: share === undefined ? undefined : { leaseUnits: share.leaseUnits },
      }),
    )
    this.#call = native.keyedCallFunction(this.#native)
    this.#result = result
    this.#policy = policy
    this.#defaults = defaults
    this.#js = JsClock.of(clockArgs)
    if (share !== undefined) {
      const js = this.#js
      this.#share = new ShareDriver(
        this,
        this.#native,
        share,
        (key, n, operation) => this.#sharedDecide(key, n, operation),
        js === undefined ? () => undefined : () => js.readings()[0],
        () => this.#result[AT.periodSlot],
      )
    }
    rememberLimiter(this, clockArgs, policy === undefined) // for the HTTP middleware
  }

  /** `n` (default 1) against the key's own capacity; being limited is a value, not an error. */
  tryConsume(key, n = 1) {
    if (this.#share !== undefined) throw sharedAsync()
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

  /**
   * `tryConsume`'s answer as a promise; on a shared limiter, decided against the key's
   * reservation of the shared quota (one native call when it covers `n`), else after one store
   * call (see lib/share.js).
   */
  consume(key, n = 1) {
    const share = this.#share
    if (share === undefined) {
      try {
        return Promise.resolve(this.tryConsume(key, n))
      } catch (error) {
        return Promise.reject(error)
      }
    }
    try {
      checkKey(key)
      if (n !== 1) checkPositiveCount(n)
    } catch (error) {
      return Promise.reject(error)
    }
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = SHARED_CONSUME
    this.#call(key)
    if (result[N_OR_STATUS] === DECIDED) return Promise.resolve(readDecision(result, NO_ANOMALIES))
    let decision
    try {
      decision = this.#afterSharedCall(key, n, SHARED_CONSUME)
    } catch (error) {
      return Promise.reject(error)
    }
    if (typeof decision === 'number') return share.uncovered(key, n, decision)
    return Promise.resolve(decision)
  }

  /**
   * `consume` with the period its quota units were taken in, read right after the decision (for
   * the HTTP middleware's rollback, which must not read it after an await).
   */
  #consumeTaken(key, n) {
    const share = this.#share
    if (share === undefined) {
      try {
        const decision = this.tryConsume(key, n)
        return Promise.resolve({ decision, period: this.#result[AT.periodSlot] })
      } catch (error) {
        return Promise.reject(error)
      }
    }
    const taken = { decision: undefined, period: undefined }
    try {
      checkKey(key)
      if (n !== 1) checkPositiveCount(n)
      const decision = this.#sharedDecide(key, n, SHARED_CONSUME)
      if (typeof decision === 'number') return share.uncovered(key, n, decision, taken).then((decided) => ({ decision: decided, period: taken.period }))
      return Promise.resolve({ decision, period: this.#result[AT.periodSlot] })
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** A shared consume in one of its modes (lib/share.js): a Decision, or the units it lacks. */
  #sharedDecide(key, n, operation) {
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = operation
    this.#call(key)
    return this.#afterSharedCall(key, n, operation)
  }

  #afterSharedCall(key, n, operation) {
    const result = this.#result
    if (result[N_OR_STATUS] === DECIDED) return readDecision(result, NO_ANOMALIES)
    const decision = this.#settle(key, n, operation)
    if (typeof decision !== 'number') this.#share.afterDecision(key)
    return decision
  }

  /**
   * Gives back every reservation of a shared limiter and resolves once the store has it; a zone
   * limiter unmaps its zone (the file and its keys stay; later calls throw). Else resolves at once.
   */
  close() {
    if (this.#zone !== undefined) {
      this.#zone.close()
      rememberClosed(this)
    }
    if (this.#share === undefined) return Promise.resolve()
    return this.#share.close()
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
    if (this.#zone !== undefined) return this.#zone.settle(key, n, operation)
    const result = this.#result
    const final = (status) => {
      if (status === DECIDED) return operation === REFUND ? undefined : readDecision(result, NO_ANOMALIES)
      if (status === DECIDED_WITH_WORK) return readDecision(result, NO_ANOMALIES)
      if (status === NEEDS_STORE) return result[AT.retryAfterMs]
      if (status === DECIDED_WITH_ANOMALIES) {
        const anomalies = callNative(() => native.keyedTakeAnomalies(this.#native))
        return operation === REFUND ? undefined : readDecision(result, anomalies)
      }
      if (status === ERROR) throw failure(this.#js, native.keyedTakeError(this.#native))
      return RESUME
    }
    return resume(result[N_OR_STATUS], result, this.#js, final, () => resolvePolicy(this.#policy, key, this.#defaults), (policy, supplied) => {
      // `policy` and a JS clock may have made calls of their own on this limiter: write it all again.
      result[N_OR_STATUS] = n
      result[AT.operation] = operation
      callLimiter(this.#js, () => native.keyedCallSlow(this.#native, key, policy, supplied))
      return result[N_OR_STATUS]
    })
  }

  /** QuotaClock's status() for one key (a key not held: what a fresh key would have, not holding it). */
  status(key) {
    checkKey(key)
    if (this.#zone !== undefined) return this.#zone.status(key)
    const result = this.#result
    let read
    const again = (policy, supplied) => {
      read = callLimiter(this.#js, () => native.keyedStatus(this.#native, key, policy, supplied))
      return result[N_OR_STATUS]
    }
    const final = (status) => (status === DECIDED ? toStatus(read, read.capacity, read.refillPerSecond, read.quotaLimit) : RESUME)
    return resume(again(undefined, false), result, this.#js, final, () => resolvePolicy(this.#policy, key, this.#defaults), again)
  }

  /** Drops the key and all its state; true if it was held. Reads no clock. */
  delete(key) {
    checkKey(key)
    if (this.#zone !== undefined) return this.#zone.delete(key)
    const held = callNative(() => native.keyedDelete(this.#native, key))
    // A shared key's unused units go back to the store.
    if (held && this.#share !== undefined) this.#share.flushDropped()
    return held
  }

  /** Keys held now (idle keys may be dropped at any time, so it can shrink by itself). */
  get size() {
    if (this.#zone !== undefined) return this.#zone.size
    return callNative(() => native.keyedSize(this.#native))
  }

  /** Counters since construction: decisions, anomalies, keys held now, evictions, key-limit refusals (and `store`, when shared). Reads no clock. */
  stats() {
    if (this.#zone !== undefined) this.#zone.writeStats()
    else callNative(() => native.keyedStats(this.#native))
    const stats = readStats(this.#result)
    if (this.#share !== undefined) stats.store = this.#share.storeStats()
    return stats
  }

  static {
    // For the HTTP middleware's all-or-nothing rollback (lib/http/give-back.js), not public API.
    takenPeriodOf = (limiter) => limiter.#result[AT.periodSlot]
    consumeTakenOf = (limiter, key, n) => limiter.#consumeTaken(key, n)
    giveBackKeyed = (limiter, key, n, periodSlot) => {
      if (!(#native in limiter)) throw coded(TypeError, 'ERR_INVALID_ARG', 'giveBack needs a KeyedQuotaClock')
      checkKey(key)
      if (limiter.#zone !== undefined) return limiter.#zone.giveBack(key, n, periodSlot)
      callNative(() => native.keyedGiveBack(limiter.#native, key, n, periodSlot))
    }
  }

  /** A versioned binary image of every held key, for `new KeyedQuotaClock({ ..., restore })`. Reads no clock. */
  snapshot() {
    if (this.#zone !== undefined) return this.#zone.snapshot()
    return callNative(() => native.keyedSnapshot(this.#native))
  }

}

function sharedAsync() {
  return coded(TypeError, 'ERR_SHARED_ASYNC', 'tryConsume cannot be used on a limiter with share: a call its reservation does not cover waits for the store; use `await limiter.consume(key, n)`')
}

/** The period a decision for a key counts its quota units in; read right after the decision. */
function takenKeyedPeriod(limiter) {
  return takenPeriodOf(limiter)
}

/** Gives back what a decision for `key` took, reading no clock (see QuotaClock's giveBackTaken). */
function giveBackKeyedTaken(limiter, key, n, periodSlot) {
  giveBackKeyed(limiter, key, n, periodSlot)
}

/** `limiter.consume(key, n)` as a promise of `{ decision, period }` (the period: as takenKeyedPeriod's). */
function consumeKeyedTaken(limiter, key, n) {
  return consumeTakenOf(limiter, key, n)
}

module.exports = { KeyedQuotaClock, takenKeyedPeriod, giveBackKeyedTaken, consumeKeyedTaken }
