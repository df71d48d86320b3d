'use strict'
// The option fuzzer: seeded option objects built to be awkward (getters that throw, Proxies with
// throwing or lying traps, revoked Proxies, symbols as keys and values, inherited options,
// non-enumerable ones, every type of value), handed to every entry point that takes options.
// Each call must construct, or throw a TypeError/RangeError with an option-error code; nothing else. What
// constructs is then used once (tryConsume, status), which must decide or throw a coded error.
// Run directly (`node option-fuzz.js COUNT SEED [--pollute]`) it prints a JSON summary, so a test
// can run it in a child process with Object.prototype polluted.

const OPTION_CODES = new Set(['ERR_INVALID_OPTION', 'ERR_SUB_DAY_PERIOD', 'ERR_UNKNOWN_TIME_ZONE'])
const ARG_CODES = new Set(['ERR_INVALID_ARG'])
const CLOCK_CODES = new Set(['ERR_MONOTONIC_REGRESSION', 'ERR_AMBIGUOUS_WALL_JUMP', 'ERR_IMPLAUSIBLE_WALL_CLOCK', 'ERR_CLOCK_READING'])

/** mulberry32: a small seeded generator, so a failure names the seed and index that reproduce it. */
function generator(seed) {
  let state = seed >>> 0
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const below = (n) => Math.floor(next() * n)
  const pick = (values) => values[below(values.length)]
  return { next, below, pick, chance: (p) => next() < p }
}

function fuzzer(lib, seed) {
  const random = generator(seed)
  const { pick, chance } = random
  const thrown = () => pick([new Error('getter boom'), Symbol('thrown'), null, undefined, 'a string', { cause: null }])

  const anything = () =>
    pick([0, -1, 1, 0.5, 7, 1e308, -1e308, NaN, Infinity, -Infinity, 5e-324, Number.MAX_SAFE_INTEGER, 2 ** 53, -0, 10n, -3n, 'x', '5', '', true, false, null, undefined, Symbol('value'), [], [1], {}, () => 1, new Number(5), Object.create(null), new Date(0)])
  const number = () => (chance(0.7) ? pick([1, 2, 5, 10, 0.25, 100, 1e6, 1e-3, 5e-324, 1e308, Number.MAX_VALUE, 0, -1, NaN, Infinity]) : anything())
  const valuesFor = {
    capacity: number,
    refillPerSecond: number,
    initialTokens: () => (chance(0.5) ? pick([0, 0.5, 1, 3]) : number()),
    suspendPolicy: () => (chance(0.7) ? pick(['ignore', 'credit', 'refuse']) : pick(['IGNORE', 'skip', '', 'credit ', undefined, anything()])),
    quota: () => (chance(0.2) ? anything() : wrap({ limit: chance(0.7) ? pick([0, 1, 5, 100, Number.MAX_SAFE_INTEGER]) : number(), period: chance(0.15) ? anything() : period() }, ['limit', 'period'])),
    clock: () => clock(),
    onAnomaly: () => (chance(0.6) ? () => {} : pick([async () => {}, 'handler', anything()])),
    earliestPlausibleWallMs: () => (chance(0.5) ? pick([null, 0, Date.UTC(2020, 0, 1), -8.64e15]) : number()),
  }
  const periodValues = {
    unit: () => (chance(0.7) ? pick(['day', 'week', 'month', 'year']) : pick(['hour', 'minute', 'second', 'decade', 'Day', anything()])),
    timeZone: () => (chance(0.7) ? pick(['UTC', 'America/Los_Angeles', 'Pacific/Apia', 'Asia/Kolkata']) : pick(['Nowhere/Else', 'utc', '', 'America/Los Angeles', anything()])),
    anchorDay: () => (chance(0.5) ? pick([1, 7, 15, 31]) : number()),
    anchorMonth: () => (chance(0.5) ? pick([1, 6, 12]) : number()),
    anchorTime: () => (chance(0.5) ? pick(['00:00', '02:30', '23:59:59']) : pick(['24:00', '1:2', '00:00:60', anything()])),
  }

  function period() {
    const spec = {}
    for (const [key, make] of Object.entries(periodValues)) if (key === 'unit' || key === 'timeZone' || chance(0.3)) spec[key] = make()
    return wrap(spec, Object.keys(periodValues))
  }

  function clock() {
    return pick([
      () => undefined,
      () => lib.manualClock(),
      () => lib.systemClock(),
      () => ({ monotonicMs: () => 1, wallMs: () => Date.UTC(2024, 0, 15) }),
      () => ({ monotonicMs: () => 1, wallMs: () => Date.UTC(2024, 0, 15), elapsedRealtimeMs: () => 1 }),
      () => ({ monotonicMs: 5, wallMs: () => 1 }),
      () => ({}),
      () => new Proxy(lib.manualClock(), {}),
      () => Object.create(Object.getPrototypeOf(lib.manualClock())),
      () => new Proxy({}, { get() { throw thrown() } }),
      () => new Proxy({ monotonicMs: () => 1, wallMs: () => 1 }, { getPrototypeOf() { throw thrown() } }),
      () => revoked(),
      () => anything(),
    ])()
  }

  function revoked() {
    const { proxy, revoke } = Proxy.revocable({}, {})
    revoke()
    return proxy
  }

  /** Dresses `values` up in one of many awkward ways (which must not change what it means, or must be refused). */
  function wrap(values, known) {
    const object = chance(0.15) ? Object.create(inheritedOptions(known)) : {}
    for (const [key, value] of Object.entries(values)) {
      if (value === undefined && chance(0.5)) continue
      switch (random.below(10)) {
        case 0:
          Object.defineProperty(object, key, { get: () => value, enumerable: true })
          break
        case 1:
          Object.defineProperty(object, key, {
            get: () => {
              throw thrown()
            },
            enumerable: true,
          })
          break
        case 2:
          // Not enumerable: not an option.
          Object.defineProperty(object, key, { value, enumerable: false })
          break
        default:
          object[key] = value
      }
    }
    if (chance(0.1)) object[pick(['suspendpolicy', 'foo', 'Capacity', 'limits', 'tz'])] = anything()
    if (chance(0.1)) object[Symbol('extra')] = anything()
    if (chance(0.05)) Object.freeze(object)
    switch (random.below(12)) {
      case 0:
        return new Proxy(object, {})
      case 1:
        return new Proxy(object, { get(target, key) { if (chance(0.5)) throw thrown(); return target[key] } })
      case 2:
        return new Proxy(object, { ownKeys() { throw thrown() } })
      case 3:
        return new Proxy(object, { getOwnPropertyDescriptor() { throw thrown() } })
      case 4:
        // Lies about its keys.
        return new Proxy(object, { ownKeys: () => ['capacity', 'ghost'], getOwnPropertyDescriptor: () => ({ value: 1, enumerable: true, configurable: true }) })
      case 5:
        return chance(0.3) ? revoked() : object
      default:
        return object
    }
  }

  function inheritedOptions(known) {
    const proto = {}
    for (const key of known) if (chance(0.5)) proto[key] = anything()
    return proto
  }

  function options() {
    const values = {}
    for (const [key, make] of Object.entries(valuesFor)) {
      const required = key === 'capacity' || key === 'refillPerSecond' || key === 'suspendPolicy'
      if (required ? chance(0.95) : chance(0.35)) values[key] = make()
    }
    return chance(0.05) ? anything() : wrap(values, Object.keys(valuesFor))
  }

  return { options, period, anything, wrap, random }
}

/** What a call did: 'ok', 'coded' (as allowed) or a description of what must never happen. */
function judge(fn, allowedCodes) {
  let value
  try {
    value = fn()
  } catch (error) {
    const typed = error instanceof TypeError || error instanceof RangeError
    if (typed && allowedCodes.has(error.code)) return { outcome: 'coded', code: error.code }
    let text
    try {
      text = `${error && error.constructor && error.constructor.name} ${error && error.code}: ${error && error.message}`
    } catch {
      text = 'an unprintable throw'
    }
    return { outcome: 'bad', text }
  }
  return { outcome: 'ok', value }
}

function judgeUse(fn) {
  try {
    fn()
    return null
  } catch (error) {
    if (error instanceof lib().QuotaClockError && CLOCK_CODES.has(error.code)) return null
    if (error instanceof RangeError && ARG_CODES.has(error.code)) return null
    return `${error && error.constructor && error.constructor.name} ${error && error.code}: ${error && error.message}`
  }
}

let loaded
function lib() {
  loaded ??= require('../..')
  return loaded
}

/** Runs `count` cases from `seed`; returns a summary with every case that broke the contract. */
function fuzz(count, seed) {
  const library = lib()
  const { options, period, anything, wrap } = fuzzer(library, seed)
  const tally = { constructed: 0, refused: 0, codes: {}, bad: [] }
  const record = (index, what, result) => {
    if (result.outcome === 'bad') tally.bad.push({ seed, index, what, text: result.text })
    else if (result.outcome === 'coded') {
      tally.refused++
      tally.codes[result.code] = (tally.codes[result.code] ?? 0) + 1
    } else tally.constructed++
  }
  for (let index = 0; index < count; index++) {
    const given = options()
    const made = judge(() => new library.QuotaClock(given), OPTION_CODES)
    // A JS clock is read at construction: its reading errors are clock-reading errors, not option errors.
    if (made.outcome === 'bad' && /QuotaClockError ERR_CLOCK_READING/.test(made.text)) {
      record(index, 'QuotaClock', { outcome: 'coded', code: 'ERR_CLOCK_READING' })
      continue
    }
    record(index, 'QuotaClock', made)
    if (made.outcome === 'ok') {
      for (const use of [() => made.value.tryConsume(), () => made.value.status(), () => made.value.tryConsume(2), () => made.value.periodFor(0)]) {
        const problem = judgeUse(use)
        if (problem) tally.bad.push({ seed, index, what: 'use', text: problem })
      }
    }
    if (index % 4 === 0) record(index, 'periodFor', judge(() => library.periodFor(period(), Date.UTC(2024, 0, 15)), new Set([...OPTION_CODES, ...ARG_CODES])))
    if (index % 4 === 1) record(index, 'manualClock', judge(() => library.manualClock(wrap({ monotonicMs: anything(), wallMs: anything(), elapsedRealtimeMs: anything() }, ['monotonicMs', 'wallMs', 'elapsedRealtimeMs'])), OPTION_CODES))
    if (index % 4 === 2) record(index, 'systemClock', judge(() => library.systemClock(wrap({ elapsedRealtimeMs: anything() }, ['elapsedRealtimeMs'])), OPTION_CODES))
    if (index % 4 === 3) record(index, 'manualClock().set', judge(() => library.manualClock().set(wrap({ wallMs: anything() }, ['wallMs'])), ARG_CODES))
  }
  return tally
}

/** The command line: COUNT SEED [--pollute]; prints the summary as one JSON line. */
function main() {
  const [count, seed] = process.argv.slice(2).map(Number)
  if (process.argv.includes('--pollute')) {
    const period = { unit: 'hour', timeZone: 'Nowhere/Else' }
    for (const [key, value] of Object.entries({ capacity: -1, refillPerSecond: NaN, suspendPolicy: 'skip', quota: { limit: -1, period }, clock: {}, onAnomaly: 5, earliestPlausibleWallMs: 'x', limit: -1, period, unit: 'hour', timeZone: 'Nowhere/Else', anchorDay: 99, elapsedRealtimeMs: 5, monotonicMs: 'x', wallMs: 'x' })) {
      Object.prototype[key] = value
    }
  }
  const tally = fuzz(count, seed)
  setTimeout(() => console.log(JSON.stringify(tally)), 20)
}

module.exports = { fuzz, main, fuzzer, judge, OPTION_CODES, ARG_CODES, CLOCK_CODES }

if (require.main === module) main()
