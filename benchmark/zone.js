'use strict'
// `npm run bench:zone`: KeyedQuotaClock with `zone` (the keyed table in a shared memory-mapped
// file). In one run: ns per tryConsume over 1,000 keys in a zone against the same in-process
// KeyedQuotaClock (medians over interleaved repetitions); throughput of 4 processes on one key
// and on 1,000 keys against one process; µs per check of rate-limiter-flexible's
// RateLimiterCluster and of a zone on the same node:cluster setup (4 workers); and the zone
// file's resident bytes per key at 1M keys. Every case's answer is asserted before it is timed.
// BENCH_QUICK=1 runs a shorter version.
const assert = require('node:assert/strict')
const cluster = require('node:cluster')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')
const { KeyedQuotaClock } = require('..')

const QUICK = process.env.BENCH_QUICK === '1'
const REPETITIONS = QUICK ? 3 : 7
const CHECKS = QUICK ? 100_000 : 400_000
const SECONDS = QUICK ? 0.5 : 1.5
const CAPACITY = 1e12 // every check is allowed: the same work everywhere
const KEYS = Array.from({ length: 1000 }, (_, i) => JSON.parse(JSON.stringify(`tenant-${i}`)))
const DIR = fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir()
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const options = (zonePath, more = {}) => ({ capacity: CAPACITY, refillPerSecond: 1, suspendPolicy: 'ignore', maxKeys: 4096, ...(zonePath ? { zone: { path: zonePath } } : {}), ...more })
const made = new Set()
/** A zone file of this run, removed when the process exits (whatever happened). */
const zoneFile = (name) => {
  const file = path.join(DIR, `qcs-bench-${name}-${process.pid}`)
  made.add(file)
  return file
}
process.on('exit', () => {
  for (const file of made) fs.rmSync(file, { force: true })
})

function nsPerCheck(limiter, checks) {
  let allowed = 0
  const started = process.hrtime.bigint()
  for (let i = 0; i < checks; i++) if (limiter.tryConsume(KEYS[i % 1000]).allowed) allowed++
  const ns = Number(process.hrtime.bigint() - started) / checks
  assert.equal(allowed, checks)
  return ns
}

/** A worker process of the throughput case: calls tryConsume for `seconds`, prints the count. */
function throughputChild() {
  const [, , , zonePath, keys, seconds] = process.argv
  const limiter = new KeyedQuotaClock(options(zonePath))
  const until = performance.now() + Number(seconds) * 1000
  let calls = 0
  while (performance.now() < until) {
    for (let i = 0; i < 1000; i++) assert.ok(limiter.tryConsume(keys === '1' ? 'hot' : KEYS[(calls + i) % 1000]).allowed)
    calls += 1000
  }
  process.stdout.write(String(calls))
}

function throughput(processes, keys) {
  const zonePath = zoneFile(`throughput-${processes}-${keys}`)
  {
    new KeyedQuotaClock(options(zonePath)).tryConsume('hot')
    const children = Array.from({ length: processes }, () =>
      require('node:child_process').spawn(process.execPath, [__filename, 'throughput', zonePath, String(keys), String(SECONDS)], { stdio: ['ignore', 'pipe', 'inherit'] }),
    )
    return Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => {
            let out = ''
            child.stdout.on('data', (chunk) => (out += chunk))
            child.on('exit', () => resolve(Number(out)))
          }),
      ),
    ).then((counts) => counts.reduce((sum, count) => sum + count, 0) / SECONDS)
  }
}

/** The zone file's resident bytes per key at 1M keys (tmpfs pages allocated), in a fresh process. */
function residentChild() {
  const zonePath = zoneFile('rss')
  process.on('exit', () => fs.rmSync(zonePath, { force: true }))
  const limiter = new KeyedQuotaClock(options(zonePath, { maxKeys: 1_000_000 }))
  const rssBefore = process.memoryUsage().rss
  for (let i = 0; i < 1_000_000; i++) assert.ok(limiter.tryConsume(`client-${i}`).allowed)
  assert.equal(limiter.size, 1_000_000)
  const stat = fs.statSync(zonePath)
  const result = { fileBytes: stat.size, allocatedBytes: stat.blocks * 512, rssGrowth: process.memoryUsage().rss - rssBefore }
  fs.rmSync(zonePath, { force: true })
  process.stdout.write(JSON.stringify(result))
}

// ---- node:cluster: RateLimiterCluster against a zone, 4 workers -------------------------------

const CLUSTER_CHECKS = QUICK ? 2_000 : 10_000

async function clusterWorker() {
  const which = process.env.BENCH_LIMITER
  let check
  if (which === 'rlf') {
    const { RateLimiterCluster } = require('rate-limiter-flexible')
    const limiter = new RateLimiterCluster({ keyPrefix: 'bench', points: 1e9, duration: 3600, timeoutMs: 5000 })
    check = async (key) => {
      await limiter.consume(key)
      return true
    }
  } else {
    const limiter = new KeyedQuotaClock(options(process.env.BENCH_ZONE))
    check = (key) => limiter.tryConsume(key).allowed
  }
  assert.ok(await check('warm-up'))
  let started = process.hrtime.bigint()
  if (which === 'rlf') {
    for (let i = 0; i < CLUSTER_CHECKS; i++) assert.ok(await check(KEYS[i % 1000]))
  } else {
    // A zone answers synchronously: called as a request handler calls it, with no await.
    const checks = CLUSTER_CHECKS * 20
    for (let i = 0; i < checks; i++) assert.ok(check(KEYS[i % 1000]))
    started = process.hrtime.bigint()
    for (let i = 0; i < checks; i++) assert.ok(check(KEYS[i % 1000]))
    process.send({ us: Number(process.hrtime.bigint() - started) / 1000 / checks })
    return
  }
  process.send({ us: Number(process.hrtime.bigint() - started) / 1000 / CLUSTER_CHECKS })
}

function clusterRun(limiterName) {
  return new Promise((resolve) => {
    const zonePath = zoneFile('cluster')
    let master
    if (limiterName === 'rlf') {
      const { RateLimiterClusterMaster } = require('rate-limiter-flexible')
      master = new RateLimiterClusterMaster()
    }
    cluster.setupPrimary({ exec: __filename, args: ['cluster-worker'] })
    const times = []
    for (let i = 0; i < 4; i++) {
      const worker = cluster.fork({ BENCH_LIMITER: limiterName, BENCH_ZONE: zonePath })
      worker.on('message', (message) => {
        if (message && typeof message.us === 'number') {
          times.push(message.us)
          worker.kill()
          if (times.length === 4) {
            fs.rmSync(zonePath, { force: true })
            resolve(median(times))
          }
        }
      })
    }
    void master
  })
}

async function main() {
  // 1. One process: a zone against the in-process limiter, 1,000 keys, interleaved.
  const zonePath = zoneFile('single')
  const zone = new KeyedQuotaClock(options(zonePath))
  const local = new KeyedQuotaClock(options(undefined))
  nsPerCheck(zone, CHECKS)
  nsPerCheck(local, CHECKS)
  const zoneNs = []
  const localNs = []
  const ratios = []
  for (let r = 0; r < REPETITIONS; r++) {
    const a = nsPerCheck(local, CHECKS)
    const b = nsPerCheck(zone, CHECKS)
    localNs.push(a)
    zoneNs.push(b)
    ratios.push(b / a)
  }
  await zone.close()
  fs.rmSync(zonePath, { force: true })
  const single = { inProcessNs: median(localNs), zoneNs: median(zoneNs), ratio: median(ratios) }
  console.log(`tryConsume over 1,000 keys: in-process ${single.inProcessNs.toFixed(0)} ns, zone ${single.zoneNs.toFixed(0)} ns, zone/in-process ${single.ratio.toFixed(2)}x (target <= 2x)`)

  // 2. Throughput of 4 processes against one.
  const scaling = {}
  for (const keys of [1, 1000]) {
    const one = await throughput(1, keys)
    const four = await throughput(4, keys)
    scaling[keys] = { one, four, ratio: four / one }
    console.log(`${keys === 1 ? 'one key' : '1,000 keys'}: 1 process ${(one / 1e6).toFixed(2)} M calls/s, 4 processes ${(four / 1e6).toFixed(2)} M calls/s (${(four / one).toFixed(2)}x; ${os.availableParallelism()} cores)`)
  }

  // 3. node:cluster, 4 workers: RateLimiterCluster (IPC to the primary) against a zone.
  const rlfUs = await clusterRun('rlf')
  const zoneUs = await clusterRun('zone')
  console.log(`node:cluster, 4 workers, µs per check: RateLimiterCluster ${rlfUs.toFixed(1)}, zone ${zoneUs.toFixed(3)} (${(rlfUs / zoneUs).toFixed(0)}x faster; target >= 100x)`)

  // 4. Resident bytes per key of the zone file at 1M keys, in a fresh process.
  const resident = JSON.parse(execFileSync(process.execPath, [__filename, 'resident'], { encoding: 'utf8', maxBuffer: 1 << 20 }))
  console.log(`1M keys: zone file ${(resident.fileBytes / 1e6).toFixed(0)} MB, resident ${(resident.allocatedBytes / 1e6).toFixed(0)} MB = ${(resident.allocatedBytes / 1e6).toFixed(0)} bytes per key; the process's RSS grew ${(resident.rssGrowth / 1e6).toFixed(0)} MB`)
  console.log(JSON.stringify({ single, scaling, cluster: { rlfUs, zoneUs, ratio: rlfUs / zoneUs }, resident }))
  process.exit(0)
}

if (cluster.isWorker && process.argv[2] === 'cluster-worker') clusterWorker()
else if (process.argv[2] === 'throughput') throughputChild()
else if (process.argv[2] === 'resident') residentChild()
else main()
