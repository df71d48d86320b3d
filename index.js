'use strict'
// The JS face of quota-clock-source: option checks with coded errors, clock-source plumbing,
// and the decision object. The Rust core does every computation; see src/.

const { coded, describe, thrownText, isPlainObject, readOptions } = require('./lib/validate.js')
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
  constructor(code, message, options) {
    super(message, options)
    this.name = 'QuotaClockError'
    this.code = code
  }
}

// The JS↔native contract (error codes, the unions' values, the result-buffer layout), defined once
// in Rust (src/contract.rs) and read here at load.
const CONTRACT = native.contract()
const CLOCK_ERROR_CODES = new Set(CONTRACT.errorCodes.filter((entry) => entry.class === 'QuotaClockError').map((entry) => entry.code))
const RANGE_ERROR_CODES = new Set(CONTRACT.errorCodes.filter((entry) => entry.class === 'RangeError').map((entry) => entry.code))

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
  const { unit, timeZone, anchorDay, anchorMonth, anchorTime } = readOptions(period, PERIOD_KEYS, path)
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
  }
  const reader = options === undefined ? undefined : readOptions(options, ['elapsedRealtimeMs'], '').elapsedRealtimeMs
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
  /** The native state of a real manual clock; a Proxy of one, or an object made from its prototype, has none. */
  static #of(clock, what) {
    if ((typeof clock !== 'object' && typeof clock !== 'function') || clock === null || !(#native in clock)) {
      throw typeError('ERR_INVALID_ARG', what, 'called on a clock made by manualClock()', clock)
    }
    return clock.#native
  }
  constructor(init) {
    if (init !== undefined && !isPlainObject(init)) throw typeError('ERR_INVALID_OPTION', 'manualClock(init)', 'an object { monotonicMs?, wallMs?, elapsedRealtimeMs? }', init)
    const { monotonicMs = 0, wallMs = Date.UTC(2024, 0, 15), elapsedRealtimeMs } = init === undefined ? Object.create(null) : readOptions(init, ['monotonicMs', 'wallMs', 'elapsedRealtimeMs'], 'init')
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
    const state = ManualClock.#of(this, 'advance(ms)')
    checkNumber(ms, 'advance(ms)', 'ERR_INVALID_ARG')
    callNative(() => state.advance(ms))
  }
  suspend(ms) {
    const state = ManualClock.#of(this, 'suspend(ms)')
    checkNumber(ms, 'suspend(ms)', 'ERR_INVALID_ARG')
    callNative(() => state.suspend(ms))
  }
  stepWall(deltaMs) {
    const state = ManualClock.#of(this, 'stepWall(deltaMs)')
    checkNumber(deltaMs, 'stepWall(deltaMs)', 'ERR_INVALID_ARG')
    callNative(() => state.stepWall(deltaMs))
  }
  set(values) {
    const state = ManualClock.#of(this, 'set(values)')
    if (!isPlainObject(values)) throw typeError('ERR_INVALID_ARG', 'set(values)', 'an object { monotonicMs?, wallMs?, elapsedRealtimeMs? }', values)
    const { monotonicMs, wallMs, elapsedRealtimeMs } = readOptions(values, ['monotonicMs', 'wallMs', 'elapsedRealtimeMs'], 'set', 'ERR_INVALID_ARG')
    if (monotonicMs !== undefined) checkNumber(monotonicMs, 'set({ monotonicMs })', 'ERR_INVALID_ARG')
    if (wallMs !== undefined) checkNumber(wallMs, 'set({ wallMs })', 'ERR_INVALID_ARG')
    if (elapsedRealtimeMs !== undefined) checkNumber(elapsedRealtimeMs, 'set({ elapsedRealtimeMs })', 'ERR_INVALID_ARG')
    callNative(() => state.set(monotonicMs, wallMs, elapsedRealtimeMs))
  }
  monotonicMs() {
    return ManualClock.#of(this, 'monotonicMs()').monotonicMs()
  }
  wallMs() {
    return ManualClock.#of(this, 'wallMs()').wallMs()
  }
  /** How many times the elapsed-realtime reader was called. */
  get elapsedRealtimeReads() {
    return ManualClock.#of(this, 'elapsedRealtimeReads').elapsedRealtimeReads
  }
  /** The native state of a manual clock, or undefined for anything else. */
  static nativeOf(clock) {
    return (typeof clock === 'object' || typeof clock === 'function') && clock !== null && #native in clock ? clock.#native : undefined
  }
}

function manualClock(init) {
  return new ManualClock(init)
}

/**
 * A clock's method, own or from its class; one that only Object.prototype has (a polluted
 * prototype) is not the clock's. A getter or Proxy trap that throws is ERR_INVALID_OPTION.
 */
function clockMethod(clock, name) {
  try {
    const value = clock[name]
    return value !== undefined && value === Object.prototype[name] && !Object.prototype.hasOwnProperty.call(clock, name) ? undefined : value
  } catch (error) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `clock.${name} could not be read: ${thrownText(error)}`, { cause: error })
  }
}

/** A Proxy of a manual clock, or an object made from its prototype: it has no clock state. */
function isManualClockCopy(clock) {
  try {
    return clock instanceof ManualClock
  } catch (error) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `clock could not be inspected: ${thrownText(error)}`, { cause: error })
  }
}

// Objects made here always have every field they are read for (an absent one would be looked up
// on Object.prototype, which may be polluted); objects from the native side are read with `own`.
function clockKind(kind, manual, clock, reader) {
  return { kind, manual, clock, reader }
}

/** An own property, or undefined (never one inherited from a polluted Object.prototype). */
function own(object, key) {
  return Object.hasOwn(object, key) ? object[key] : undefined
}

/** How a limiter reads `clock`: natively where it can; `clock` or `reader` are read in JS. */
function clockArguments(clock) {
  const manual = ManualClock.nativeOf(clock)
  if (manual !== undefined) return clockKind('manual', manual, undefined, undefined)
  if (isManualClockCopy(clock)) {
    throw typeError('ERR_INVALID_OPTION', 'clock', 'a clock source; a Proxy of a manual clock, or an object made from its prototype, is not one (pass the clock manualClock() returned)', clock)
  }
  if (!isPlainObject(clock) && typeof clock !== 'function') {
    throw typeError('ERR_INVALID_OPTION', 'clock', 'a clock source { monotonicMs(), wallMs(), elapsedRealtimeMs?() }', clock)
  }
  const monotonicMs = clockMethod(clock, 'monotonicMs')
  if (typeof monotonicMs !== 'function') throw typeError('ERR_INVALID_OPTION', 'clock.monotonicMs', 'a function returning milliseconds', monotonicMs)
  const wallMs = clockMethod(clock, 'wallMs')
  if (typeof wallMs !== 'function') throw typeError('ERR_INVALID_OPTION', 'clock.wallMs', 'a function returning milliseconds', wallMs)
  const reader = clockMethod(clock, 'elapsedRealtimeMs')
  if (reader !== undefined && typeof reader !== 'function') {
    throw typeError('ERR_INVALID_OPTION', 'clock.elapsedRealtimeMs', 'a function returning milliseconds, or absent', reader)
  }
  if (systemClocks.has(clock) && monotonicMs === native.systemMonotonicMs && wallMs === native.systemWallMs) {
    if (reader === undefined) return clockKind('system', undefined, undefined, undefined)
    if (boottimeReaders.has(reader)) return clockKind('system-boottime', undefined, undefined, undefined)
    return clockKind('system-reader', undefined, undefined, reader)
  }
  // Its methods are looked up at every reading.
  return clockKind(reader === undefined ? 'js' : 'js-reader', undefined, clock, undefined)
}

/** A reading of a JS clock method: a finite number, or ERR_CLOCK_READING with what was thrown as `cause`. */
function readClock(clock, method) {
  let value
  try {
    value = clock[method]()
  } catch (error) {
    throw new QuotaClockError('ERR_CLOCK_READING', `clock.${method}() failed: it threw: ${thrownText(error)}`, { cause: error })
  }
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new QuotaClockError('ERR_CLOCK_READING', `clock.${method}() must return a finite number of milliseconds; received ${describe(value)}`)
  }
  return value
}

/** A reading of systemClock({ elapsedRealtimeMs }) 's reader. */
function readReader(reader) {
  return readClock({ elapsedRealtimeMs: reader }, 'elapsedRealtimeMs')
}

// ---------------------------------------------------------------------------------------------
// QuotaClock (SPEC §4–§8)

const OPTION_KEYS = ['capacity', 'refillPerSecond', 'initialTokens', 'suspendPolicy', 'quota', 'clock', 'onAnomaly', 'earliestPlausibleWallMs']
const SUSPEND_POLICIES = CONTRACT.suspendPolicies
const SUSPEND_POLICY_CHOICES = `one of ${SUSPEND_POLICIES.map((policy) => `'${policy}'`).join(', ')}`
const DEFAULT_EARLIEST_PLAUSIBLE_WALL_MS = Date.UTC(2020, 0, 1)
const MISSING_SUSPEND_POLICY =
  "suspendPolicy is required and has no default: when the wall clock runs ahead of the monotonic clock and no elapsedRealtimeMs reader can tell a host suspend from a wall-clock step, only you know whether that time should refill the bucket ('credit'), be ignored ('ignore'), or make the call fail ('refuse'); received undefined"

// One result buffer per module instance, shared by its limiters: the native tryConsume reads `n` and the
// limiter's registry index from it, writes the decision into it, and this file builds the object
// (cheaper than a napi-built object). Its layout (positions, statuses) is the contract's
// `resultBuffer`: in, `n` and the limiter (and the readings of a JS clock); out, the status, then the
// decision (or, status needsReader, the readings a call took before it stopped for the JS reader).
const LAYOUT = CONTRACT.resultBuffer
const AT = LAYOUT.positions
const STATUS = LAYOUT.status
const RESULT = new Float64Array(LAYOUT.length)
// The limiter's index is written as an integer through this view, so the native side reads it without converting.
const LIMITER_INDEX = new Uint32Array(RESULT.buffer, AT.limiter * Float64Array.BYTES_PER_ELEMENT, 1)
// This module instance's limiters (a module loaded again, by a test runner say, gets its own).
// `consume` is tryConsume for natively read clocks; `consumeSupplied` the same for readings taken in
// JS (a JS clock's, or those of a call resumed after a JS reader). The registry lives as long as they do.
const { id: REGISTRY, consume, consumeSupplied } = native.createRegistry(RESULT)
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

// A decision's retryAfterBasis by its code in the result buffer.
const BASIS = []
BASIS[LAYOUT.basisNone] = null
for (const { name, code } of CONTRACT.retryAfterBasis) BASIS[code] = name
// SPEC §8: at most this many deliveries wait per thread (the native side drops and counts the rest).
const MAX_WAITING_DELIVERIES = 10_000
const NO_ANOMALIES = Object.freeze([])

/** The §4 options; `moreKeys` are read too and checked by the caller (KeyedQuotaClock's own). */
function parseOptions(given, moreKeys = []) {
  if (!isPlainObject(given)) throw typeError('ERR_INVALID_OPTION', 'options', 'an object { capacity, refillPerSecond, suspendPolicy, ... }', given)
  const options = readOptions(given, moreKeys.length === 0 ? OPTION_KEYS : [...OPTION_KEYS, ...moreKeys], '')
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
  if (typeof suspendPolicy !== 'string') throw typeError('ERR_INVALID_OPTION', 'suspendPolicy', SUSPEND_POLICY_CHOICES, suspendPolicy)
  if (!SUSPEND_POLICIES.includes(suspendPolicy)) throw rangeError('ERR_INVALID_OPTION', 'suspendPolicy', SUSPEND_POLICY_CHOICES, suspendPolicy)

  let quotaLimit
  let quotaPeriod
  if (options.quota !== undefined) {
    if (!isPlainObject(options.quota)) throw typeError('ERR_INVALID_OPTION', 'quota', 'an object { limit, period }', options.quota)
    const quota = readOptions(options.quota, ['limit', 'period'], 'quota')
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
    // The options as read (once, own properties only), for the caller's `moreKeys`.
    read: options,
  }
}

/** A process warning; never throws (not even if emitWarning was replaced by one that does). */
function warn(message, code) {
  try {
    process.emitWarning(message, { code })
  } catch {
    // Nowhere left to report it.
  }
}

function handlerFailed(how, error, anomaly) {
  warn(`quota-clock-source: the onAnomaly handler ${how}: ${thrownText(error)} (anomaly: ${anomaly.kind}: ${anomaly.detail})`, 'QUOTA_CLOCK_ON_ANOMALY_THREW')
}

/** Calls the user's handler; a throw, or a promise it returns that rejects, becomes a process warning, never a crash. */
function deliverSafely(onAnomaly, anomaly) {
  let returned
  try {
    returned = onAnomaly(anomaly)
  } catch (error) {
    handlerFailed('threw', error, anomaly)
    return
  }
  if ((typeof returned === 'object' && returned !== null) || typeof returned === 'function') {
    // An async handler (or any thenable): its rejection must not become an unhandled one.
    Promise.resolve(returned).then(undefined, (error) => handlerFailed('returned a promise that rejected', error, anomaly))
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

/** Writes a call's input for consumeSupplied. */
function supply(slot, n, monotonicMs, wallMs, elapsedRealtimeMs) {
  RESULT[AT.nOrStatus] = n
  LIMITER_INDEX[0] = slot
  RESULT[AT.monotonicMs] = monotonicMs
  RESULT[AT.wallMs] = wallMs
  RESULT[AT.elapsedRealtimeMs] = elapsedRealtimeMs === undefined ? NaN : elapsedRealtimeMs
  RESULT[AT.hasElapsedRealtime] = elapsedRealtimeMs === undefined ? 0 : 1
}

/** Marks a limiter's JS clock as being read; a call it makes back into the limiter is refused. */
function enterClock(js) {
  if (js.reading) throw new QuotaClockError('ERR_CLOCK_READING', 'the clock called back into this limiter while it was reading it')
  js.reading = true
}

/** The decision the native tryConsume just wrote into RESULT. */
function readDecision(hasQuota, anomalies) {
  return {
    allowed: RESULT[AT.allowed] === 1,
    retryAfterMs: RESULT[AT.retryAfterMs],
    retryAfterBasis: BASIS[RESULT[AT.basis]],
    tokens: RESULT[AT.tokens],
    quotaRemaining: hasQuota ? RESULT[AT.quotaRemaining] : null,
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
  for (const key of ['suspendedMs', 'stepMs', 'skipped', 'periodId']) {
    const value = own(anomaly, key)
    if (value != null) out[key] = value
  }
  return out
}

class QuotaClock {
  #slot
  #capacity
  #refillPerSecond
  #quotaLimit
  #hasQuota
  #onAnomaly
  // For a limiter read in JS (one field, so that others stay small): `{ clock, reader, reading,
  // latched }`, a JS clock (read here, at every call) or a JS elapsed-realtime reader of
  // systemClock(). The native side holds neither, so a clock or reader that refers back to this
  // limiter does not keep it alive. `reading`: a call the clock makes back into this limiter is
  // refused. `latched`: the monotonic clock regressed; every later call fails with that, and the
  // clock is not read again.
  #js

  // The native side holds this weakly (so that it never keeps this module alive); the class holds it.
  static #dispatch = (delivery) => {
    const { listener, anomaly } = delivery
    const dropped = own(delivery, 'dropped')
    const limiter = listeners.get(listener)?.deref()
    // A KeyedQuotaClock's handler is in otherHandlers (it shares this dispatcher).
    if (limiter !== undefined) deliverSafely(#onAnomaly in limiter ? limiter.#onAnomaly : otherHandlers.get(limiter), toAnomaly(anomaly))
    if (dropped != null) {
      warn(
        `quota-clock-source: ${dropped} anomaly deliveries to onAnomaly were dropped: more than ${MAX_WAITING_DELIVERIES} were waiting on this thread (the event loop did not run while they piled up). Each is still on its decision.anomalies.`,
        'QUOTA_CLOCK_ANOMALIES_DROPPED',
      )
    }
  }

  static {
    native.registryOnAnomaly(REGISTRY, QuotaClock.#dispatch)
  }

  constructor(options) {
    const { limiterOptions, clockArgs, onAnomaly } = parseOptions(options)
    const { kind, manual, clock, reader } = clockArgs
    // The starting readings of a clock read in JS, in the order the native side takes them.
    let monotonicMs
    let wallMs
    let elapsedRealtimeMs
    if (clock !== undefined) {
      monotonicMs = readClock(clock, 'monotonicMs')
      wallMs = readClock(clock, 'wallMs')
      if (kind === 'js-reader') elapsedRealtimeMs = readClock(clock, 'elapsedRealtimeMs')
    } else if (reader !== undefined) {
      monotonicMs = native.systemMonotonicMs()
      wallMs = native.systemWallMs()
      elapsedRealtimeMs = readReader(reader)
    }
    const listener = onAnomaly === undefined ? undefined : nextListener++
    this.#slot = callNative(() =>
      native.createLimiter({ registry: REGISTRY, options: limiterOptions, clock: { kind, manual, monotonicMs, wallMs, elapsedRealtimeMs }, anomalyListener: listener }),
    )
    if (clock !== undefined || reader !== undefined) this.#js = { clock, reader, reading: false, latched: false }
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
    RESULT[AT.nOrStatus] = n
    LIMITER_INDEX[0] = this.#slot
    consume()
    if (RESULT[AT.nOrStatus] === STATUS.decided) return readDecision(this.#hasQuota, NO_ANOMALIES)
    return this.#settle(n)
  }

  /** tryConsume on a JS clock: the readings are taken here and passed in. */
  #consumeJs(n) {
    const js = this.#js
    let monotonicMs = NaN
    let wallMs = NaN
    if (!js.latched) {
      enterClock(js)
      try {
        monotonicMs = readClock(js.clock, 'monotonicMs')
        wallMs = readClock(js.clock, 'wallMs')
      } finally {
        js.reading = false
      }
    }
    // Written only now: the clock may have called other limiters, which share RESULT.
    supply(this.#slot, n, monotonicMs, wallMs, undefined)
    consumeSupplied()
    if (RESULT[AT.nOrStatus] === STATUS.decided) return readDecision(this.#hasQuota, NO_ANOMALIES)
    return this.#settle(n)
  }

  /** The JS elapsed-realtime reading (of a JS clock, or of systemClock's reader). */
  #readElapsedRealtime() {
    const js = this.#js
    enterClock(js)
    try {
      return js.clock !== undefined ? readClock(js.clock, 'elapsedRealtimeMs') : readReader(js.reader)
    } finally {
      js.reading = false
    }
  }

  /** The rare outcomes: a decision with anomalies, a JS clock to read, a call that needs the JS reader, or an error. */
  #settle(n) {
    const status = RESULT[AT.nOrStatus]
    if (status === STATUS.needsReadings) return this.#consumeJs(n)
    if (status === STATUS.decidedWithAnomalies) {
      return readDecision(this.#hasQuota, callNative(() => native.limiterTakeAnomalies(REGISTRY, this.#slot)).map(toAnomaly))
    }
    if (status === STATUS.needsReader) {
      // Nothing changed yet: resume on the readings the call took, with the reader's.
      const monotonicMs = RESULT[AT.monotonicMs]
      const wallMs = RESULT[AT.wallMs]
      const elapsedRealtimeMs = this.#readElapsedRealtime()
      supply(this.#slot, n, monotonicMs, wallMs, elapsedRealtimeMs)
      consumeSupplied()
      if (RESULT[AT.nOrStatus] === STATUS.decided) return readDecision(this.#hasQuota, NO_ANOMALIES)
      return this.#settle(n)
    }
    throw this.#failed(toPublicError(native.limiterTakeError(REGISTRY, this.#slot)))
  }

  #failed(error) {
    if (error.code === 'ERR_MONOTONIC_REGRESSION' && this.#js !== undefined) this.#js.latched = true
    return error
  }

  #status(monotonicMs, wallMs, elapsedRealtimeMs) {
    try {
      return native.limiterStatus(REGISTRY, this.#slot, monotonicMs, wallMs, elapsedRealtimeMs)
    } catch (error) {
      throw error && typeof error.code === 'string' ? this.#failed(toPublicError(error)) : error
    }
  }

  /** Reads and reconciles the clocks like tryConsume, then gives back `n` tokens (up to capacity) and `n` quota units (down to zero). */
  refund(n = 1) {
    checkPositiveCount(n)
    const [monotonicMs, wallMs] = this.#readJsClock()
    const done = this.#native(() => native.limiterRefund(REGISTRY, this.#slot, n, monotonicMs, wallMs, undefined))
    if (done.needsReader) {
      const { takenMonotonicMs, takenWallMs } = done
      const elapsedRealtimeMs = this.#readElapsedRealtime()
      this.#native(() => native.limiterRefund(REGISTRY, this.#slot, n, takenMonotonicMs, takenWallMs, elapsedRealtimeMs))
    }
  }

  /** A JS clock's two readings for a call made outside the hot path (undefined for native clocks; NaN once latched). */
  #readJsClock() {
    const js = this.#js
    if (js === undefined || js.clock === undefined) return [undefined, undefined]
    if (js.latched) return [NaN, NaN]
    enterClock(js)
    try {
      return [readClock(js.clock, 'monotonicMs'), readClock(js.clock, 'wallMs')]
    } finally {
      js.reading = false
    }
  }

  /** A native call of the slow paths, its coded errors made public (a regression latches). */
  #native(body) {
    try {
      return body()
    } catch (error) {
      throw error && typeof error.code === 'string' ? this.#failed(toPublicError(error)) : error
    }
  }

  /** Reads and reconciles the clocks like tryConsume, consuming nothing; also reports the limits in force. */
  status() {
    let monotonicMs
    let wallMs
    const js = this.#js
    if (js !== undefined && js.clock !== undefined) {
      monotonicMs = NaN
      wallMs = NaN
      if (!js.latched) {
        enterClock(js)
        try {
          monotonicMs = readClock(js.clock, 'monotonicMs')
          wallMs = readClock(js.clock, 'wallMs')
        } finally {
          js.reading = false
        }
      }
    }
    let status = this.#status(monotonicMs, wallMs, undefined)
    if (status.needsReader) {
      const { takenMonotonicMs, takenWallMs } = status
      status = this.#status(takenMonotonicMs, takenWallMs, this.#readElapsedRealtime())
    }
    return {
      tokens: status.tokens,
      quotaUsed: own(status, 'quotaUsed') ?? null,
      quotaRemaining: own(status, 'quotaRemaining') ?? null,
      period: own(status, 'period') == null ? null : toPeriod(status.period),
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
  CONTRACT,
  REGISTRY,
  parseOptions,
  periodSpecInput,
  registerListener,
  clockReading: { readClock, readReader, enterClock, native },
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
