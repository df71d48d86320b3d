'use strict'
// KeyedQuotaClock, many keys in one limiter: argument checks, the policy call, and the decision
// object. The Rust core holds every key.

const native = require('./native.js')
const { registerListener } = require('./anomalies.js')
const { callNative } = require('./errors.js')
const { rememberLimiter, rememberClosed } = require('./limiter-facts.js')
const { parseOptions, checkPositiveCount } = require('./options.js')
const { AT, OPERATION } = require('./contract.js')
const { ZoneFace, zoneInput } = require('./zone.js')
const { KeyedTable } = require('./keyed-table.js')
const { N_OR_STATUS, DECIDED, NO_ANOMALIES, readDecision } = require('./native-call.js')
const { coded, typeError, rangeError, checkNumber } = require('./validate.js')
const { readStats } = require('./stats.js')
const { ShareDriver, SHARED_CONSUME } = require('./share.js')
const { parseShareOptions } = require('./share-options.js')
const { resolvePolicy, assignPolicies } = require('./key-policy.js')

const KEYED_KEYS = ['policy', 'maxKeys', 'restore', 'share', 'zone']
const DEFAULT_MAX_KEYS = 1_000_000
// A snapshot's key count is a u32, and a table of more keys than that would not fit in memory anyway.
const MAX_MAX_KEYS = 2 ** 32
const MAX_KEY_UNITS = 256
// Each limiter has its own result buffer (lib/native-call.js): in, `n`, the operation and
// readings taken in JS; out, the status, then the decision.
const { consume: CONSUME, refund: REFUND } = OPERATION

/** A string of 1 to 256 UTF-16 code units, checked before any clock is read. */
function checkKey(key) {
  if (typeof key !== 'string') throw typeError('ERR_INVALID_ARG', 'key', 'a string of 1 to 256 UTF-16 code units', key)
  if (key.length === 0 || key.length > MAX_KEY_UNITS) {
    throw coded(RangeError, 'ERR_INVALID_ARG', `key must be a string of 1 to 256 UTF-16 code units; received a string of ${key.length}`)
  }
}

let takenPeriodOf
let giveBackKeyed
let consumeTakenOf

class KeyedQuotaClock {
  // Where the keys live, one interface: the in-process table (lib/keyed-table.js) or a zone
  // (lib/zone.js): call, result, settle, status, delete, size, writeStats, giveBack, snapshot, close.
  #store
  // The store's call function and result buffer, kept here for the fast path.
  #call
  #result
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
    const policyOf = (key) => resolvePolicy(policy, key, defaults)
    if (read.zone !== undefined) {
      const zone = zoneInput(read.zone)
      const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
      this.#store = new ZoneFace({ zone, limiterOptions, clockArgs, maxKeys, policy, plan, listener, resolvePolicy: policyOf })
    } else {
      const listener = () => (onAnomaly === undefined ? undefined : registerListener(this, onAnomaly))
      this.#store = new KeyedTable({ limiterOptions, clockArgs, maxKeys, policy, plan, listener, share, resolvePolicy: policyOf })
    }
    // The keyed call path (tryConsume, refund) runs on the store's call function and buffer.
    this.#call = this.#store.call
    this.#result = this.#store.result
    if (share !== undefined) {
      const js = this.#store.js
      this.#share = new ShareDriver(
        this,
        this.#store.handle,
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
    return this.#store.settle(key, n, CONSUME)
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
    const decision = this.#store.settle(key, n, operation)
    if (typeof decision !== 'number') this.#share.afterDecision(key)
    return decision
  }

  /**
   * Gives back every reservation of a shared limiter and resolves once the store has it; a zone
   * limiter unmaps its zone (the file and its keys stay; later calls throw). Else resolves at once.
   */
  close() {
    if (this.#store.close()) rememberClosed(this)
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
    if (result[N_OR_STATUS] !== DECIDED) this.#store.settle(key, n, REFUND)
  }

  /** QuotaClock's status() for one key (a key not held: what a fresh key would have, not holding it). */
  status(key) {
    checkKey(key)
    return this.#store.status(key)
  }

  /** Drops the key and all its state; true if it was held. Reads no clock. */
  delete(key) {
    checkKey(key)
    const held = this.#store.delete(key)
    // A shared key's unused units go back to the store.
    if (held && this.#share !== undefined) this.#share.flushDropped()
    return held
  }

  /** Keys held now (idle keys may be dropped at any time, so it can shrink by itself). */
  get size() {
    return this.#store.size
  }

  /** Counters since construction: decisions, anomalies, keys held now, evictions, key-limit refusals (and `store`, when shared). Reads no clock. */
  stats() {
    this.#store.writeStats()
    const stats = readStats(this.#result)
    if (this.#share !== undefined) stats.store = this.#share.storeStats()
    return stats
  }

  static {
    // For the HTTP middleware's all-or-nothing rollback (lib/http/give-back.js), not public API.
    takenPeriodOf = (limiter) => limiter.#result[AT.periodSlot]
    consumeTakenOf = (limiter, key, n) => limiter.#consumeTaken(key, n)
    giveBackKeyed = (limiter, key, n, periodSlot) => {
      if (!(#store in limiter)) throw coded(TypeError, 'ERR_INVALID_ARG', 'giveBack needs a KeyedQuotaClock')
      checkKey(key)
      limiter.#store.giveBack(key, n, periodSlot)
    }
  }

  /** A versioned binary image of every held key, for `new KeyedQuotaClock({ ..., restore })`. Reads no clock. */
  snapshot() {
    return this.#store.snapshot()
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
