'use strict'
// KeyedQuotaClock with `zone: { path }`: the keyed table in a memory-mapped file shared by every
// process of the host that makes a limiter on it (docs/zone.md). The JS face checks the option and the
// clock; the Rust core (src/zone/) holds the keys, the open periods and the reconciliation.

const native = require('../native/native.js')
const { QuotaClockError, toPublicError, callNative } = require('../native/errors.js')
const { LAYOUT, AT, OPERATION } = require('../native/contract.js')
const { REGISTRY } = require('../native/registry.js')
const { N_OR_STATUS, DECIDED, DECIDED_WITH_ANOMALIES, ERROR, NEEDS_POLICY, NO_ANOMALIES, RESUME, readDecision, resume, toStatus } = require('../limiter/native-call.js')
const { coded, isPlainObject, readOptions, typeError, rangeError } = require('../common/validate.js')
const { ImmediateBackend } = require('./keyed-backend.js')

const { consume: CONSUME } = OPERATION
const MAX_PATH_LENGTH = 4096

/** `zone` as given: `{ path }`, a non-empty path without NUL bytes. */
function zoneInput(zone) {
  if (!isPlainObject(zone)) throw typeError('ERR_INVALID_OPTION', 'zone', "an object { path }, e.g. { path: '/dev/shm/api-limits' }", zone)
  const { path } = readOptions(zone, ['path'], 'zone')
  if (typeof path !== 'string') throw typeError('ERR_INVALID_OPTION', 'zone.path', 'a file path string', path)
  if (path.length === 0 || path.length > MAX_PATH_LENGTH || path.includes('\0')) {
    throw rangeError('ERR_INVALID_OPTION', 'zone.path', `a file path of 1 to ${MAX_PATH_LENGTH} characters without NUL`, path)
  }
  return { path }
}

/** A zone's call needs only a policy (its clock is native): RESUME for that, any other status is a bug. */
function needsPolicy(status) {
  if (status !== NEEDS_POLICY) throw zoneError({ code: 'ERR_INTERNAL', message: `status ${status}` })
  return RESUME
}

/** Refuses what cannot drive a zone: any clock but systemClock() (with or without hostElapsedRealtime() or procUptimeElapsedRealtime()). */
function zoneClock(clockArgs) {
  if (clockArgs.kind === 'system') return false
  if (clockArgs.kind === 'system-native-reader') return true
  throw coded(
    TypeError,
    'ERR_INVALID_OPTION',
    "clock: only systemClock() (optionally with hostElapsedRealtime() or procUptimeElapsedRealtime() as its reader) can drive a zone: the host's monotonic clock is the one clock every process reads alike; received another clock",
  )
}

function zoneError(error) {
  // Options that conflict with the zone's are an option error (a RangeError), as a bad value is.
  if (error && error.code === 'ERR_ZONE_MISMATCH') return coded(RangeError, error.code, error.message)
  return error && typeof error.code === 'string' ? toPublicError(error) : error
}

/** The zone backend of a KeyedQuotaClock (lib/keyed/keyed-backend.js's interface): the calls go to the shared file. */
class ZoneFace extends ImmediateBackend {
  #native
  #call
  #result
  #resolvePolicy
  // After close(): the result buffer as stats() last wrote it (a closed zone answers the counters it had).
  #closedStats

  constructor({ zone, limiterOptions, clockArgs, maxKeys, policy, plan, listener, resolvePolicy }) {
    super()
    const reader = zoneClock(clockArgs)
    if (process.platform !== 'linux') {
      throw new QuotaClockError('ERR_UNSUPPORTED_PLATFORM', `zone is tested on Linux only; this platform is ${process.platform}`)
    }
    const result = new Float64Array(LAYOUT.length)
    try {
      this.#native = native.zoneOpen({
        registry: REGISTRY,
        path: zone.path,
        options: limiterOptions,
        maxKeys,
        hasPolicy: policy !== undefined,
        reader,
        result,
        anomalyListener: listener,
        restore: plan,
      })
    } catch (error) {
      throw zoneError(error)
    }
    this.#call = native.zoneCallFunction(this.#native)
    this.#result = result
    this.#resolvePolicy = resolvePolicy
  }

  /** The result buffer (the HTTP middleware reads a decision's period slot from it). */
  get result() {
    return this.#result
  }

  /** The zone's call function: `call(key)` with `n` and the operation in the result buffer. */
  get call() {
    return this.#call
  }

  /** What a zone call left undecided: anomalies, an error, or a policy to resolve first. */
  settle(key, n, operation) {
    const result = this.#result
    const final = (status) => {
      if (status === DECIDED) return operation === CONSUME ? readDecision(result, NO_ANOMALIES) : undefined
      if (status === DECIDED_WITH_ANOMALIES) {
        const anomalies = callNative(() => native.zoneTakeAnomalies(this.#native))
        return operation === CONSUME ? readDecision(result, anomalies) : undefined
      }
      if (status === ERROR) throw zoneError(native.zoneTakeError(this.#native))
      return needsPolicy(status)
    }
    return resume(result[N_OR_STATUS], result, undefined, final, () => this.#resolvePolicy(key), (policy) => {
      result[N_OR_STATUS] = n
      result[AT.operation] = operation
      try {
        native.zoneCallSlow(this.#native, key, policy)
      } catch (error) {
        throw zoneError(error)
      }
      return result[N_OR_STATUS]
    })
  }

  status(key) {
    let read
    const again = (policy) => {
      read = callNative(() => native.zoneStatus(this.#native, key, policy))
      return this.#result[N_OR_STATUS]
    }
    const final = (status) => (status === DECIDED ? toStatus(read, read.capacity, read.refillPerSecond, read.quotaLimit) : needsPolicy(status))
    return resume(again(undefined), this.#result, undefined, final, () => this.#resolvePolicy(key), again)
  }

  /** What a decision took, given back without reading the clock (the HTTP middleware's rollback). */
  giveBack(key, n, periodSlot) {
    callNative(() => native.zoneGiveBack(this.#native, key, n, periodSlot))
  }

  /** Writes this limiter's counters and the zone's key count into the result buffer (as keyedStats). */
  writeStats() {
    if (this.#closedStats !== undefined) this.#result.set(this.#closedStats)
    else callNative(() => native.zoneStats(this.#native))
  }

  delete(key) {
    return callNative(() => native.zoneDelete(this.#native, key))
  }

  /** Marks a held key's policy (every held key's without one) to be asked again at its next call, in every process of the zone. */
  refreshPolicy(key) {
    callNative(() => native.zoneRefreshPolicy(this.#native, key))
  }

  /** policyTtlMs, in this process. */
  setPolicyTtl(ttlMs) {
    callNative(() => native.zoneSetPolicyTtl(this.#native, ttlMs))
  }

  get size() {
    return callNative(() => native.zoneSize(this.#native))
  }

  /** block(key, forMs) in every process: `{ leftMs, started }` (a key not held is held, its policy asked). */
  block(key, forMs) {
    const answer = callNative(() => native.zoneBlock(this.#native, key, forMs, undefined))
    if (answer !== null) return answer
    const policy = this.#resolvePolicy(key)
    return callNative(() => native.zoneBlock(this.#native, key, forMs, policy))
  }

  /** unblock(key) in every process: true if it was blocked (a key not held: false, no policy asked). */
  unblock(key) {
    return callNative(() => native.zoneUnblock(this.#native, key))
  }

  /** What is left of the key's block, in ms (0: none). */
  blockedMs(key) {
    return callNative(() => native.zoneBlockedMs(this.#native, key))
  }

  /** A denial counted in the key's run, every process's: `{ leftMs, started }` (leftMs > 0: it blocked the key), null when not held. */
  denied(key, withinMs, after, forMs) {
    return callNative(() => native.zoneDenied(this.#native, key, withinMs, after, forMs))
  }

  /** Every blocked key and its block's time left: Map(key -> ms). */
  blocks() {
    const flat = callNative(() => native.zoneBlocks(this.#native))
    const out = new Map()
    for (let at = 0; at < flat.length; ) {
      const units = flat[at++]
      out.set(String.fromCharCode(...flat.slice(at, at + units)), flat[at + units])
      at += units + 1
    }
    return out
  }

  /** Whether this open made the zone file (a snapshot's keys and blocks apply only then). */
  get created() {
    return callNative(() => native.zoneCreated(this.#native))
  }

  snapshot() {
    return callNative(() => native.zoneSnapshot(this.#native))
  }

  close() {
    if (this.#closedStats === undefined) {
      this.writeStats()
      this.#closedStats = this.#result.slice()
    }
    callNative(() => native.zoneClose(this.#native))
    return Promise.resolve() // the limiter is closed for good (`closed`)
  }

  get closed() {
    return this.#closedStats !== undefined
  }
}

module.exports = { ZoneFace, zoneInput }
