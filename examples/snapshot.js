'use strict'
// Quotas that survive restarts: a KeyedQuotaClock snapshotted to a file on an interval and at
// SIGTERM, restored at start. Each snapshot is written atomically (a temporary file, fsync, rename,
// fsync of the directory), so a crash or a `kill -9` at any moment leaves the previous file whole.
//
//   node examples/snapshot.js [file] [intervalMs]
//
// The traffic below is simulated (tenants on two plans, in their own time zones); put your own
// requests in its place.
const fs = require('node:fs')
const path = require('node:path')
const { KeyedQuotaClock } = require('..')

const file = path.resolve(process.argv[2] || 'quota-snapshot.bin')
const intervalMs = Number(process.argv[3] || 60_000)
const simulatedTenants = Number(process.env.SIMULATED_TENANTS || 1000)

const plans = {
  free: { capacity: 10, refillPerSecond: 1, quota: { limit: 1_000, period: { unit: 'month', timeZone: 'UTC' } } },
  pro: { capacity: 100, refillPerSecond: 20, quota: { limit: 100_000, period: { unit: 'month', timeZone: 'America/New_York' } } },
}
const tenantPlan = (tenant) => (Number(tenant.split('-')[1]) % 10 === 0 ? plans.pro : plans.free)

/** The last snapshot, if there is a readable one. */
function readSnapshot() {
  try {
    return fs.readFileSync(file)
  } catch (error) {
    if (error.code === 'ENOENT') return undefined
    throw error
  }
}

function createLimiter() {
  const options = {
    capacity: 10,
    refillPerSecond: 1,
    suspendPolicy: 'ignore',
    policy: tenantPlan,
    onAnomaly: (anomaly) => console.warn(`[quota-clock] ${anomaly.kind}: ${anomaly.detail}`),
  }
  const restore = readSnapshot()
  if (restore === undefined) return new KeyedQuotaClock(options)
  try {
    return new KeyedQuotaClock({ ...options, restore })
  } catch (error) {
    // Not expected with atomic writes; a file from another version, say. Start empty, and keep it.
    console.warn(`cannot restore ${file} (${error.message}); starting with no keys`)
    fs.renameSync(file, `${file}.unreadable-${Date.now()}`)
    return new KeyedQuotaClock(options)
  }
}

/** Writes `bytes` to `file` so that a reader always finds the old file or the new one, whole. */
function writeAtomically(bytes) {
  const temporary = `${file}.${process.pid}.tmp`
  const fd = fs.openSync(temporary, 'w')
  try {
    fs.writeSync(fd, bytes)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  fs.renameSync(temporary, file)
  // The rename itself is durable once the directory is synced.
  const directory = fs.openSync(path.dirname(file), 'r')
  try {
    fs.fsyncSync(directory)
  } finally {
    fs.closeSync(directory)
  }
}

const limiter = createLimiter()

function save(reason) {
  const bytes = limiter.snapshot()
  writeAtomically(bytes)
  console.log(`snapshot (${reason}): ${limiter.size} keys, ${bytes.length} bytes`)
}

const saver = setInterval(() => save('interval'), intervalMs)

// Simulated traffic: a request from a random tenant every millisecond or so.
let allowed = 0
let denied = 0
const traffic = setInterval(() => {
  for (let i = 0; i < 20; i++) {
    const tenant = `tenant-${Math.floor(Math.random() * simulatedTenants)}`
    if (limiter.tryConsume(tenant).allowed) allowed++
    else denied++
  }
}, 1)

process.on('SIGTERM', () => {
  clearInterval(saver)
  clearInterval(traffic)
  save('SIGTERM')
  console.log(`allowed ${allowed}, denied ${denied}; bye`)
  process.exit(0)
})
// Printed once the SIGTERM handler is in place: a supervisor that stops the process after this line
// gets the final snapshot.
console.log(`holding ${limiter.size} keys restored from ${file}`)
