'use strict'
// Clock sources: systemClock(), hostElapsedRealtime(), procUptimeElapsedRealtime(), manualClock(), how a limiter reads
// a clock it is given (natively where it can, in JS otherwise), and the checked JS readings.

const native = require('../native/native.js')
const { QuotaClockError, callNative } = require('../native/errors.js')
const { coded, describe, thrownText, isPlainObject, readOptions, typeError, checkNumber, checkFinite } = require('../common/validate.js')

const { NativeManualClock } = native

/** Clocks and readers this module made, so a limiter can read them natively. */
const systemClocks = new WeakSet()
const nativeReaders = new WeakSet()

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

/** A reader of the host's suspend-inclusive clock, which a limiter reads natively. */
function nativeReader() {
  const reader = () => native.elapsedRealtimeMs()
  nativeReaders.add(reader)
  return reader
}

function procUptimeElapsedRealtime() {
  if (!native.boottimeSupported()) {
    throw new QuotaClockError(
      'ERR_UNSUPPORTED_PLATFORM',
      `procUptimeElapsedRealtime() needs Linux CLOCK_BOOTTIME; this platform is ${process.platform}. Use hostElapsedRealtime() (macOS and Windows too), pass your own elapsedRealtimeMs reader to systemClock(), or choose a suspendPolicy`,
    )
  }
  return nativeReader()
}

/** The platform's suspend-inclusive clock: Linux CLOCK_BOOTTIME, macOS mach_continuous_time, Windows QueryInterruptTimePrecise. */
function hostElapsedRealtime() {
  if (!native.elapsedRealtimeSupported()) {
    throw new QuotaClockError(
      'ERR_UNSUPPORTED_PLATFORM',
      `hostElapsedRealtime() reads Linux CLOCK_BOOTTIME, macOS mach_continuous_time or Windows QueryInterruptTimePrecise; this platform is ${process.platform}. Pass your own elapsedRealtimeMs reader to systemClock(), or choose a suspendPolicy`,
    )
  }
  return nativeReader()
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
      // Only a clock made with a reader has one.
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
    if (nativeReaders.has(reader)) return clockKind('system-native-reader', undefined, undefined, undefined)
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


const NOT_READ = Object.freeze([undefined, undefined])

/**
 * What a limiter reads in JS: a JS clock (its methods looked up at every reading) or the JS
 * elapsed-realtime reader of systemClock(). The native side holds neither, so one that refers
 * back to its limiter does not keep it alive. While it is being read, a call it makes back into
 * the limiter is refused; once the monotonic clock regressed, it is not read again (the native
 * latch answers every later call).
 */
class JsClock {
  #clock
  #reader
  #reading = false
  #latched = false

  constructor(clock, reader) {
    this.#clock = clock
    this.#reader = reader
  }

  /** The JsClock of a limiter's clock arguments (clockArguments), or undefined when it reads none in JS. */
  static of({ clock, reader }) {
    return clock !== undefined || reader !== undefined ? new JsClock(clock, reader) : undefined
  }

  #enter() {
    if (this.#reading) throw new QuotaClockError('ERR_CLOCK_READING', 'the clock called back into this limiter while it was reading it')
    this.#reading = true
  }

  /** The clock's monotonic and wall readings; none for systemClock's reader (those are native); NaN once latched. */
  readings() {
    if (this.#clock === undefined) return NOT_READ
    if (this.#latched) return [NaN, NaN]
    this.#enter()
    try {
      return [readClock(this.#clock, 'monotonicMs'), readClock(this.#clock, 'wallMs')]
    } finally {
      this.#reading = false
    }
  }

  /** The elapsed-realtime reading (of a JS clock, or of systemClock's reader). */
  elapsedRealtime() {
    this.#enter()
    try {
      return this.#clock !== undefined ? readClock(this.#clock, 'elapsedRealtimeMs') : readReader(this.#reader)
    } finally {
      this.#reading = false
    }
  }

  /** Sees the public error a call is about to throw: a monotonic regression latches. */
  failed(error) {
    if (error.code === 'ERR_MONOTONIC_REGRESSION') this.#latched = true
    return error
  }
}

/** The starting readings of a clock read in JS, in the order the native side takes them (none for a native clock). */
function startingReadings({ kind, clock, reader }) {
  if (clock !== undefined) {
    const monotonicMs = readClock(clock, 'monotonicMs')
    const wallMs = readClock(clock, 'wallMs')
    return { monotonicMs, wallMs, elapsedRealtimeMs: kind === 'js-reader' ? readClock(clock, 'elapsedRealtimeMs') : undefined }
  }
  if (reader !== undefined) {
    const monotonicMs = native.systemMonotonicMs()
    const wallMs = native.systemWallMs()
    return { monotonicMs, wallMs, elapsedRealtimeMs: readReader(reader) }
  }
  return { monotonicMs: undefined, wallMs: undefined, elapsedRealtimeMs: undefined }
}

/** A limiter's monotonic clock as a function of no arguments, in ms (blocks are timed on it, lib/keyed/blocks.js). */
function monotonicOf({ manual, clock }) {
  if (manual !== undefined) return () => manual.monotonicMs()
  if (clock !== undefined) return () => readClock(clock, 'monotonicMs')
  return native.systemMonotonicMs
}

module.exports = { systemClock, hostElapsedRealtime, procUptimeElapsedRealtime, manualClock, clockArguments, startingReadings, monotonicOf, JsClock, NOT_READ }
