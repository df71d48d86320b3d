'use strict'
// `npm run soak` (not a test): memory over a long run. 50,000,000 tryConsume calls (allowed and
// denied, with and without a quota), then 1,000,000 limiters created, used once and dropped
// (with JS clocks and onAnomaly handlers among them), then 1,000,000 calls that each raise an
// anomaly for a handler. RSS is printed every 5,000,000 calls (every 100,000 limiters); a phase
// is flat when its second half grows no more than 1 MB over the highest reading of its first half
// (a leak grows with the work; the allocator's high-water mark settles once), and the run passes
// when every phase is flat. The largest growth over the baseline is printed beside it.
const { QuotaClock, manualClock } = require('..')

const CALLS = Number(process.env.SOAK_CALLS || 50_000_000)
const LIMITERS = Number(process.env.SOAK_LIMITERS || 1_000_000)
const ANOMALY_CALLS = Number(process.env.SOAK_ANOMALY_CALLS || 1_000_000)
const TREND_BYTES = 1024 * 1024

const mb = (bytes) => (bytes / 2 ** 20).toFixed(1)
const pause = () => new Promise((resolve) => setImmediate(resolve))
const verdicts = []

/** Records RSS at each checkpoint; the first after warm-up is the baseline. */
function phase(name) {
  const readings = []
  return {
    checkpoint(label) {
      const rss = process.memoryUsage().rss
      readings.push(rss)
      console.log(`${name.padEnd(24)} ${label.padStart(14)}  RSS ${mb(rss).padStart(7)} MB  (${readings.length === 1 ? 'baseline' : `${rss >= readings[0] ? '+' : ''}${mb(rss - readings[0])} MB`})`)
    },
    done() {
      const growth = Math.max(...readings) - readings[0]
      const middle = Math.ceil(readings.length / 2)
      const trend = Math.max(...readings.slice(middle)) - Math.max(...readings.slice(0, middle))
      const flat = trend <= TREND_BYTES
      verdicts.push({ name, growth, flat })
      console.log(
        `${name}: largest growth over the baseline ${mb(growth)} MB; second half over the first ${trend >= 0 ? '+' : ''}${mb(trend)} MB: ${flat ? 'flat' : 'NOT flat'} (within ${mb(TREND_BYTES)} MB)`,
      )
    },
  }
}

async function consumeCalls() {
  const open = new QuotaClock({ capacity: 1_000, refillPerSecond: 1_000_000, suspendPolicy: 'ignore' })
  const quota = new QuotaClock({ capacity: 1e12, refillPerSecond: 1e12, suspendPolicy: 'ignore', quota: { limit: Number.MAX_SAFE_INTEGER, period: { unit: 'month', timeZone: 'America/Los_Angeles' } } })
  const shut = new QuotaClock({ capacity: 1, refillPerSecond: 1e-9, initialTokens: 0, suspendPolicy: 'ignore' })
  const limiters = [open, quota, shut]
  const every = Math.min(5_000_000, CALLS)
  const memory = phase('tryConsume calls')
  let allowed = 0
  // Warm-up: the JIT and the heap settle.
  for (let i = 0; i < 1_000_000; i++) allowed += limiters[i % 3].tryConsume().allowed ? 1 : 0
  await pause()
  memory.checkpoint('0')
  for (let done = 0; done < CALLS; ) {
    for (let i = 0; i < every; i++) allowed += limiters[i % 3].tryConsume().allowed ? 1 : 0
    done += every
    await pause()
    memory.checkpoint(done.toLocaleString('en'))
  }
  memory.done()
  console.log(`(${allowed.toLocaleString('en')} allowed)`)
}

async function createdAndDropped() {
  const memory = phase('limiters created/dropped')
  let t = 0
  const every = Math.min(100_000, LIMITERS)
  const make = (i) => {
    switch (i % 4) {
      case 0:
        return new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })
      case 1:
        return new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock(), onAnomaly: () => {} })
      case 2: {
        // A clock that refers back to its limiter.
        const tenant = { monotonicMs: () => t, wallMs: () => Date.UTC(2024, 0, 15) + t }
        tenant.limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock: tenant })
        return tenant.limiter
      }
      default:
        return new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'credit', quota: { limit: 10, period: { unit: 'day', timeZone: 'UTC' } } })
    }
  }
  for (let i = 0; i < 100_000; i++) make(i).tryConsume()
  await settle()
  memory.checkpoint('0')
  for (let done = 0; done < LIMITERS; ) {
    for (let i = 0; i < every; i++) {
      t += 0.001
      make(i).tryConsume()
      if (i % 10_000 === 0) await pause()
    }
    done += every
    await settle()
    memory.checkpoint(done.toLocaleString('en'))
  }
  memory.done()
}

async function anomalyCalls() {
  const memory = phase('calls with anomalies')
  const clock = manualClock()
  let delivered = 0
  const limiter = new QuotaClock({ capacity: 1e12, refillPerSecond: 1e12, suspendPolicy: 'ignore', clock, onAnomaly: () => delivered++ })
  const every = Math.min(100_000, ANOMALY_CALLS)
  const warnings = []
  process.on('warning', (warning) => warnings.push(warning.code))
  for (let i = 0; i < 50_000; i++) {
    clock.stepWall(-1_000)
    limiter.tryConsume()
  }
  await settle()
  memory.checkpoint('0')
  for (let done = 0; done < ANOMALY_CALLS; ) {
    // Never yielding within a checkpoint: deliveries pile up past the bound and are dropped.
    for (let i = 0; i < every; i++) {
      clock.stepWall(-1_000)
      limiter.tryConsume()
    }
    done += every
    await settle()
    memory.checkpoint(done.toLocaleString('en'))
  }
  memory.done()
  console.log(`(${delivered.toLocaleString('en')} delivered, ${warnings.filter((code) => code === 'QUOTA_CLOCK_ANOMALIES_DROPPED').length} drop warnings)`)
}

async function settle() {
  for (let i = 0; i < 5; i++) {
    if (global.gc) global.gc()
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

;(async () => {
  console.log(`node ${process.version}; ${CALLS.toLocaleString('en')} calls, ${LIMITERS.toLocaleString('en')} limiters, ${ANOMALY_CALLS.toLocaleString('en')} calls with anomalies`)
  process.removeAllListeners('warning') // the drop warnings are counted, not printed
  const started = Date.now()
  await consumeCalls()
  await createdAndDropped()
  await anomalyCalls()
  console.log(`${((Date.now() - started) / 1000).toFixed(0)} s; ${verdicts.every((v) => v.flat) ? 'every phase flat' : `NOT flat: ${verdicts.filter((v) => !v.flat).map((v) => v.name).join(', ')}`}`)
  process.exitCode = verdicts.every((v) => v.flat) ? 0 : 1
})()
