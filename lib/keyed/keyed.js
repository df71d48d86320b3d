'use strict'
// KeyedQuotaClock, many keys in one limiter: argument checks, the policy call, and the decision
// object. The Rust core holds every key.

const native = require('../native/native.js')
const { registerListener } = require('../time/anomalies.js')
const { callNative } = require('../native/errors.js')
const { rememberLimiter, rememberClosed, rememberLimitsChanged, rememberPolicyAsked } = require('../limiter/limiter-facts.js')
const { parseOptions, checkCount } = require('../limiter/options.js')
const { AT, OPERATION } = require('../native/contract.js')
const { ZoneFace, zoneInput } = require('./zone.js')
const { KeyedTable } = require('./keyed-table.js')
const { SharedTable } = require('./shared-table.js')
const { N_OR_STATUS, DECIDED, NO_ANOMALIES, readDecision } = require('../limiter/native-call.js')
const { coded, typeError, checkNumber, MAX_KEY_UNITS } = require('../common/validate.js')
const { parseShareOptions } = require('../share/options.js')
const { resolvePolicy, assignPolicies } = require('./key-policy.js')
const { BlockBook, parseBlockOptions, checkBlockMs, writeSnapshot, readSnapshot } = require('./blocks.js')
const { monotonicOf } = require('../time/clocks.js')
const { ZoneBlockBook } = require('./zone-blocks.js')

const KEYED_KEYS = ['policy', 'maxKeys', 'restore', 'share', 'zone', 'policyTtlMs', 'block']
const DEFAULT_MAX_KEYS = 1_000_000
// Each limiter has its own result buffer (lib/limiter/native-call.js): in, `n`, the operation and
// readings taken in JS; out, the status, then the decision.
const { consume: CONSUME, refund: REFUND } = OPERATION

/** A string of 1 to 256 UTF-16 code units, checked before any clock is read. */
function checkKey(key) {
  if (typeof key !== 'string') throw typeError('ERR_INVALID_ARG', 'key', 'a string of 1 to 256 UTF-16 code units', key)
  if (key.length === 0 || key.length > MAX_KEY_UNITS) {
    throw coded(RangeError, 'ERR_INVALID_ARG', `key must be a string of 1 to 256 UTF-16 code units; received a string of ${key.length}`)
  }
}

/** What is wrong with a call's key and `n` (a coded error to throw or reject with), or undefined. */
function argumentError(key, n) {
  try {
    checkKey(key)
    if (n !== 1) checkCount(n)
  } catch (error) {
    return error
  }
  return undefined
}

/** `policyTtlMs`: a number (its value is the core's to check), or undefined. */
function policyTtlOf(ttlMs) {
  if (ttlMs === undefined) return undefined
  checkNumber(ttlMs, 'policyTtlMs')
  callNative(() => native.keyedCheckPolicyTtl(ttlMs))
  return ttlMs
}

let takenPeriodOf
let giveBackKeyed
let consumeTakenOf

class KeyedQuotaClock {
  // Where the keys live, behind one interface (lib/keyed/keyed-backend.js): the in-process table
  // (lib/keyed/keyed-table.js), a zone (lib/keyed/zone.js) or a shared table
  // (lib/keyed/shared-table.js).
  #backend
  // The backend's call functions and result buffer, kept here for the fast path.
  #call
  #tryCall
  #result
  // Blocked keys, levels and runs of denials (lib/keyed/blocks.js).
  #blocks

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly, initialTokensGiven, read } = parseOptions(options, KEYED_KEYS)
    const { policy, restore } = read
    const share = read.share === undefined ? undefined : parseShareOptions(read.share)
    const blockPolicy = read.block === undefined ? undefined : parseBlockOptions(read.block)
    if (share !== undefined && read.zone !== undefined) {
      throw coded(TypeError, 'ERR_INVALID_OPTION', 'zone and share cannot be used together: a zone is one limiter for the processes of one host, share one quota for every instance; pick one')
    }
    if (policy !== undefined && typeof policy !== 'function') throw typeError('ERR_INVALID_OPTION', 'policy', 'a function (key) => KeyPolicy | undefined', policy)
    const policyTtlMs = policyTtlOf(read.policyTtlMs)
    let maxKeys = DEFAULT_MAX_KEYS
    if (read.maxKeys !== undefined) {
      maxKeys = checkNumber(read.maxKeys, 'maxKeys')
      // Its value is the core's to check (src/limits.rs), here, before the snapshot and the zone.
      callNative(() => native.keyedCheckOptions({ maxKeys }))
    }
    if (restore !== undefined && !(restore instanceof Uint8Array)) {
      throw typeError('ERR_INVALID_OPTION', 'restore', 'a Uint8Array from snapshot()', restore)
    }
    const defaults = { ...limiterOptions, initialTokensGiven }
    let plan
    let savedBlocks = []
    if (restore !== undefined) {
      // The options' values first: bad options call no policy.
      if (policy !== undefined) callNative(() => native.checkLimiterOptions(limiterOptions))
      const { keysImage, entries } = readSnapshot(restore)
      savedBlocks = entries
      plan = callNative(() => native.snapshotParse(keysImage, maxKeys))
      if (policy !== undefined) assignPolicies(plan, policy, defaults)
    }
    const policyOf = (key) => {
      // (A held key's limits may change with the answer: the HTTP middleware reads them again.)
      rememberPolicyAsked(this, key)
      return resolvePolicy(policy, key, defaults)
    }
    if (read.zone !== undefined) {
      const zone = zoneInput(read.zone)
      const listener = onAnomaly === undefined ? undefined : registerListener(this, onAnomaly)
      this.#backend = new ZoneFace({ zone, limiterOptions, clockArgs, maxKeys, policy, plan, listener, resolvePolicy: policyOf })
    } else {
      const listener = () => (onAnomaly === undefined ? undefined : registerListener(this, onAnomaly))
      const args = { limiterOptions, clockArgs, maxKeys, policy, plan, listener, resolvePolicy: policyOf }
      this.#backend = share === undefined ? new KeyedTable(args) : new SharedTable(this, args, share)
    }
    if (policyTtlMs !== undefined) this.#backend.setPolicyTtl(policyTtlMs)
    // The keyed call path (tryConsume, refund) runs on the backend's call functions and buffer.
    this.#call = this.#backend.call
    this.#tryCall = this.#backend.tryCall
    this.#result = this.#backend.result
    // A shared limiter's blocks are the fleet's: written to the store, read back with its answers.
    const store = this.#backend.sendBlock === undefined ? undefined : this.#backend
    // Blocks run on the limiter's timeline; a zone's in the zone file, on the zone's timeline, and
    // its levels on the host's monotonic clock, which every process on it reads alike.
    if (read.zone !== undefined) {
      this.#blocks = new ZoneBlockBook(blockPolicy, monotonicOf(clockArgs), this.#backend, read.zone.path)
    } else {
      const pin = (key, blocked) => this.#backend.setBlocked(key, blocked)
      this.#blocks = new BlockBook(blockPolicy, () => this.#backend.timelineMs(), maxKeys, store, pin)
      // A full table lets go of keys whose blocks have ended before it refuses a new key.
      this.#backend.onKeyLimit = () => this.#blocks.letGo()
      if (store !== undefined) store.onBlock = (key, blockedMs) => this.#blocks.fleet(key, blockedMs)
    }
    // (A zone's applies only when this open made it, as its keys do.)
    this.#blocks.restore(savedBlocks)
    rememberLimiter(this, clockArgs, policy === undefined) // for the HTTP middleware
  }

  /** `n` (default 1) against the key's own capacity; being limited is a value, not an error. */
  tryConsume(key, n = 1) {
    // `n`'s capacity bound is checked natively, against the key's own.
    const error = argumentError(key, n)
    // A shared limiter refuses tryConsume whatever its arguments.
    if (error !== undefined) throw this.#backend.tryRefusal() ?? error
    const blocks = this.#blocks
    if (blocks.active !== 0) {
      const refusal = this.#backend.tryRefusal() // a shared limiter's ERR_SHARED_ASYNC, blocked or not
      if (refusal !== undefined) throw refusal
      const blocked = this.#blockedDecision(key)
      if (blocked !== undefined) return blocked
    }
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = CONSUME
    this.#tryCall(key)
    const decision = result[N_OR_STATUS] === DECIDED ? readDecision(result, NO_ANOMALIES) : this.#backend.settle(key, n, CONSUME)
    return decision.allowed ? decision : blocks.denied(key, decision)
  }

  /** A blocked key's denial (consuming nothing, asking no store), or undefined when it is not blocked. */
  #blockedDecision(key) {
    const blocks = this.#blocks
    if (!blocks.has(key)) return undefined
    // The status first: it reconciles the clocks, so the timeline the block is read on is now's.
    const status = this.#backend.status(key)
    const leftMs = blocks.leftMs(key)
    if (leftMs === 0) return undefined
    return blocks.deny(key, leftMs, status)
  }

  /**
   * A consume's answer, counted by the block book when it is a denial. On a shared limiter, a
   * call whose store call answered that the key is blocked fleet-wide is denied by the block, its
   * units given back.
   */
  #counted(key, n, promise) {
    const blocks = this.#blocks
    if (!blocks.counting && !blocks.shared) return promise
    return promise.then((decision) => this.#afterStore(key, n, decision))
  }

  /**
   * A consume's decision as the block book has it once the store answered (see #counted): a key
   * blocked now (the store's answer brought the block, or one began meanwhile) is the block's
   * denial, allowed or not (what it took refunded); another denial counts toward a block (on a
   * shared limiter, the denial that starts one is a promise of the block the store wrote).
   */
  #afterStore(key, n, decision) {
    const blocks = this.#blocks
    if (blocks.active !== 0) {
      const leftMs = blocks.leftMs(key)
      if (leftMs !== 0) {
        if (decision.allowed) this.refund(key, n)
        return blocks.deny(key, leftMs, this.#backend.status(key), decision.allowed ? 'allowed' : 'denied')
      }
    }
    return decision.allowed ? decision : blocks.denied(key, decision)
  }

  /**
   * Blocks `key` until `forMs` from now (the limiter's monotonic clock), unless it is already
   * blocked for longer. A key not held is held as a call would hold it (its policy asked).
   */
  block(key, forMs) {
    checkKey(key)
    checkBlockMs(forMs)
    // (A zone's block holds the key itself, in the zone file.)
    if (!(this.#blocks instanceof ZoneBlockBook)) this.#backend.hold(key)
    this.#blocks.block(key, forMs)
  }

  /** Ends the key's block: true if it was blocked; its level goes back to 0. Asks no policy. */
  unblock(key) {
    checkKey(key)
    return this.#blocks.unblock(key)
  }

  /**
   * `tryConsume`'s answer as a promise; on a shared limiter, decided against the key's
   * reservation of the shared quota (one native call when it covers `n`), else after one store
   * call (see lib/share/driver.js).
   */
  consume(key, n = 1) {
    const error = argumentError(key, n)
    if (error !== undefined) return Promise.reject(error)
    if (this.#blocks.active !== 0) {
      try {
        const blocked = this.#blockedDecision(key)
        if (blocked !== undefined) return Promise.resolve(blocked)
      } catch (failure) {
        return Promise.reject(failure)
      }
    }
    return this.#counted(key, n, this.#backend.consume(key, n))
  }

  /**
   * `consume` with the period its quota units were taken in, read right after the decision (for
   * the HTTP middleware's rollback, which must not read it after an await).
   */
  #consumeTaken(key, n) {
    const error = argumentError(key, n)
    if (error !== undefined) return Promise.reject(error)
    if (this.#blocks.active !== 0) {
      try {
        const blocked = this.#blockedDecision(key)
        if (blocked !== undefined) return Promise.resolve({ decision: blocked, period: NaN })
      } catch (failure) {
        return Promise.reject(failure)
      }
    }
    const taken = this.#backend.consumeTaken(key, n)
    if (!this.#blocks.counting && !this.#blocks.shared) return taken
    // (A call the store's answer blocked is refunded here: the middleware has nothing to roll back.)
    return taken.then(({ decision, period }) => {
      const after = this.#afterStore(key, n, decision)
      // (A shared limiter's denial that starts a block waits for the store's answer: a promise.)
      return after instanceof Promise ? after.then((decided) => ({ decision: decided, period })) : { decision: after, period }
    })
  }

  /**
   * Gives back every reservation of a shared limiter and resolves once the store has it; a zone
   * limiter unmaps its zone (the file and its keys stay; later calls throw). Else resolves at once.
   */
  close() {
    const done = this.#backend.close()
    if (this.#backend.closed) {
      this.#blocks.close()
      rememberClosed(this)
    }
    return done
  }

  /** Reconciles, then gives back `n` tokens and quota units; a key not held is left alone. */
  refund(key, n = 1) {
    checkKey(key)
    if (n !== 1) checkCount(n)
    const result = this.#result
    result[N_OR_STATUS] = n
    result[AT.operation] = REFUND
    this.#call(key)
    if (result[N_OR_STATUS] !== DECIDED) this.#backend.settle(key, n, REFUND)
  }

  /** QuotaClock's status() for one key (a key not held: what a fresh key would have, not holding it). */
  status(key) {
    checkKey(key)
    const status = this.#backend.status(key)
    status.blockedForMs = Math.ceil(this.#blocks.leftMs(key))
    return status
  }

  /**
   * Asks `policy(key)` again at the key's next call of any kind, and puts what it answers in force
   * with what the key used carried over; without a key, every key held now. A key not
   * held: nothing happens.
   */
  refreshPolicy(key) {
    if (key !== undefined) checkKey(key)
    this.#backend.refreshPolicy(key)
    rememberLimitsChanged(this)
  }

  /** Drops the key and all its state (a shared key's unused units go back to the store); true if it was held. Reads no clock. */
  delete(key) {
    checkKey(key)
    this.#blocks.delete(key)
    return this.#backend.delete(key)
  }

  /** Keys held now (idle keys may be dropped at any time, so it can shrink by itself). */
  get size() {
    return this.#backend.size
  }

  /** Counters since construction: decisions, anomalies, keys held now, evictions, key-limit refusals (and `store`, when shared). Reads no clock. */
  stats() {
    const stats = this.#backend.stats()
    // A block's denials made no native call, or one that allowed (then refunded): they join
    // `denied` here, and the latter leave `allowed`.
    stats.denied += this.#blocks.short
    stats.allowed -= this.#blocks.unallowed
    stats.blocked = this.#blocks.blocked
    stats.blocks = this.#blocks.blocks
    return stats
  }

  static {
    // For the HTTP middleware's all-or-nothing rollback (lib/http/give-back.js), not public API.
    takenPeriodOf = (limiter) => limiter.#result[AT.periodSlot]
    consumeTakenOf = (limiter, key, n) => limiter.#consumeTaken(key, n)
    giveBackKeyed = (limiter, key, n, periodSlot) => {
      if (!(#backend in limiter)) throw coded(TypeError, 'ERR_INVALID_ARG', 'giveBack needs a KeyedQuotaClock')
      checkKey(key)
      limiter.#backend.giveBack(key, n, periodSlot)
    }
  }

  /** A versioned binary image of every held key, for `new KeyedQuotaClock({ ..., restore })`. Reads no clock. */
  snapshot() {
    return writeSnapshot(this.#backend.snapshot(), this.#blocks.entries())
  }

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
