'use strict'
// The `periods` command: the calendar periods of a quota, from the one holding --from.

const { periodFor } = require('../index.js')
const { MAX_WALL_MS } = require('../lib/cli/index.js')
const { PROGRAM, integerValue, instantValue, periodSpec, periodAt, utcTime, localTime, print } = require('./command-line.js')

const MAX_PERIODS = 10_000

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

function table(header, rows, rightAligned) {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i].length)))
  const line = (cells) =>
    cells
      .map((cell, i) => (rightAligned[i] ? cell.padStart(widths[i]) : cell.padEnd(widths[i])))
      .join('  ')
      .trimEnd()
  return [line(header), ...rows.map(line)].join('\n')
}

module.exports = {
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
}
