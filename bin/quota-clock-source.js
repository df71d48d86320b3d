#!/usr/bin/env node
'use strict'
// The `quota-clock-source` command: `periods` (when does a quota reset), `simulate`
// (what the naive Date.now() bucket gets wrong), `watch` (this host's clocks, live), and
// `usage`, `grant`, `reset` (a shared quota in Redis or MongoDB; bin/quota-admin.js).
// A bad argument exits 2 with one line on stderr naming it; success exits 0.

const fs = require('node:fs')
const path = require('node:path')
const { parseArgs } = require('node:util')
const { QuotaClock, systemClock, procUptimeElapsedRealtime, periodFor } = require('../index.js')
const { NAMES, SCENARIOS, runScenario } = require('./scenarios.js')
const { renderSvg } = require('./plot.js')
const { adminCommands } = require('./quota-admin.js')
const { PERIOD_UNITS: UNITS, MAX_WALL_MS, nearest: closest, didYouMean, editDistance } = require('../lib/cli.js')

const PROGRAM = 'quota-clock-source'
const MAX_PERIODS = 10_000

/** A bad argument: reported as one line on stderr, exit status 2. */
class UsageError extends Error {}
const usage = (message) => new UsageError(message)

// ---------------------------------------------------------------------------------------------
// Commands: their options, help and what they run.

const COMMON_OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
}

const COMMANDS = {
  periods: {
    summary: 'the calendar periods of a quota: when exactly it resets',
    options: {
      unit: { type: 'string' },
      zone: { type: 'string' },
      'anchor-day': { type: 'string' },
      'anchor-month': { type: 'string' },
      'anchor-time': { type: 'string' },
      from: { type: 'string' },
      count: { type: 'string' },
    },
    positionals: [],
    help: `Usage: ${PROGRAM} periods --unit <day|week|month|year> --zone <IANA> [options]

The quota periods from the one holding --from: id, local start, UTC start, length in
hours and startKind ('exact'; 'gap' when the local start time was skipped by a DST change;
'repeat' when it occurred twice).

Options:
  --unit <unit>           day, week, month or year (required)
  --zone <IANA>           time zone, e.g. America/New_York or UTC (required)
  --anchor-day <N>        month/year: day of month 1..31 (default 1); week: ISO weekday 1..7, 1 = Monday
  --anchor-month <N>      year: month 1..12 (default 1)
  --anchor-time <HH:MM>   local reset time, HH:MM or HH:MM:SS (default 00:00)
  --from <instant>        an ISO 8601 instant with Z or an offset, or milliseconds since the epoch
                          (default: now)
  --count <N>             how many periods (default 6, at most ${MAX_PERIODS})
  --json                  print an array of Period objects { id, startMs, endMs, startKind, timeZone }
  -h, --help              print this help

Example: New York's spring-forward day is 23 hours long
  ${PROGRAM} periods --unit day --zone America/New_York --from 2021-03-12T12:00:00Z --count 4
`,
    run: periods,
  },
  simulate: {
    summary: 'the naive Date.now() bucket and QuotaClock through clock steps, suspends and DST',
    options: {
      svg: { type: 'string' },
      list: { type: 'boolean' },
    },
    positionals: ['scenario'],
    help: `Usage: ${PROGRAM} simulate [scenario] [--svg FILE] [--list] [--json]

Runs the classic naive bucket (refill from Date.now()'s delta, clamped at 0) and a QuotaClock on
one manual clock through a scenario, and prints what each decided, request by request, with
QuotaClock's tokens and anomalies. Without a scenario every scenario runs.

Scenarios:
${SCENARIOS.map((scenario) => `  ${scenario.name.padEnd(21)} ${scenario.title}`).join('\n')}

Options:
  --svg FILE   write a plot of both buckets over time, anomalies marked (one panel per scenario)
  --list       print the scenario names, one a line (--json: an array of names)
  --json       print { scenario, steps: [{ atMs, n, naive: { allowed, tokens }, quotaClock:
               { allowed, tokens, retryAfterMs, retryAfterBasis, anomalies } }] } (an array of
               them without a scenario); atMs is scenario time since its start
  -h, --help   print this help

Example:
  ${PROGRAM} simulate step-back --svg step-back.svg
`,
    run: simulate,
  },
  watch: {
    summary: "this host's clock anomalies as they happen (steps, suspends)",
    options: {
      interval: { type: 'string' },
      count: { type: 'string' },
    },
    positionals: [],
    help: `Usage: ${PROGRAM} watch [--interval MS] [--count N] [--json]

Reads this host's clocks through a QuotaClock on systemClock() every --interval ms (on Linux with
CLOCK_BOOTTIME too, so a suspend is told apart from an NTP step) and prints each anomaly as it
happens. Stops after --count readings, or on Ctrl-C.

Options:
  --interval <MS>   milliseconds between readings (default 1000)
  --count <N>       stop after N readings (default: run until Ctrl-C)
  --json            one Anomaly object per line, nothing else
  -h, --help        print this help

Example: watch while you suspend the laptop or run \`date -s\`
  ${PROGRAM} watch --interval 500
`,
    run: watch,
  },
  // usage, grant, reset: the operator's view of a shared quota (bin/quota-admin.js).
  ...adminCommands({ PROGRAM, usage, print, periodSpec, periodAt, integerValue }),
}

const MAIN_HELP = `Usage: ${PROGRAM} <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, command]) => `  ${name.padEnd(10)} ${command.summary}`)
  .join('\n')}

Every command takes --json (machine output on stdout) and --help.
A bad argument exits with status 2 and one line on stderr.
--version prints the package's version.

Examples:
  ${PROGRAM} periods --unit month --zone America/Los_Angeles --from 2024-03-15T00:00:00Z
  ${PROGRAM} simulate step-forward
  ${PROGRAM} watch --count 10
  ${PROGRAM} usage --redis redis://localhost:6379 --name api --key acme --unit month --zone UTC
`

/** Parses one command's arguments strictly; a problem becomes a UsageError naming the argument. */
function parseCommand(name, argv) {
  const command = COMMANDS[name]
  const options = { ...command.options, ...COMMON_OPTIONS }
  let parsed
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: true })
  } catch (error) {
    throw usage(describeParseError(error, name, options, argv))
  }
  if (parsed.positionals.length > command.positionals.length) {
    const extra = parsed.positionals[command.positionals.length]
    const takes = command.positionals.length === 0 ? 'takes no positional arguments' : `takes at most ${command.positionals.map((p) => `[${p}]`).join(' ')}`
    throw usage(`unexpected argument '${extra}': ${name} ${takes}`)
  }
  return parsed
}

function describeParseError(error, commandName, options, argv) {
  const message = String(error.message).split(/\r?\n/).join(' ')
  const missing = /^Option '(-[^' ]+)[^']*' argument missing/.exec(message)
  if (missing) return `${missing[1]} needs a value`
  const ambiguous = /^Option '(-[^' ]+)' argument is ambiguous/.exec(message)
  if (ambiguous) {
    const flag = ambiguous[1]
    const given = argv[argv.indexOf(flag) + 1]
    // A count or an interval is never negative: say what it must be, not that it is missing.
    if (POSITIVE_INTEGER_FLAGS.has(flag.slice(2)) && given !== undefined) return `${flag} must be a positive integer; received '${given}'`
    return `${flag} needs a value; for a value that starts with '-', write ${flag}=-…`
  }
  if (error.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return message
  const raw = (/'([^']*)'/.exec(message) || [null, ''])[1]
  const given = raw.replace(/^-+/, '').split('=')[0]
  const longNames = Object.keys(options)
  const near = closest(given, longNames)
  if (near !== null) return `unknown option '${raw}' (did you mean '--${near}'?)`
  const owner = Object.keys(COMMANDS).find((other) => other !== commandName && Object.hasOwn(COMMANDS[other].options, given))
  if (owner) return `unknown option '${raw}': it is an option of '${owner}', not '${commandName}'`
  return `unknown option '${raw}'; ${commandName} takes ${longNames.map((option) => `--${option}`).join(', ')}`
}

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

// ---------------------------------------------------------------------------------------------
// periods

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

function periods(values) {
  const spec = periodSpec(values)
  const fromMs = values.from === undefined ? Date.now() : instantValue('from', values.from)
  const count = values.count === undefined ? 6 : integerValue('count', values.count, 1, MAX_PERIODS)

  let period = periodAt(spec, fromMs)
  const list = [period]
  while (list.length < count && period.endMs <= MAX_WALL_MS) {
    period = periodFor(spec, period.endMs)
    list.push(period)
  }

  // The calendar ends where a JS Date does: no period starts after 8.64e15 ms. Say so, rather than
  // print fewer periods than asked with no word why (on stderr with --json: stdout stays JSON).
  const cutShort =
    list.length < count
      ? `Only ${list.length} of the ${count} periods asked for: the calendar's range ends at ${utcTime(MAX_WALL_MS)} (8.64e15 ms since the epoch, the last instant a JS Date holds), and no period starts after it.`
      : null
  if (values.json) {
    print(JSON.stringify(list, null, 2))
    if (cutShort) process.stderr.write(`${PROGRAM} periods: ${cutShort}\n`)
    return 0
  }
  const describeSpec = [
    `${list[0].timeZone}, unit ${spec.unit}`,
    spec.anchorMonth !== undefined ? `anchor month ${spec.anchorMonth}` : null,
    spec.anchorDay !== undefined ? `anchor day ${spec.anchorDay}` : null,
    `reset at ${spec.anchorTime || '00:00'} local time`,
  ].filter(Boolean)
  const rows = list.map((p) => [p.id, localTime(p.startMs, p.timeZone), utcTime(p.startMs), hours(p.endMs - p.startMs), p.startKind])
  print(`${describeSpec.join(', ')}\n\n${table(['id', 'local start', 'UTC start', 'hours', 'startKind'], rows, [false, false, false, true, false])}`)
  if (cutShort) print(`\n${cutShort}`)
  return 0
}

function hours(ms) {
  return String(Math.round((ms / 3_600_000) * 1000) / 1000)
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

function table(header, rows, rightAligned) {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)))
  const line = (cells) =>
    cells
      .map((cell, i) => (rightAligned[i] ? cell.padStart(widths[i]) : cell.padEnd(widths[i])))
      .join('  ')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

// ---------------------------------------------------------------------------------------------
// simulate

function simulate(values, positionals) {
  if (values.list) {
    if (positionals.length > 0) throw usage(`--list takes no scenario; received '${positionals[0]}'`)
    if (values.json) return print(JSON.stringify(NAMES))
    return print(NAMES.join('\n')) // one name a line; --help has what each one does
  }
  const names = positionals.length === 0 ? NAMES : [positionals[0]]
  if (!NAMES.includes(names[0])) {
    throw usage(`unknown scenario '${names[0]}'${didYouMean(closest(names[0], NAMES))}; the scenarios are ${NAMES.join(', ')}`)
  }
  if (values.svg !== undefined) checkWritable('svg', values.svg)

  const runs = names.map(runScenario)
  if (values.svg !== undefined) fs.writeFileSync(values.svg, renderSvg(runs))
  if (values.json) {
    const results = runs.map((run) => run.result)
    return print(JSON.stringify(positionals.length === 0 ? results : results[0], null, 2))
  }
  print(runs.map(formatRun).join('\n\n'))
  if (values.svg !== undefined) print(`\nPlot written to ${values.svg}`)
  return 0
}

function checkWritable(flag, file) {
  if (file === '') throw usage(`--${flag} needs a file name`)
  const dir = path.dirname(path.resolve(file))
  let stat
  try {
    stat = fs.statSync(dir)
  } catch {
    throw usage(`--${flag} '${file}': the folder ${dir} does not exist`)
  }
  if (!stat.isDirectory()) throw usage(`--${flag} '${file}': ${dir} is not a folder`)
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) throw usage(`--${flag} '${file}' is a folder, not a file`)
}

function duration(ms) {
  if (ms < 1000) return `${ms} ms`
  const s = ms / 1000
  if (s < 60) return `${Math.round(s * 1000) / 1000} s`
  const parts = []
  let rest = Math.round(s)
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3_600],
    ['min', 60],
    ['s', 1],
  ]) {
    if (rest >= size || parts.length > 0) {
      parts.push([Math.floor(rest / size), unit])
      rest %= size
    }
    if (parts.length === 2) break
  }
  // The largest unit and the next one, unless that is zero: '1 h', '23 h 29 min', '30 d 22 h'.
  return parts
    .filter(([value], i) => i === 0 || value > 0)
    .map(([value, unit]) => `${value} ${unit}`)
    .join(' ')
}

function formatRun(run) {
  const { meta, timeline, result } = run
  const zone = meta.quota ? meta.quota.period.timeZone : 'UTC'
  const wallOf = (ms) => (meta.quota ? localTime(ms, zone).slice(11) : utcTime(ms).slice(11, 19)) // 'HH:MM:SS[ ±HH:MM]'
  const out = []
  out.push(`${meta.name}: ${meta.title}`)
  const rate = meta.refillPerSecond === 1 ? '1 token/s' : `${meta.refillPerSecond} tokens/s`
  const reader = meta.reader ? 'with an elapsed-realtime (CLOCK_BOOTTIME) reader' : 'no elapsed-realtime reader'
  out.push(`  bucket: capacity ${meta.capacity}, ${rate}, starts with ${meta.initialTokens}; suspendPolicy '${meta.suspendPolicy}', ${reader}`)
  if (meta.quota) {
    const p = meta.quota.period
    const anchor = p.anchorTime ? `, reset at ${p.anchorTime}` : ''
    out.push(`  quota: ${meta.quota.limit} per ${p.unit} in ${p.timeZone}${anchor} (QuotaClock only: the naive bucket has no calendar)`)
  }
  out.push(`  wall clock starts at ${utcTime(meta.startWallMs)}${meta.quota ? ` (${localTime(meta.startWallMs, zone)} local)` : ''}`)
  out.push('')
  const header = ['time', 'n', `wall (${meta.quota ? 'local' : 'UTC'})`, 'naive bucket', 'QuotaClock']
  if (meta.quota) header.push('quota')
  const rows = []
  const notes = new Map() // row index → lines printed under it
  for (const entry of timeline) {
    if (entry.type === 'clock') continue
    if (entry.type === 'suspend') {
      rows.push({ event: `${seconds(entry.atMs)}  -- the host sleeps ${duration(entry.ms)} (the monotonic clock stops; wall and CLOCK_BOOTTIME go on)` })
      continue
    }
    if (entry.type === 'step') {
      const what = entry.deltaMs < 0 ? `back ${duration(-entry.deltaMs)}` : `forward ${duration(entry.deltaMs)}`
      rows.push({ event: `${seconds(entry.atMs)}  -- NTP sets the wall clock ${what}` })
      continue
    }
    const { step } = entry
    const q = step.quotaClock
    const naiveCell = `${step.naive.allowed ? 'allowed' : 'DENIED '}  ${step.naive.tokens.toFixed(2)}`
    const qcCell = `${q.allowed ? 'allowed' : 'DENIED '}  ${q.tokens.toFixed(2)}${q.allowed ? '' : `  retry in ${duration(q.retryAfterMs)} (${q.retryAfterBasis})`}`
    const cells = [seconds(step.atMs), String(step.n), wallOf(entry.wallMs), naiveCell, qcCell]
    if (meta.quota) cells.push(`${entry.quotaRemaining} left in ${entry.periodId}`)
    rows.push({ cells, differ: step.naive.allowed !== q.allowed })
    if (q.anomalies.length > 0) notes.set(rows.length - 1, q.anomalies.map((a) => `anomaly ${a.kind}: ${a.detail}`))
  }
  const cellRows = rows.filter((row) => row.cells).map((row) => row.cells)
  const widths = header.map((title, i) => Math.max(title.length, ...cellRows.map((cells) => (cells[i] || '').length)))
  const pad = (cells) =>
    cells
      .map((cell, i) => (i < 2 ? cell.padStart(widths[i]) : cell.padEnd(widths[i])))
      .join('   ')
      .trimEnd()
  out.push(`  ${pad(header)}`)
  const indent = ' '.repeat(widths[0] + widths[1] + 6)
  rows.forEach((row, i) => {
    out.push(row.event ? `  ${row.event}` : `  ${pad(row.cells)}`)
    for (const note of notes.get(i) || []) out.push(`  ${indent}${note}`)
  })
  const differ = rows.filter((row) => row.differ).length
  out.push('')
  out.push(`  The two decided differently on ${differ} of ${result.steps.length} requests.`)
  for (const sentence of meta.lesson) out.push(`  - ${sentence}`)
  return out.join('\n')
}

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`.padStart(7)

// ---------------------------------------------------------------------------------------------
// watch

function watch(values) {
  const intervalMs = values.interval === undefined ? 1000 : integerValue('interval', values.interval, 1, 2 ** 31 - 1)
  const count = values.count === undefined ? Infinity : integerValue('count', values.count, 1, Number.MAX_SAFE_INTEGER)
  let reader = null
  try {
    reader = procUptimeElapsedRealtime()
  } catch (error) {
    if (error.code !== 'ERR_UNSUPPORTED_PLATFORM') throw error
  }
  // A bucket that never runs dry: only the reconciliation of the readings matters here. Without a
  // reader (not Linux), 'ignore' reports an ambiguous forward jump instead of throwing.
  const limiter = new QuotaClock({
    capacity: 1e15,
    refillPerSecond: 1e15,
    suspendPolicy: 'ignore',
    clock: reader ? systemClock({ elapsedRealtimeMs: reader }) : systemClock(),
  })
  const clocks = reader ? 'CLOCK_MONOTONIC, CLOCK_REALTIME and CLOCK_BOOTTIME' : 'the monotonic and the wall clock (no suspend-inclusive clock on this platform)'
  if (!values.json) {
    const until = count === Infinity ? 'Ctrl-C stops' : `${count} readings, Ctrl-C stops sooner`
    print(`Watching ${clocks} every ${intervalMs} ms (${until}).`)
  }

  return new Promise((resolve) => {
    let readings = 0
    let anomalies = 0
    let timer = null
    const finish = (status) => {
      clearTimeout(timer)
      process.off('SIGINT', onSignal)
      process.off('SIGTERM', onSignal)
      if (!values.json && status === 0) print(`${readings} readings, ${anomalies} ${anomalies === 1 ? 'anomaly' : 'anomalies'}.`)
      resolve(status)
    }
    const onSignal = () => finish(0)
    process.on('SIGINT', onSignal)
    process.on('SIGTERM', onSignal)
    const read = () => {
      let decision
      try {
        decision = limiter.tryConsume(1)
      } catch (error) {
        process.stderr.write(`${PROGRAM} watch: ${oneLine(error.message)}${error.code ? ` (${error.code})` : ''}\n`)
        return finish(1)
      }
      readings++
      for (const anomaly of decision.anomalies) {
        anomalies++
        print(values.json ? JSON.stringify(anomaly) : `${utcTime(Date.now())}  ${anomaly.kind}: ${anomaly.detail}`)
      }
      if (readings >= count) finish(0)
      else timer = setTimeout(read, intervalMs)
    }
    timer = setTimeout(read, intervalMs)
  })
}

// ---------------------------------------------------------------------------------------------

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

/** Runs the command line `argv` (without node and the script); resolves to the exit status. */
async function main(argv) {
  const [name, ...rest] = argv
  if (name === undefined) throw usage(`missing command: expected ${Object.keys(COMMANDS).join(', ')} (see '${PROGRAM} --help')`)
  if (name === '--help' || name === '-h' || name === 'help') return print(MAIN_HELP.trimEnd())
  if (name === '--version' || name === '-V' || name === 'version') {
    if (rest.length > 0) throw usage(`--version takes no arguments; received '${rest[0]}'`)
    return print(require('../package.json').version)
  }
  if (!Object.hasOwn(COMMANDS, name)) {
    const near = name.startsWith('-') ? null : closest(name, Object.keys(COMMANDS))
    const what = name.startsWith('-') ? `expected a command before '${name}'` : `unknown command '${name}'${didYouMean(near)}`
    throw usage(`${what}; the commands are ${Object.keys(COMMANDS).join(', ')}`)
  }
  let parsed
  try {
    parsed = parseCommand(name, rest)
    if (parsed.values.help) return print(COMMANDS[name].help.trimEnd())
    return await COMMANDS[name].run(parsed.values, parsed.positionals)
  } catch (error) {
    if (error !== null && typeof error === 'object') error.command = name
    throw error
  }
}

if (require.main === module) {
  // `quota-clock-source periods ... | head -1` closes stdout early: that is not an error.
  // Any other write error (a full disk, /dev/full) is one line on stderr and exit 1, no stack.
  process.stdout.on('error', (error) => {
    if (error.code === 'EPIPE') process.exit(0)
    failWrite(error)
  })
  main(process.argv.slice(2)).then(
    (status) => {
      process.exitCode = status
    },
    (error) => {
      const where = error.command ? `${PROGRAM} ${error.command}` : PROGRAM
      const code = error instanceof UsageError ? '' : error.code ? ` (${error.code})` : ''
      process.stderr.write(`${where}: ${oneLine(error.message)}${code}\n`)
      process.exitCode = error instanceof UsageError ? 2 : 1
    },
  )
}

module.exports = { main, editDistance, closest }
