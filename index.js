'use strict'
// The JS face of quota-clock-source: option checks with coded errors, clock-source plumbing,
// and the decision object. The Rust core does every computation; see src/.

const { coded, describe, isPlainObject, refuseUnknownKeys } = require('./lib/validate.js')
const { rememberLimiter } = require('./lib/http-clocks.js')

const native = loadNativeBinding()

/** The generated loader; when no binary fits this platform, an error that names it and says what to do. */
function loadNativeBinding() {
  try {
    return require('./binding.js')
  } catch (error) {
    if (!(error instanceof Error) || !/^(Cannot find|Failed to load) native binding/.test(error.message)) throw error
    const { name, version, optionalDependencies = {} } = require('./package.json')
    const platform = hostPlatform()
    const binaryPackage = `${name}-${platform}`
    const supported = Object.keys(optionalDependencies).map((dependency) => dependency.slice(name.length + 1))
    const advice = supported.includes(platform)
      ? `Its binary ships in the optional dependency ${binaryPackage}, which is not installed (optional dependencies were omitted, or the lockfile was made on another platform): run \`npm install ${binaryPackage}@${version}\`, or delete node_modules and package-lock.json and run \`npm install\` again.`
      : `Prebuilt binaries exist for ${supported.join(', ')}. Elsewhere, build from source with a Rust toolchain (\`npm run build\` in a clone of the repository) and set NAPI_RS_NATIVE_LIBRARY_PATH to the .node file it writes.`
    const wrapped = new Error(`${name}: no native binary for ${platform} (Node ${process.version}). ${advice}`)
    wrapped.code = 'ERR_NATIVE_BINDING_NOT_FOUND'
    wrapped.cause = error
    throw wrapped
  }
}

/** napi-rs's name for this platform: linux-x64-gnu, linux-x64-musl, darwin-arm64, win32-x64-msvc... */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  return `linux-${arch}-${report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`
}

const { NativeManualClock } = native

class QuotaClockError extends Error {
  constructor(code, message) {
    super(message)
    this.name = 'QuotaClockError'
    this.code = code
  }
}

const CLOCK_ERROR_CODES = new Set([
  'ERR_MONOTONIC_REGRESSION',
  'ERR_AMBIGUOUS_WALL_JUMP',
  'ERR_IMPLAUSIBLE_WALL_CLOCK',
  'ERR_CLOCK_READING',
  'ERR_UNSUPPORTED_PLATFORM',
  'ERR_KEY_LIMIT',
])
const RANGE_ERROR_CODES = new Set(['ERR_INVALID_OPTION', 'ERR_SUB_DAY_PERIOD', 'ERR_UNKNOWN_TIME_ZONE', 'ERR_INVALID_ARG'])

/** Turns a coded error from the native side into the class the contract names. */
function toPublicError({ code, message }) {
  if (CLOCK_ERROR_CODES.has(code)) return new QuotaClockError(code, message)
  if (RANGE_ERROR_CODES.has(code)) return coded(RangeError, code, message)
  return coded(Error, code || 'ERR_INTERNAL', message)
}

function callNative(body) {
  try {
    return body()
  } catch (error) {
    throw error && typeof error.code === 'string' ? toPublicError(error) : error
  }
}

function typeError(code, name, expected, value) {
  return coded(TypeError, code, `${name} must be ${expected}; received ${describe(value)}`)
}

function rangeError(code, name, expected, value) {
  return coded(RangeError, code, `${name} must be ${expected}; received ${describe(value)}`)
}

function checkNumber(value, name, code = 'ERR_INVALID_OPTION') {
  if (typeof value !== 'number') throw typeError(code, name, 'a number', value)
  return value
}

function checkFinite(value, name, code = 'ERR_INVALID_OPTION') {
  checkNumber(value, name, code)
  if (!Number.isFinite(value)) throw rangeError(code, name, 'a finite number', value)
  return value
}

const PERIOD_KEYS = ['unit', 'timeZone', 'anchorDay', 'anchorMonth', 'anchorTime']

/** Type checks of a QuotaPeriodSpec; value checks happen in the Rust calendar. */
function periodSpecInput(period, path) {
  if (!isPlainObject(period)) throw typeError('ERR_INVALID_OPTION', path, 'an object { unit, timeZone, ... }', period)
  refuseUnknownKeys(period, PERIOD_KEYS, path)
  const { unit, timeZone, anchorDay, anchorMonth, anchorTime } = period
  if (typeof unit !== 'string') throw typeError('ERR_INVALID_OPTION', `${path}.unit`, "one of 'day', 'week', 'month', 'year'", unit)
  if (typeof timeZone !== 'string') throw typeError('ERR_INVALID_OPTION', `${path}.timeZone`, "an IANA time zone name such as 'America/Los_Angeles' or 'UTC'", timeZone)
  if (anchorDay !== undefined) checkNumber(anchorDay, `${path}.anchorDay`)
  if (anchorMonth !== undefined) checkNumber(anchorMonth, `${path}.anchorMonth`)
  if (anchorTime !== undefined && typeof anchorTime !== 'string') throw typeError('ERR_INVALID_OPTION', `${path}.anchorTime`, "a local time 'HH:MM' or 'HH:MM:SS'", anchorTime)
  return { unit, timeZone, anchorDay, anchorMonth, anchorTime }
}

// ---------------------------------------------------------------------------------------------
// Clock sources (SPEC §3)

/** Clocks and readers this module made, so a limiter can read them natively. */
const systemClocks = new WeakSet()
const boottimeReaders = new WeakSet()

function systemClock(options) {
  if (options !== undefined) {
    if (!isPlainObject(options)) throw typeError('ERR_INVALID_OPTION', 'systemClock(options)', 'an object { elapsedRealtimeMs? }', options)
    refuseUnknownKeys(options, ['elapsedRealtimeMs'], '')
  }
  const reader = options === undefined ? undefined : options.elapsedRealtimeMs
  if (reader !== undefined && typeof reader !== 'function') {
    throw typeError('ERR_INVALID_OPTION', 'elapsedRealtimeMs', 'a function returning milliseconds', reader)
  }
  const clock = { monotonicMs: native.systemMonotonicMs, wallMs: native.systemWallMs }
  if (reader !== undefined) clock.elapsedRealtimeMs = reader
  systemClocks.add(clock)
  return clock
}

function procUptimeElapsedRealtime() {
  if (!native.boottimeSupported()) {
    throw callNative(() => native.boottimeMs()) // throws ERR_UNSUPPORTED_PLATFORM
  }
  const reader = () => native.boottimeMs()
  boottimeReaders.add(reader)
  return reader
}

class ManualClock {
  #native
  constructor(init) {
    if (init !== undefined && !isPlainObject(init)) throw typeError('ERR_INVALID_OPTION', 'manualClock(init)', 'an object { monotonicMs?, wallMs?, elapsedRealtimeMs? }', init)
    const { monotonicMs = 0, wallMs = Date.UTC(2024, 0, 15), elapsedRealtimeMs } = init || {}
    if (init !== undefined) refuseUnknownKeys(init, ['monotonicMs', 'wallMs', 'elapsedRealtimeMs'], 'init')
    checkFinite(monotonicMs, 'init.monotonicMs')
    checkFinite(wallMs, 'init.wallMs')
    const hasReader = typeof elapsedRealtimeMs === 'number'
    if (elapsedRealtimeMs !== undefined) checkFinite(elapsedRealtimeMs, 'init.elapsedRealtimeMs')
    this.#native = new NativeManualClock(monotonicMs, wallMs, hasReader ? elapsedRealtimeMs : undefined)
    if (hasReader) {
      // Only a clock made with a reader has one (SPEC §3).
      const state = this.#native
      Object.defineProperty(this, 'elapsedRealtimeMs', { value: () => state.elapsedRealtimeMs(), enumerable: false })
    }
  }
  advance(ms) {
    checkNumber(ms, 'advance(ms)', 'ERR_INVALID_ARG')
    callNative(() => this.#native.advance(ms))
  }
  suspend(ms) {
    checkNumber(ms, 'suspend(ms)', 'ERR_INVALID_ARG')
    callNative(() => this.#native.suspend(ms))
  }
  stepWall(deltaMs) {
    checkNumber(deltaMs, 'stepWall(deltaMs)', 'ERR_INVALID_ARG')
    callNative(() => this.#native.stepWall(deltaMs))
  }
  set(values) {
    if (!isPlainObject(values)) throw typeError('ERR_INVALID_ARG', 'set(values)', 'an object { monotonicMs?, wallMs?, elapsedRealtimeMs? }', values)
    refuseUnknownKeys(values, ['monotonicMs', 'wallMs', 'elapsedRealtimeMs'], 'set')
    const { monotonicMs, wallMs, elapsedRealtimeMs } = values
    if (monotonicMs !== undefined) checkNumber(monotonicMs, 'set({ monotonicMs })', 'ERR_INVALID_ARG')
    if (wallMs !== undefined) checkNumber(wallMs, 'set({ wallMs })', 'ERR_INVALID_ARG')
    if (elapsedRealtimeMs !== undefined) checkNumber(elapsedRealtimeMs, 'set({ elapsedRealtimeMs })', 'ERR_INVALID_ARG')
    callNative(() => this.#native.set(monotonicMs, wallMs, elapsedRealtimeMs))
  }
  monotonicMs() {
    return this.#native.monotonicMs()
  }
  wallMs() {
    return this.#native.wallMs()
  }
  /** How many times the elapsed-realtime reader was called. */
  get elapsedRealtimeReads() {
    return this.#native.elapsedRealtimeReads
  }
  static nativeOf(clock) {
    return clock.#native
  }
}

function manualClock(init) {
  return new ManualClock(init)
}

/** The arguments NativeLimiter needs to read `clock` (natively where it can). */
function clockArguments(clock) {
  if (clock instanceof ManualClock) return { kind: 'manual', manual: ManualClock.nativeOf(clock) }
  if (!isPlainObject(clock) && typeof clock !== 'function') {
    throw typeError('ERR_INVALID_OPTION', 'clock', 'a clock source { monotonicMs(), wallMs(), elapsedRealtimeMs?() }', clock)
  }
  for (const method of ['monotonicMs', 'wallMs']) {
    if (typeof clock[method] !== 'function') throw typeError('ERR_INVALID_OPTION', `clock.${method}`, 'a function returning milliseconds', clock[method])
  }
  const reader = clock.elapsedRealtimeMs
  if (reader !== undefined && typeof reader !== 'function') {
    throw typeError('ERR_INVALID_OPTION', 'clock.elapsedRealtimeMs', 'a function returning milliseconds, or absent', reader)
  }
  if (systemClocks.has(clock) && clock.monotonicMs === native.systemMonotonicMs && clock.wallMs === native.systemWallMs) {
    if (reader === undefined) return { kind: 'system' }
    if (boottimeReaders.has(reader)) return { kind: 'system-boottime' }
    return { kind: 'system-reader', elapsed: () => reader() }
  }
  return {
    kind: 'js',
    monotonic: () => clock.monotonicMs(),
    wall: () => clock.wallMs(),
    elapsed: reader === undefined ? undefined : () => clock.elapsedRealtimeMs(),
  }
}

// ---------------------------------------------------------------------------------------------
// QuotaClock (SPEC §4–§8)

const OPTION_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'suspendPolicy', 'quota', 'clock', 'onAnomaly', 'earliestPlausibleWallMs']
const SUSPEND_POLICIES = ['ignore', 'credit', 'refuse']
const DEFAULT_EARLIEST_PLAUSIBLE_WALL_MS = Date.UTC(2020, 0, 1)
const MISSING_SUSPEND_POLICY =
  "suspendPolicy is required and has no default: when the wall clock runs ahead of the monotonic clock and no elapsedRealtimeMs reader can tell a host suspend from a wall-clock step, only you know whether that time should refill the bucket ('credit'), be ignored ('ignore'), or make the call fail ('refuse'); received undefined"

// One result buffer per module instance, shared by its limiters: the native tryConsume reads `n` and the
// limiter's slot from it, writes the decision into it, and this file builds the object (cheaper
// than a napi-built object). Slots: [0] in: n, out: status (0 decided, 1 decided with anomalies,
// 2 error), [1] allowed, [2] retryAfterMs, [3] basis (0 none, 1 monotonic-refill, 2 wall-period),
// [4] tokens, [5] quotaRemaining, [6] in: the limiter's slot.
const RESULT = new Float64Array(7)
// [6] is written as an integer through this view, so the native side reads it without converting.
const LIMITER_SLOT = new Uint32Array(RESULT.buffer, 6 * 8, 1)
// This module instance's limiters (a module loaded again, by a test runner say, gets its own).
const REGISTRY = native.createRegistry(RESULT)
const consume = native.registryConsume(REGISTRY)
// Each limiter with an onAnomaly handler gets a listener id; one threadsafe function per module
// instance delivers { listener, anomaly } and `listeners` routes it to the limiter, held weakly (so
// a handler that refers to its own limiter does not keep it alive), whose handler gets it (see the
// static block of QuotaClock). Ids are never reused: an anomaly still queued for a collected limiter
// is dropped rather than delivered to a newer one.
const listeners = new Map()
let nextListener = 1
// A limiter's native state (and its handler) is freed once its object has been collected.
const slots = new FinalizationRegistry((slot) => {
  const listener = native.releaseLimiter(REGISTRY, slot)
  if (listener != null) listeners.delete(listener)
})
// The onAnomaly handlers of the other limiters routed through `listeners` (KeyedQuotaClock).
const otherHandlers = new WeakMap()
const listenerIds = new FinalizationRegistry((listener) => listeners.delete(listener))

/** Gives a limiter (other than a QuotaClock) a listener id for its onAnomaly, held weakly. */
function registerListener(limiter, onAnomaly) {
  const listener = nextListener++
  otherHandlers.set(limiter, onAnomaly)
  listeners.set(listener, new WeakRef(limiter))
  listenerIds.register(limiter, listener)
  return listener
}

const BASIS = [null, 'monotonic-refill', 'wall-period']
const NO_ANOMALIES = Object.freeze([])

/** The §4 options; `moreKeys` are checked by the caller (KeyedQuotaClock's own options). */
function parseOptions(options, moreKeys = []) {
  if (!isPlainObject(options)) throw typeError('ERR_INVALID_OPTION', 'options', 'an object { capacity, refillPerSecond, suspendPolicy, ... }', options)
  refuseUnknownKeys(options, [...OPTION_KEYS, ...moreKeys], '')
  const capacity = checkNumber(options.capacity, 'capacity')
  if (!(Number.isFinite(capacity) && capacity > 0)) throw rangeError('ERR_INVALID_OPTION', 'capacity', 'a finite number > 0', capacity)
  const refillPerSecond = checkNumber(options.refillPerSecond, 'refillPerSecond')
  if (!(Number.isFinite(refillPerSecond) && refillPerSecond > 0)) throw rangeError('ERR_INVALID_OPTION', 'refillPerSecond', 'a finite number > 0', refillPerSecond)
  let initialTokens = capacity
  if (options.initialTokens !== undefined) {
    initialTokens = checkNumber(options.initialTokens, 'initialTokens')
    if (!(initialTokens >= 0 && initialTokens <= capacity)) throw rangeError('ERR_INVALID_OPTION', 'initialTokens', `a number from 0 to capacity (${capacity})`, initialTokens)
  }
  const { suspendPolicy } = options
  if (suspendPolicy === undefined) throw coded(TypeError, 'ERR_INVALID_OPTION', MISSING_SUSPEND_POLICY)
  if (typeof suspendPolicy !== 'string') throw typeError('ERR_INVALID_OPTION', 'suspendPolicy', "one of 'ignore', 'credit', 'refuse'", suspendPolicy)
  if (!SUSPEND_POLICIES.includes(suspendPolicy)) throw rangeError('ERR_INVALID_OPTION', 'suspendPolicy', "one of 'ignore', 'credit', 'refuse'", suspendPolicy)

  let quotaLimit
  let quotaPeriod
  if (options.quota !== undefined) {
    const { quota } = options
    if (!isPlainObject(quota)) throw typeError('ERR_INVALID_OPTION', 'quota', 'an object { limit, period }', quota)
    refuseUnknownKeys(quota, ['limit', 'period'], 'quota')
    quotaLimit = checkNumber(quota.limit, 'quota.limit')
    if (!(Number.isSafeInteger(quotaLimit) && quotaLimit >= 0)) throw rangeError('ERR_INVALID_OPTION', 'quota.limit', 'a non-negative safe integer (0 blocks every request)', quotaLimit)
    quotaPeriod = periodSpecInput(quota.period, 'quota.period')
  }

  const clock = options.clock === undefined ? systemClock() : options.clock
  const clockArgs = clockArguments(clock)

  const { onAnomaly } = options
  if (onAnomaly !== undefined && typeof onAnomaly !== 'function') throw typeError('ERR_INVALID_OPTION', 'onAnomaly', 'a function (anomaly) => void', onAnomaly)

  let earliestPlausibleWallMs = DEFAULT_EARLIEST_PLAUSIBLE_WALL_MS
  if (options.earliestPlausibleWallMs === null) earliestPlausibleWallMs = undefined
  else if (options.earliestPlausibleWallMs !== undefined) earliestPlausibleWallMs = checkFinite(options.earliestPlausibleWallMs, 'earliestPlausibleWallMs')

  return {
    limiterOptions: { capacity, refillPerSecond, initialTokens, suspendPolicy, quotaLimit, quotaPeriod, earliestPlausibleWallMs },
    clockArgs,
    onAnomaly,
    initialTokensGiven: options.initialTokens !== undefined,
  }
}

/** Best-effort text of anything thrown; never throws itself. */
function thrownText(error) {
  try {
    if (error instanceof Error) return String(error.message)
    return typeof error === 'symbol' ? error.toString() : String(error)
  } catch {
    return 'a value that cannot be turned into text'
  }
}

/** Calls the user's handler; a throw becomes a process warning, never a crash. */
function deliverSafely(onAnomaly, anomaly) {
  try {
    onAnomaly(anomaly)
  } catch (error) {
    process.emitWarning(`quota-clock-source: the onAnomaly handler threw: ${thrownText(error)} (anomaly: ${anomaly.kind}: ${anomaly.detail})`, {
      code: 'QUOTA_CLOCK_ON_ANOMALY_THREW',
    })
  }
}

/** SPEC §5: anything but a positive safe integer ≤ capacity is a RangeError, whatever its type. */
function checkCount(n, capacity) {
  if (!(typeof n === 'number' && Number.isSafeInteger(n) && n >= 1 && n <= capacity)) {
    throw rangeError('ERR_INVALID_ARG', 'n', `a positive safe integer no larger than capacity (${capacity})`, n)
  }
}

/** `n` of refund: a positive safe integer (no capacity bound: the bucket caps what comes back). */
function checkPositiveCount(n) {
  if (!(typeof n === 'number' && Number.isSafeInteger(n) && n >= 1)) {
    throw rangeError('ERR_INVALID_ARG', 'n', 'a positive safe integer', n)
  }
}

/** The decision the native tryConsume just wrote into RESULT. */
function readDecision(hasQuota, anomalies) {
  return {
    allowed: RESULT[1] === 1,
    retryAfterMs: RESULT[2],
    retryAfterBasis: BASIS[RESULT[3]],
    tokens: RESULT[4],
    quotaRemaining: hasQuota ? RESULT[5] : null,
    anomalies,
  }
}

function toPeriod(period) {
  return { id: period.id, startMs: period.startMs, endMs: period.endMs, startKind: period.startKind, timeZone: period.timeZone }
}

function toAnomaly(anomaly) {
  const out = {
    kind: anomaly.kind,
    detail: anomaly.detail,
    monotonicDeltaMs: anomaly.monotonicDeltaMs,
    wallDeltaMs: anomaly.wallDeltaMs,
    creditedMs: anomaly.creditedMs,
  }
  if (anomaly.suspendedMs != null) out.suspendedMs = anomaly.suspendedMs
  if (anomaly.stepMs != null) out.stepMs = anomaly.stepMs
  if (anomaly.skipped != null) out.skipped = anomaly.skipped
  if (anomaly.periodId != null) out.periodId = anomaly.periodId
  return out
}

class QuotaClock {
  #slot
  #capacity
  #refillPerSecond
  #quotaLimit
  #hasQuota
  #onAnomaly

  static {
    native.registryOnAnomaly(REGISTRY, ({ listener, anomaly }) => {
      const limiter = listeners.get(listener)?.deref()
      if (limiter === undefined) return
      deliverSafely(#onAnomaly in limiter ? limiter.#onAnomaly : otherHandlers.get(limiter), toAnomaly(anomaly))
    })
  }

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly } = parseOptions(options)
    const listener = onAnomaly === undefined ? undefined : nextListener++
    this.#slot = callNative(() =>
      native.createLimiter(REGISTRY, limiterOptions, clockArgs.kind, clockArgs.manual, clockArgs.monotonic, clockArgs.wall, clockArgs.elapsed, listener),
    )
    if (listener !== undefined) {
      this.#onAnomaly = onAnomaly
      listeners.set(listener, new WeakRef(this))
    }
    slots.register(this, this.#slot)
    this.#capacity = limiterOptions.capacity
    this.#refillPerSecond = limiterOptions.refillPerSecond
    this.#hasQuota = limiterOptions.quotaPeriod !== undefined
    this.#quotaLimit = this.#hasQuota ? limiterOptions.quotaLimit : null
    rememberLimiter(this, clockArgs, true) // for lib/http.js
  }

  /** SPEC §5: takes `n` tokens (and `n` from the quota) if both are there. */
  tryConsume(n = 1) {
    if (n !== 1) checkCount(n, this.#capacity)
    RESULT[0] = n
    LIMITER_SLOT[0] = this.#slot
    consume()
    if (RESULT[0] === 0) return readDecision(this.#hasQuota, NO_ANOMALIES)
    return this.#settle()
  }

  /** The rare outcomes: a decision with anomalies, or an error. */
  #settle() {
    if (RESULT[0] === 1) {
      return readDecision(this.#hasQuota, callNative(() => native.limiterTakeAnomalies(REGISTRY, this.#slot)).map(toAnomaly))
    }
    throw toPublicError(native.limiterTakeError(REGISTRY, this.#slot))
  }

  /** Reads and reconciles the clocks like tryConsume, then gives back `n` tokens (up to capacity) and `n` quota units (down to zero). */
  refund(n = 1) {
    checkPositiveCount(n)
    callNative(() => native.limiterRefund(REGISTRY, this.#slot, n))
  }

  /** Reads and reconciles the clocks like tryConsume, consuming nothing; also reports the limits in force. */
  status() {
    const status = callNative(() => native.limiterStatus(REGISTRY, this.#slot))
    return {
      tokens: status.tokens,
      quotaUsed: status.quotaUsed ?? null,
      quotaRemaining: status.quotaRemaining ?? null,
      period: status.period == null ? null : toPeriod(status.period),
      capacity: this.#capacity,
      refillPerSecond: this.#refillPerSecond,
      quotaLimit: this.#quotaLimit,
    }
  }

  /** The limiter's own period spec applied to `wallMs`; null without a quota. */
  periodFor(wallMs) {
    checkNumber(wallMs, 'wallMs', 'ERR_INVALID_ARG')
    const period = callNative(() => native.limiterPeriodFor(REGISTRY, this.#slot, wallMs))
    return period == null ? null : toPeriod(period)
  }
}

function periodFor(period, wallMs) {
  const spec = periodSpecInput(period, 'period')
  checkNumber(wallMs, 'wallMs', 'ERR_INVALID_ARG')
  return toPeriod(callNative(() => native.periodFor(spec, wallMs, 'period')))
}

// Many keys in one limiter (SPEC §10).
const { KeyedQuotaClock } = require('./lib/keyed.js')({
  native,
  REGISTRY,
  parseOptions,
  periodSpecInput,
  registerListener,
  callNative,
  toPublicError,
  typeError,
  rangeError,
  checkNumber,
  thrownText,
  toAnomaly,
  toPeriod,
  BASIS,
  NO_ANOMALIES,
})

// Shared per-key limits in MongoDB (the @nodedk/throttle API); its windows come from periodFor.
const { createThrottle, memoryDb } = require('./lib/throttle.js')

module.exports = {
  QuotaClock,
  QuotaClockError,
  KeyedQuotaClock,
  systemClock,
  procUptimeElapsedRealtime,
  manualClock,
  periodFor,
  createThrottle,
  memoryDb,
}
