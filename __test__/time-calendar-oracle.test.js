'use strict'
// periodFor (chrono-tz, in Rust) against an independent oracle written here on Node's
// own time zone data (Intl.DateTimeFormat), over random zones, specs and instants.
//
// The two read different copies of tzdata: chrono-tz's and the one in Node's ICU
// (process.versions.tz). They agree on every zone's offsets from 1990 to 2040 at the time of
// writing, so no zone is excluded. If a Node upgrade brings tzdata with a real rule change, the
// zones it touches will fail here: list them in EXCLUDED_ZONES with the two versions.
const test = require('node:test')
const assert = require('node:assert/strict')
const { periodFor } = require('..')

const EXCLUDED_ZONES = new Set([])

const SEED = Number(process.env.CALENDAR_ORACLE_SEED ?? 0x7a1e2024) >>> 0
const RANDOM_CASES = 5000
const AIMED_CASES = 3000

const HOUR = 3600
const DAY = 86400
const FROM_S = Date.UTC(1990, 0, 1) / 1000
const TO_S = Date.UTC(2040, 0, 1) / 1000

function mulberry32(seed) {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const pad = (n, width = 2) => String(n).padStart(width, '0')

/** A date as days since 1970-01-01, and back, through Date (not the code under test). */
const daysOf = (year, month, day) => Date.UTC(year, month - 1, day) / 1000 / DAY
function civilOf(days) {
  const date = new Date(days * DAY * 1000)
  return { year: date.getUTCFullYear(), month: date.getUTCMonth() + 1, day: date.getUTCDate() }
}
const daysInMonth = (year, month) => new Date(Date.UTC(year, month, 0)).getUTCDate()

/** Local time in one zone, read from ICU; all times are whole seconds. */
class ZoneClock {
  constructor(zone) {
    this.format = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    })
    this.transitionsCache = null
  }

  /** Local minus UTC, seconds, at the instant `utcS`. */
  offset(utcS) {
    const p = {}
    for (const { type, value } of this.format.formatToParts(utcS * 1000)) p[type] = Number(value)
    return Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second) / 1000 - utcS
  }

  /** Offset changes in (fromS, toS] as [at, offsetBefore, offsetAfter], sampled every `stepS`. */
  transitions(fromS, toS, stepS) {
    const found = []
    let t = fromS
    let offset = this.offset(t)
    while (t < toS) {
      const next = Math.min(t + stepS, toS)
      const nextOffset = this.offset(next)
      let low = t
      let lowOffset = offset
      while (lowOffset !== nextOffset) {
        let a = low
        let b = next
        while (b - a > 1) {
          const m = Math.floor((a + b) / 2)
          if (this.offset(m) === lowOffset) a = m
          else b = m
        }
        const after = this.offset(b)
        found.push([b, lowOffset, after])
        low = b
        lowOffset = after
      }
      t = next
      offset = nextOffset
    }
    return found
  }

  /** Every offset change from 1990 to 2040 (weekly samples: enough to aim test cases). */
  allTransitions() {
    this.transitionsCache ??= this.transitions(FROM_S, TO_S, 7 * DAY)
    return this.transitionsCache
  }

  /**
   * The calendar's rule for one local time (seconds since 1970-01-01T00:00 local): the first instant whose
   * local time is at or after it, and whether it was a gap, a repeat or exact. Found piecewise
   * from the exact offset changes around it.
   */
  resolve(localS) {
    // Offsets since 1990 lie within −12 h..+14 h, so every candidate is inside this window.
    const fromS = localS - 16 * HOUR
    const toS = localS + 16 * HOUR
    const pieces = [[fromS, this.offset(fromS)]]
    for (const [at, , after] of this.transitions(fromS, toS, 2 * HOUR)) pieces.push([at, after])
    assert.ok(fromS + pieces[0][1] < localS, 'oracle window too narrow')
    let first = null
    let occurrences = 0
    pieces.forEach(([start, offset], i) => {
      const end = i + 1 < pieces.length ? pieces[i + 1][0] : toS + 1
      const t = Math.max(localS - offset, start)
      if (t < end) {
        first ??= t
        if (t + offset === localS) occurrences += 1
      }
    })
    const kind = first + this.offset(first) > localS ? 'gap' : occurrences > 1 ? 'repeat' : 'exact'
    return { utcS: first, kind }
  }
}

const clocks = new Map()
function clockOf(zone) {
  if (!clocks.has(zone)) clocks.set(zone, new ZoneClock(zone))
  return clocks.get(zone)
}

function anchorSeconds(anchorTime = '00:00') {
  const [h, m, s = 0] = anchorTime.split(':').map(Number)
  return h * HOUR + m * 60 + s
}

/** The oracle's periodFor: slot k's start, stepping k until start(k) <= wall < start(k + 1). */
function oraclePeriod(spec, wallMs) {
  const clock = clockOf(spec.timeZone)
  const anchorDay = spec.anchorDay ?? 1
  const anchorMonth = spec.anchorMonth ?? 1
  const time = anchorSeconds(spec.anchorTime)
  // Week slot 0 starts on the first anchor weekday on or after Thursday 1970-01-01.
  const weekShift = (((anchorDay - 4) % 7) + 7) % 7
  const anchorDays = (k) => {
    switch (spec.unit) {
      case 'day':
        return k
      case 'week':
        return 7 * k + weekShift
      case 'month': {
        const year = Math.floor(k / 12)
        const month = k - 12 * year + 1
        return daysOf(year, month, Math.min(anchorDay, daysInMonth(year, month)))
      }
      default:
        return daysOf(k, anchorMonth, Math.min(anchorDay, daysInMonth(k, anchorMonth)))
    }
  }
  const start = (k) => clock.resolve(anchorDays(k) * DAY + time)
  const utcS = Math.floor(wallMs / 1000)
  const localDays = Math.floor((utcS + clock.offset(utcS)) / DAY)
  const local = civilOf(localDays)
  let k = {
    day: localDays,
    week: Math.floor((localDays - weekShift) / 7),
    month: local.year * 12 + local.month - 1,
    year: local.year,
  }[spec.unit]
  let from = start(k)
  while (from.utcS * 1000 > wallMs) from = start(--k)
  let to = start(k + 1)
  while (to.utcS * 1000 <= wallMs) {
    k += 1
    from = to
    to = start(k + 1)
  }
  const date = civilOf(anchorDays(k))
  const id = {
    day: `${date.year}-${pad(date.month)}-${pad(date.day)}`,
    week: `${date.year}-${pad(date.month)}-${pad(date.day)}`,
    month: `${Math.floor(k / 12)}-${pad(k - 12 * Math.floor(k / 12) + 1)}`,
    year: String(k),
  }[spec.unit]
  return {
    id,
    startMs: from.utcS * 1000,
    endMs: to.utcS * 1000,
    startKind: from.kind,
    timeZone: spec.timeZone,
  }
}

function check(spec, wallMs, context) {
  const message = `${context} spec=${JSON.stringify(spec)} wallMs=${wallMs}` +
    ` (Node's tzdata ${process.versions.tz})`
  const actual = periodFor(spec, wallMs)
  assert.deepEqual(actual, oraclePeriod(spec, wallMs), message)
  assert.equal(periodFor(spec, actual.endMs).startMs, actual.endMs, `tiling at the end: ${message}`)
  assert.equal(periodFor(spec, actual.startMs - 1).endMs, actual.startMs, `tiling at the start: ${message}`)
  assert.equal(periodFor(spec, actual.startMs).id, actual.id, `start belongs to the period: ${message}`)
}

const ALL_ZONES = Intl.supportedValuesOf('timeZone').filter((zone) => !EXCLUDED_ZONES.has(zone))
// Zones with DST, half-hour or 45-minute shifts, midnight transitions, or date-line moves.
const INTERESTING_ZONES = [
  'America/New_York', 'America/Los_Angeles', 'America/Sao_Paulo', 'America/Santiago',
  'America/Havana', 'America/Asuncion', 'America/St_Johns', 'America/Godthab', 'America/Scoresbysund',
  'Europe/London', 'Europe/Berlin', 'Europe/Moscow', 'Europe/Chisinau', 'Africa/Cairo',
  'Africa/Casablanca', 'Asia/Beirut', 'Asia/Gaza', 'Asia/Tehran', 'Asia/Jerusalem', 'Asia/Amman',
  'Asia/Damascus', 'Australia/Lord_Howe', 'Australia/Adelaide', 'Pacific/Chatham', 'Pacific/Apia',
  'Pacific/Fakaofo', 'Pacific/Kiritimati', 'Pacific/Enderbury', 'Pacific/Kwajalein', 'Pacific/Norfolk',
  'Pacific/Easter', 'Antarctica/Troll', 'Asia/Kathmandu', 'America/Caracas', 'Europe/Dublin',
].filter((zone) => ALL_ZONES.includes(zone))

function randomSpec(rand, zone, unit) {
  const int = (min, max) => min + Math.floor(rand() * (max - min + 1))
  const spec = { unit, timeZone: zone }
  if (unit === 'week') spec.anchorDay = int(1, 7)
  if (unit === 'month' || unit === 'year') {
    if (rand() < 0.8) spec.anchorDay = rand() < 0.3 ? int(28, 31) : int(1, 31)
  }
  if (unit === 'year' && rand() < 0.8) spec.anchorMonth = int(1, 12)
  const r = rand()
  if (r < 0.35) {
    spec.anchorTime = `${pad(int(0, 3))}:${pad(15 * int(0, 3))}` // where most transitions are
  } else if (r < 0.75) {
    const hhmm = `${pad(int(0, 23))}:${pad(int(0, 59))}`
    spec.anchorTime = rand() < 0.5 ? hhmm : `${hhmm}:${pad(int(0, 59))}`
  }
  return spec
}

function timeOfDay(seconds) {
  const text = `${pad(Math.floor(seconds / HOUR))}:${pad(Math.floor(seconds / 60) % 60)}`
  return seconds % 60 === 0 ? text : `${text}:${pad(seconds % 60)}`
}

/** A spec whose slot starts near a real offset change of the zone, and an instant near it. */
function aimedCase(rand, zone, unit) {
  const transitions = clockOf(zone).allTransitions()
  if (transitions.length === 0) return null
  const [at, before, after] = transitions[Math.floor(rand() * transitions.length)]
  // A local time from half an hour before the skipped or repeated stretch to half an hour after.
  const span = Math.abs(after - before)
  const localS = at + Math.min(before, after) - 1800 + Math.floor(rand() * (span + 3600))
  const days = Math.floor(localS / DAY)
  const date = civilOf(days)
  const spec = { unit, timeZone: zone, anchorTime: timeOfDay(localS - days * DAY) }
  if (unit === 'week') spec.anchorDay = ((((days + 3) % 7) + 7) % 7) + 1
  if (unit === 'month') spec.anchorDay = date.day
  if (unit === 'year') Object.assign(spec, { anchorDay: date.day, anchorMonth: date.month })
  const wallMs = (at + Math.floor((rand() - 0.5) * 4 * DAY)) * 1000 + Math.floor(rand() * 1000)
  return { spec, wallMs }
}

test('every zone Node knows is a zone periodFor knows, under the same name', () => {
  for (const zone of ALL_ZONES) {
    assert.equal(periodFor({ unit: 'day', timeZone: zone }, 0).timeZone, zone)
  }
})

test(`periodFor matches the Intl oracle on random specs and instants (seed ${SEED})`, () => {
  const rand = mulberry32(SEED)
  const units = ['day', 'week', 'month', 'year']
  for (let i = 0; i < RANDOM_CASES; i++) {
    const zone = rand() < 0.25
      ? INTERESTING_ZONES[Math.floor(rand() * INTERESTING_ZONES.length)]
      : ALL_ZONES[Math.floor(rand() * ALL_ZONES.length)]
    const spec = randomSpec(rand, zone, units[i % 4])
    const wallMs = FROM_S * 1000 + Math.floor(rand() * (TO_S - FROM_S) * 1000) + (rand() < 0.2 ? 0.5 : 0)
    check(spec, wallMs, `seed=${SEED} random case ${i}`)
  }
})

test(`periodFor matches the Intl oracle where slots start in gaps and repeats (seed ${SEED})`, () => {
  const rand = mulberry32(SEED ^ 0x9e3779b9)
  const units = ['day', 'week', 'month', 'year']
  // Twenty random zones besides the interesting ones: finding a zone's changes costs ~20 ms.
  const zones = [...INTERESTING_ZONES]
  for (let i = 0; i < 20; i++) zones.push(ALL_ZONES[Math.floor(rand() * ALL_ZONES.length)])
  const kinds = { exact: 0, gap: 0, repeat: 0 }
  for (let i = 0, made = 0; made < AIMED_CASES && i < 10 * AIMED_CASES; i++) {
    const aimed = aimedCase(rand, zones[Math.floor(rand() * zones.length)], units[i % 4])
    if (aimed === null) continue
    made += 1
    check(aimed.spec, aimed.wallMs, `seed=${SEED} aimed case ${i}`)
    kinds[periodFor(aimed.spec, aimed.wallMs).startKind] += 1
  }
  assert.ok(kinds.gap > 100 && kinds.repeat > 100, `too few gaps or repeats: ${JSON.stringify(kinds)}`)
})

test('days around date-line moves and skipped midnights match the oracle, empty dates skipped', () => {
  const moves = [
    ['Pacific/Apia', 2011, 12, 30],
    ['Pacific/Fakaofo', 2011, 12, 30],
    ['Pacific/Kiritimati', 1994, 12, 31],
    ['Pacific/Enderbury', 1994, 12, 31],
    ['Pacific/Kwajalein', 1993, 8, 21],
    ['America/Sao_Paulo', 2018, 11, 4],
    ['America/Havana', 2024, 3, 10],
    ['America/Santiago', 2024, 9, 8],
  ].filter(([zone]) => ALL_ZONES.includes(zone))
  for (const [zone, year, month, day] of moves) {
    for (const anchorTime of ['00:00', '00:30', '12:00', '23:30']) {
      const spec = { unit: 'day', timeZone: zone, anchorTime }
      const from = Date.UTC(year, month - 1, day - 4)
      for (let wallMs = from; wallMs < from + 8 * DAY * 1000; wallMs += 3 * HOUR * 1000) {
        check(spec, wallMs, `${zone} ${anchorTime}`)
      }
    }
  }
  const apia = { unit: 'day', timeZone: 'Pacific/Apia' }
  const december29 = periodFor(apia, Date.UTC(2011, 11, 30, 9))
  const december31 = periodFor(apia, december29.endMs)
  assert.deepEqual([december29.id, december31.id], ['2011-12-29', '2011-12-31'])
})
