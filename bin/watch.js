'use strict'
// The `watch` command: this host's clocks read through a QuotaClock, each anomaly printed as it
// happens.

const { QuotaClock, systemClock, procUptimeElapsedRealtime } = require('../index.js')
const { PROGRAM, integerValue, utcTime, print, oneLine } = require('./command-line.js')

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

module.exports = {
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
}
