'use strict'
// KeyedQuotaClock's JS face (SPEC §10): argument checks, the policy call, and the decision object.
// The Rust core (src/keyed/) holds every key; index.js hands this module its internals.

const { coded, isPlainObject, refuseUnknownKeys } = require('./validate.js')
const { rememberLimiter } = require('./http-clocks.js')

const KEYED_KEYS = ['policy', 'maxKeys', 'restore']
const POLICY_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'quota']
const DEFAULT_MAX_KEYS = 1_000_000
const MAX_KEY_UNITS = 256
// The result buffer: [0] in: n, out: status (0 decided, 1 decided with anomalies, 2 error, 3 the key
// is not held and `policy` must be asked), [1] allowed, [2] retryAfterMs, [3] basis, [4] tokens,
// [5] quotaRemaining (NaN: no quota), [6] in: the operation (0 tryConsume, 1 refund).
const RESULT_SLOTS = 7
const NEEDS_POLICY = 3
const DEFAULT_CHOICE = 0xffffffff

module.exports = function defineKeyedQuotaClock(internals) {
  const { native, REGISTRY, parseOptions, periodSpecInput, registerListener, callNative, toPublicError, typeError, rangeError, checkNumber, thrownText, toAnomaly, toPeriod, BASIS, NO_ANOMALIES } = internals

  /** SPEC §10: a string of 1 to 256 UTF-16 code units, checked before any clock is read. */
  function checkKey(key) {
    if (typeof key !== 'string') throw typeError('ERR_INVALID_ARG', 'key', 'a string of 1 to 256 UTF-16 code units', key)
    if (key.length === 0 || key.length > MAX_KEY_UNITS) {
      throw coded(RangeError, 'ERR_INVALID_ARG', `key must be a string of 1 to 256 UTF-16 code units; received a string of ${key.length}`)
    }
  }

  /** `n` as in §5: a positive safe integer (its capacity bound is checked natively, per key). */
  function checkCount(n) {
    if (!(typeof n === 'number' && Number.isSafeInteger(n) && n >= 1)) throw rangeError('ERR_INVALID_ARG', 'n', 'a positive safe integer', n)
  }

  function checkPositive(value, name) {
    checkNumber(value, name)
    if (!(Number.isFinite(value) && value > 0)) throw rangeError('ERR_INVALID_OPTION', name, 'a finite number > 0', value)
    return value
  }

  /** A KeyPolicy merged with the defaults, type-checked; values are checked natively too. */
  function normalizePolicy(policy, path, defaults) {
    if (policy === undefined) return { ...defaults, path }
    if (!isPlainObject(policy)) throw typeError('ERR_INVALID_OPTION', path, 'a KeyPolicy object { capacity?, refillPerSecond?, initialTokens?, quota? } or undefined', policy)
    refuseUnknownKeys(policy, POLICY_KEYS, path)
    const capacity = policy.capacity === undefined ? defaults.capacity : checkPositive(policy.capacity, `${path}.capacity`)
    const refillPerSecond = policy.refillPerSecond === undefined ? defaults.refillPerSecond : checkPositive(policy.refillPerSecond, `${path}.refillPerSecond`)
    let initialTokens
    if (policy.initialTokens !== undefined) {
      initialTokens = checkNumber(policy.initialTokens, `${path}.initialTokens`)
      if (!(initialTokens >= 0 && initialTokens <= capacity)) throw rangeError('ERR_INVALID_OPTION', `${path}.initialTokens`, `a number from 0 to capacity (${capacity})`, initialTokens)
    } else {
      // The limiter's own initialTokens if it set one (never above this key's capacity), else a full bucket.
      initialTokens = defaults.initialTokensGiven ? Math.min(defaults.initialTokens, capacity) : capacity
    }
    let { quotaLimit, quotaPeriod } = defaults
    if (policy.quota === null) {
      quotaLimit = undefined
      quotaPeriod = undefined
    } else if (policy.quota !== undefined) {
      const { quota } = policy
      if (!isPlainObject(quota)) throw typeError('ERR_INVALID_OPTION', `${path}.quota`, 'an object { limit, period } or null', quota)
      refuseUnknownKeys(quota, ['limit', 'period'], `${path}.quota`)
      quotaLimit = checkNumber(quota.limit, `${path}.quota.limit`)
      if (!(Number.isSafeInteger(quotaLimit) && quotaLimit >= 0)) throw rangeError('ERR_INVALID_OPTION', `${path}.quota.limit`, 'a non-negative safe integer (0 blocks every request)', quotaLimit)
      quotaPeriod = periodSpecInput(quota.period, `${path}.quota.period`)
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
    const choices = new Uint32Array(plan.length)
    for (let i = 0; i < plan.length; i++) {
      const key = plan.keyAt(i)
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
    callNative(() => plan.setPolicies(inputs, choices))
  }

  function readDecision(result, anomalies) {
    const quotaRemaining = result[5]
    return {
      allowed: result[1] === 1,
      retryAfterMs: result[2],
      retryAfterBasis: BASIS[result[3]],
      tokens: result[4],
      quotaRemaining: quotaRemaining === quotaRemaining ? quotaRemaining : null,
      anomalies,
    }
  }

  class KeyedQuotaClock {
    #native
    #call
    #result
    #policy
    #defaults

    constructor(options) {
      const { limiterOptions, clockArgs, onAnomaly, initialTokensGiven } = parseOptions(options, KEYED_KEYS)
      const { policy, restore } = options
      if (policy !== undefined && typeof policy !== 'function') throw typeError('ERR_INVALID_OPTION', 'policy', 'a function (key) => KeyPolicy | undefined', policy)
      let maxKeys = DEFAULT_MAX_KEYS
      if (options.maxKeys !== undefined) {
        maxKeys = checkNumber(options.maxKeys, 'maxKeys')
        if (!(Number.isSafeInteger(maxKeys) && maxKeys >= 1)) throw rangeError('ERR_INVALID_OPTION', 'maxKeys', 'a positive safe integer', maxKeys)
      }
      if (restore !== undefined && !(restore instanceof Uint8Array)) {
        throw typeError('ERR_INVALID_OPTION', 'restore', 'a Uint8Array from snapshot()', restore)
      }
      const defaults = { ...limiterOptions, initialTokensGiven }
      let plan
      if (restore !== undefined) {
        plan = callNative(() => new native.NativeSnapshot(restore, maxKeys))
        if (policy !== undefined) assignPolicies(plan, policy, defaults)
      }
      const result = new Float64Array(RESULT_SLOTS)
      const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
      const { kind, manual, monotonic, wall, elapsed } = clockArgs
      this.#native = callNative(
        () => new native.NativeKeyed(REGISTRY, limiterOptions, maxKeys, policy !== undefined, result, kind, manual, monotonic, wall, elapsed, listener, plan),
      )
      this.#call = this.#native.callFunction()
      this.#result = result
      this.#policy = policy
      this.#defaults = defaults
      rememberLimiter(this, clockArgs, policy === undefined) // for lib/http.js
    }

    /** SPEC §10: `n` (default 1) against the key's own capacity; being limited is a value, not an error. */
    tryConsume(key, n = 1) {
      checkKey(key)
      if (n !== 1) checkCount(n)
      const result = this.#result
      result[0] = n
      result[6] = 0
      this.#call(key)
      if (result[0] === 0) return readDecision(result, NO_ANOMALIES)
      return this.#settle(key, n)
    }

    /** The rare outcomes: anomalies, an error, or a new key whose policy must be asked. */
    #settle(key, n) {
      const result = this.#result
      if (result[0] === NEEDS_POLICY) {
        const policy = resolvePolicy(this.#policy, key, this.#defaults)
        // `policy` may have made calls of its own on this limiter: set the buffer again.
        result[0] = n
        result[6] = 0
        callNative(() => this.#native.consumeNew(key, policy))
        if (result[0] === 0) return readDecision(result, NO_ANOMALIES)
      }
      if (result[0] === 1) return readDecision(result, callNative(() => this.#native.takeAnomalies()).map(toAnomaly))
      throw toPublicError(this.#native.takeError())
    }

    /** SPEC §10: reconciles, then gives back `n` tokens and quota units; a key not held is left alone. */
    refund(key, n = 1) {
      checkKey(key)
      if (n !== 1) checkCount(n)
      const result = this.#result
      result[0] = n
      result[6] = 1
      this.#call(key)
      if (result[0] === 2) throw toPublicError(this.#native.takeError())
    }

    /** SPEC §10: the §5 status of one key (a key not held: what a fresh key would have, not holding it). */
    status(key) {
      checkKey(key)
      let status = callNative(() => this.#native.status(key, undefined))
      if (status === null) {
        const policy = resolvePolicy(this.#policy, key, this.#defaults)
        status = callNative(() => this.#native.status(key, policy))
      }
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

    /** Drops the key and all its state; true if it was held. Reads no clock. */
    delete(key) {
      checkKey(key)
      return callNative(() => this.#native.delete(key))
    }

    /** Keys held now (idle keys may be dropped at any time, so it can shrink by itself). */
    get size() {
      return callNative(() => this.#native.size)
    }

    /** A versioned binary image of every held key, for `new KeyedQuotaClock({ ..., restore })`. Reads no clock. */
    snapshot() {
      return callNative(() => this.#native.snapshot())
    }
  }

  return { KeyedQuotaClock }
}
