'use strict'
// The `simulate` command: the naive Date.now() bucket and QuotaClock on one manual clock through
// a scenario (bin/scenarios.js), printed request by request or plotted (bin/plot.js).

const fs = require('node:fs')
const path = require('node:path')
const { nearest: closest, didYouMean } = require('../lib/cli/index.js')
const { NAMES, SCENARIOS, runScenario } = require('./scenarios.js')
const { renderSvg } = require('./plot.js')
const { PROGRAM, usage, utcTime, localTime, print } = require('./command-line.js')

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

module.exports = {
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
}
