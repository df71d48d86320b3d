'use strict'
// What every command of bin/ shares: the program's name, a bad argument (UsageError, exit 2),
// printing, the values of flags (integers, instants, a period spec) and how instants are written.

const { periodFor } = require('../index.js')
const { PERIOD_UNITS: UNITS, MAX_WALL_MS, nearest: closest, didYouMean } = require('../lib/cli/index.js')

const PROGRAM = 'quota-clock-source'

/** A bad argument: reported as one line on stderr, exit status 2. */
class UsageError extends Error {}
const usage = (message) => new UsageError(message)

// ---------------------------------------------------------------------------------------------
// Argument values.

// The flags whose value is a positive integer (a value starting with '-' is a wrong value, not a
// missing one).
const POSITIVE_INTEGER_FLAGS = new Set(['count', 'interval', 'anchor-day', 'anchor-month', 'units'])

function integerValue(flag, text, min, max) {
  if (!/^[+]?\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw usage(`--${flag} must be an integer from ${min} to ${max}; received '${text}'`)
  }
  return Number(text)
}

/** An ISO 8601 instant with a UTC designator or offset, or milliseconds since the epoch. */
function instantValue(flag, text) {
  let ms
  if (/^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i.test(text)) {
    ms = Number(text)
  } else if (/^[+-]?\d{4,6}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i.test(text)) {
    ms = Date.parse(text)
  } else if (/^[+-]?\d{4,6}-\d{2}-\d{2}(T[\d:.]+)?$/.test(text)) {
    throw usage(`--${flag} '${text}' has no UTC offset, so it is not an instant: add Z or an offset (e.g. '${text.includes('T') ? text : `${text}T00:00:00`}Z')`)
  } else {
    throw usage(`--${flag} must be an ISO 8601 instant such as 2021-03-12T12:00:00Z or milliseconds since the epoch; received '${text}'`)
  }
  if (!Number.isFinite(ms) || Math.abs(ms) > MAX_WALL_MS) {
    throw usage(`--${flag} '${text}' is not a valid instant within the range of a JS Date (±8.64e15 ms)`)
  }
  return ms
}

const SPEC_FLAGS = [
  ['period.timeZone', '--zone'],
  ['period.unit', '--unit'],
  ['period.anchorDay', '--anchor-day'],
  ['period.anchorMonth', '--anchor-month'],
  ['period.anchorTime', '--anchor-time'],
  ['anchorDay', '--anchor-day'],
  ['anchorMonth', '--anchor-month'],
  ['anchorTime', '--anchor-time'],
]

/** The library's message for a bad period spec, in terms of the command's flags. */
function periodSpecError(error) {
  let message = String(error.message)
  // (An unknown time zone's did-you-mean is the library's own.)
  for (const [option, flag] of SPEC_FLAGS) message = message.split(option).join(flag)
  return usage(message)
}

/** The period spec of --unit, --zone, --anchor-day, --anchor-month and --anchor-time. */
function periodSpec(values) {
  if (values.unit === undefined) throw usage('--unit is required: day, week, month or year')
  if (!UNITS.includes(values.unit)) {
    if (['hour', 'minute', 'second'].includes(values.unit)) {
      throw usage(`--unit '${values.unit}' is refused: a calendar quota has no sub-day periods (a rate within a day is the bucket's job); expected day, week, month or year`)
    }
    throw usage(`--unit must be day, week, month or year; received '${values.unit}'${didYouMean(closest(values.unit, UNITS))}`)
  }
  if (values.zone === undefined) throw usage('--zone is required: an IANA time zone such as America/New_York, or UTC')
  const spec = { unit: values.unit, timeZone: values.zone }
  if (values['anchor-day'] !== undefined) {
    if (values.unit === 'day') throw usage(`--anchor-day does not apply to --unit day (a day period starts at --anchor-time on every date); received '${values['anchor-day']}'`)
    spec.anchorDay = values.unit === 'week' ? integerValue('anchor-day', values['anchor-day'], 1, 7) : integerValue('anchor-day', values['anchor-day'], 1, 31)
  }
  if (values['anchor-month'] !== undefined) {
    if (values.unit !== 'year') throw usage(`--anchor-month applies to --unit year only; received '${values['anchor-month']}' with --unit ${values.unit}`)
    spec.anchorMonth = integerValue('anchor-month', values['anchor-month'], 1, 12)
  }
  if (values['anchor-time'] !== undefined) spec.anchorTime = values['anchor-time']
  return spec
}

/** The period of `spec` holding `wallMs`; a spec the calendar refuses is a bad argument. */
function periodAt(spec, wallMs) {
  try {
    return periodFor(spec, wallMs)
  } catch (error) {
    if (error instanceof TypeError || error instanceof RangeError) throw periodSpecError(error)
    throw error
  }
}

// A period can start or end just outside a JS Date's range (the first or last period there is):
// such an instant is printed as its number of milliseconds.
const inDateRange = (ms) => Math.abs(ms) <= MAX_WALL_MS

function utcTime(ms) {
  return inDateRange(ms) ? new Date(ms).toISOString().replace('.000Z', 'Z') : `${ms} ms`
}

const offsetFormats = new Map()
/**
 * '2021-03-14 03:00:00 -04:00': the wall time and UTC offset in `timeZone`. The offset comes from
 * Intl; the date is written like toISOString (and the period ids), so years outside 0–9999 read
 * the same way ('+275760', '-271821').
 */
function localTime(ms, timeZone) {
  let format = offsetFormats.get(timeZone)
  if (format === undefined) {
    try {
      format = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' })
    } catch {
      format = null // a name chrono-tz knows and this Node's ICU does not
    }
    offsetFormats.set(timeZone, format)
  }
  if (format === null || !inDateRange(ms)) return '?'
  const name = format.formatToParts(new Date(ms)).find((part) => part.type === 'timeZoneName').value // 'GMT-04:00', 'GMT'
  const match = /^GMT(?:([+-])(\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(name)
  if (!match) return '?'
  const [, sign = '+', hh = '00', mm = '00', ss] = match
  const offsetMs = (sign === '-' ? -1 : 1) * ((Number(hh) * 60 + Number(mm)) * 60 + Number(ss || 0)) * 1000
  if (!inDateRange(ms + offsetMs)) return '?'
  const wall = new Date(ms + offsetMs).toISOString().replace('T', ' ').replace(/\.\d{3}Z$/, '')
  return `${wall} ${sign}${hh}:${mm}${ss ? `:${ss}` : ''}`
}

// ---------------------------------------------------------------------------------------------
// Output.

function print(text) {
  try {
    process.stdout.write(`${text}\n`)
  } catch (error) {
    // Output to a file is written synchronously, so a full disk throws here.
    if (error?.code === 'EPIPE') process.exit(0)
    failWrite(error)
  }
  return 0
}

/** Output could not be written: one line on stderr, exit 1 (the output is incomplete). */
function failWrite(error) {
  const code = error?.code ? ` (${error.code})` : ''
  try {
    process.stderr.write(`${PROGRAM}: cannot write the output: ${oneLine(error?.message ?? error)}${code}\n`)
  } finally {
    process.exit(1)
  }
}

const oneLine = (text) => String(text).split(/\s*\r?\n\s*/).join(' ')

module.exports = {
  PROGRAM,
  UsageError,
  usage,
  POSITIVE_INTEGER_FLAGS,
  integerValue,
  instantValue,
  periodSpec,
  periodAt,
  inDateRange,
  utcTime,
  localTime,
  print,
  failWrite,
  oneLine,
}
