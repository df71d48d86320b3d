'use strict'
// `npm run demo`: the package's command, run the way a user would. First `simulate` over every
// scenario (the classic naive Date.now() bucket, with its Math.max(0, …) clamp, and a QuotaClock on
// one manual clock, through NTP steps back and forward, suspends, a DST gap and a month end), with
// the plots written to examples/plots/ (or the folder given as its argument); then the calendar: when New York's days and a 02:30 reset
// start around the spring-forward, and the day Samoa skipped.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const BIN = path.join(__dirname, '..', 'bin', 'quota-clock-source.js')
const PLOTS = path.resolve(process.argv[2] || path.join(__dirname, 'plots'))
const shown = (file) => path.relative(process.cwd(), file) || '.'

/** Runs the command; prints what it prints. Stops the demo if it fails. */
function command(args, { quiet = false } = {}) {
  if (!quiet) console.log(`\n$ quota-clock-source ${args.join(' ')}\n`)
  const result = spawnSync(process.execPath, [BIN, ...args], { stdio: ['ignore', quiet ? 'ignore' : 'inherit', 'inherit'] })
  if (result.status !== 0) {
    console.error(`quota-clock-source ${args.join(' ')} exited with status ${result.status}`)
    process.exit(1)
  }
}

fs.mkdirSync(PLOTS, { recursive: true })
command(['simulate', '--svg', shown(path.join(PLOTS, 'all-scenarios.svg'))])

const names = JSON.parse(spawnSync(process.execPath, [BIN, 'simulate', '--list', '--json'], { encoding: 'utf8' }).stdout)
for (const name of names) command(['simulate', name, '--svg', shown(path.join(PLOTS, `${name}.svg`))], { quiet: true })
console.log(`\nOne plot per scenario: ${names.map((name) => shown(path.join(PLOTS, `${name}.svg`))).join(', ')}`)

command(['periods', '--unit', 'day', '--zone', 'America/New_York', '--from', '2021-03-12T12:00:00Z', '--count', '4'])
command(['periods', '--unit', 'day', '--zone', 'America/New_York', '--anchor-time', '02:30', '--from', '2024-03-09T12:00:00Z', '--count', '3'])
command(['periods', '--unit', 'month', '--zone', 'America/Los_Angeles', '--from', '2024-02-15T00:00:00Z', '--count', '3'])
command(['periods', '--unit', 'day', '--zone', 'Pacific/Apia', '--from', '2011-12-29T12:00:00Z', '--count', '3'])
