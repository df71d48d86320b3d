'use strict'
// `BENCH_CASES=f npm run bench:fleet` (or `node benchmark/fleet-longtail.js` on a built addon):
// the fleet bucket on a long tail of keys, side by side with the peers, as a service limiting
// "100 per 15 minutes per client address" would use each of them (not run by `npm test`):
//   - quota-clock-source: KeyedQuotaClock, capacity 100, refillPerSecond 100 / 900,
//     share: { store: redisStore(client), bucket: true } (the docs' recipe);
//   - express-rate-limit + rate-limit-redis: its RedisStore (windowMs 15 min), driven as the
//     middleware drives it: one `increment` a request, admitted while the hits are at most 100;
//   - rate-limiter-flexible: RateLimiterRedis (points 100, duration 900), one `consume` a request.
// For each library in turn, one fresh redis-server and three child processes
// (benchmark/longtail-worker.js, each its own ioredis connection, calling the library directly):
//   1. the answer, asserted: a fresh address's 101 requests round-robin over the three: the first
//      100 admitted, the 101st denied;
//   2. warm-up: every process sends one request for every address (every key known to every
//      process), then a wait until what it left in the background is done (see settle());
//      Redis's used_memory before and after, over the addresses: memory per key;
//   3. the same seeded arrivals for every library: each address sends a request about every
//      10 s (0.8 to 1.2 × 10 s) to a process drawn at random (60,000 addresses: 6,000 requests a
//      second in all), for LEAD_MS unmeasured, then WINDOW_MS measured, then TAIL_MS more, each
//      call started at its time and not awaited by the next;
//   4. over the measured window: client commands (round trips; counted in each process as its
//      ioredis client sends them, and EVALSHA + EVAL by INFO commandstats), every command Redis
//      ran (INFO commandstats, the scripts' own included), Redis CPU (INFO cpu used_cpu_sys +
//      used_cpu_user), the processes' CPU (process.cpuUsage in each), per request;
//   5. the answers again: every request of the run admitted (no address is near its limit), no
//      error; the peers' counters in Redis equal each address's requests.
// BENCH_QUICK=1: 6,000 addresses and a 10 s window. BENCH_LONGTAIL_ADDRESSES, _PERIOD_MS,
// _WINDOW_MS and BENCH_LONGTAIL_SEED change the traffic (the rate is addresses / period).

const assert = require('node:assert/strict')
const { fork, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Redis = require('ioredis')
const { startRedisServer } = require('../__test__/helpers/redis-server.js')
const { arrivals, address } = require('./longtail-worker.js')

const QUICK = process.env.BENCH_QUICK === '1'
const PROCESSES = 3
const LIMIT = 100
const ADDRESSES = Number(process.env.BENCH_LONGTAIL_ADDRESSES || (QUICK ? 6_000 : 60_000))
const PERIOD_MS = Number(process.env.BENCH_LONGTAIL_PERIOD_MS || 10_000)
const LEAD_MS = QUICK ? 3_000 : 5_000
const WINDOW_MS = Number(process.env.BENCH_LONGTAIL_WINDOW_MS || (QUICK ? 10_000 : 20_000))
const TAIL_MS = 1_000
const SEED = Number(process.env.BENCH_LONGTAIL_SEED || 44)
const FRESH = '203.0.113.7' // the address of the asserted burst, outside the traffic's range
const WARM_REQUESTS = PROCESSES // each process's warm-up request for every address
const SETTLE_MIN_MS = 6_000 // ours: idle slices go back after leaseMs / 2 (5 s by default)
const SETTLE_MAX_MS = 120_000

const LIBRARIES = [
  { id: 'ours', label: 'quota-clock-source, share.bucket', pkg: 'quota-clock-source', ours: true },
  // Only when named in BENCH_LONGTAIL_LIBRARIES: ours with a call per take (the store given the client as a cluster's, which batches nothing).
  { id: 'ours-single', label: 'quota-clock-source, share.bucket, a call per take', pkg: 'quota-clock-source', ours: true, named: true },
  { id: 'express-rate-limit', label: 'express-rate-limit + rate-limit-redis', pkg: 'rate-limit-redis', also: 'express-rate-limit', key: (ip) => `rl:${ip}` },
  { id: 'rate-limiter-flexible', label: 'rate-limiter-flexible RateLimiterRedis', pkg: 'rate-limiter-flexible', key: (ip) => `rlflx:${ip}` },
]

const fmt = (x, digits = 0) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
const met = (ok) => (ok ? 'met' : 'NOT met')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const nowMs = () => Number(process.hrtime.bigint()) / 1e6
const SCRIPT = /^(eval|evalsha|eval_ro|evalsha_ro|fcall|fcall_ro)$/

/** The installed version of a package (found from its entry point: some export no package.json). */
function versionOf(name) {
  if (name === 'quota-clock-source') return require('../package.json').version
  for (let dir = path.dirname(require.resolve(name)); dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json')
    if (fs.existsSync(file)) {
      const json = JSON.parse(fs.readFileSync(file, 'utf8'))
      if (json.name === name) return json.version
    }
  }
  return '?'
}

/** Redis's counters now: calls and µs by command (INFO commandstats, without INFO), CPU s, used_memory. */
async function redisCounters(client) {
  const [stats, cpu, memory] = await Promise.all([client.info('commandstats'), client.info('cpu'), client.info('memory')])
  const calls = {}
  let scriptUsec = 0
  for (const [, name, n, usec] of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (name === 'info') continue
    calls[name] = Number(n)
    if (SCRIPT.test(name)) scriptUsec += Number(usec)
  }
  const field = (text, name) => Number(new RegExp(`^${name}:([\\d.]+)\\r?$`, 'm').exec(text)[1])
  return { calls, scriptUsec, cpuS: field(cpu, 'used_cpu_sys') + field(cpu, 'used_cpu_user'), usedMemory: field(memory, 'used_memory') }
}

function delta(before, after) {
  const out = {}
  for (const [name, n] of Object.entries(after)) if (n - (before[name] ?? 0) > 0) out[name] = n - (before[name] ?? 0)
  return out
}
const sum = (counts) => Object.values(counts).reduce((a, n) => a + n, 0)

function worker(config) {
  const child = fork(path.join(__dirname, 'longtail-worker.js'), [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const waiting = []
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.on('message', (message) => waiting.shift()?.resolve(message))
  child.once('exit', (code) => {
    for (const w of waiting.splice(0)) w.reject(new Error(`the ${config.library} worker ${config.index} exited (${code})`))
  })
  const next = () => new Promise((resolve, reject) => waiting.push({ resolve, reject }))
  return {
    ready: next(),
    async ask(message) {
      const answer = next()
      child.send(message)
      return answer
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    },
  }
}

/**
 * After the warm-up, until what it leaves in the background is done: at least SETTLE_MIN_MS, and
 * then until the processes' store calls (ours: stats().store.calls; the peers make none) stand
 * still for a second. The warm-up asks every address from three processes within seconds, so
 * ours takes slices of busy keys there and gives them back once they idle (leaseMs / 2), which
 * the traffic (an address every 8 to 12 s) never does. -> ms waited (past the cap: negative)
 */
async function settle(library, workers) {
  const started = nowMs()
  let last
  for (;;) {
    await sleep(1_000)
    const calls = library.ours ? (await Promise.all(workers.map((w) => w.ask({ op: 'stats' })))).reduce((a, s) => a + s.store.calls, 0) : 0
    const waited = nowMs() - started
    if (waited >= SETTLE_MIN_MS && calls === last) return waited
    if (waited > SETTLE_MAX_MS) return -waited
    last = calls
  }
}

/** One library's run on a fresh redis-server. */
async function runLibrary(library, schedule, say) {
  const redis = await startRedisServer()
  // Redis gets the scheduler's priority (as root; else it runs as it is): on a shared machine a
  // Redis left waiting for a core lets the calls pile up past the clients' timeouts.
  const reniced = spawnSync('renice', ['-n', '-10', '-p', String(redis.pid)]).status === 0
  const client = new Redis(redis.url, { lazyConnect: true })
  await client.connect()
  const workers = []
  try {
    const marksMs = [LEAD_MS, LEAD_MS + WINDOW_MS]
    const base = { url: redis.url, library: library.id, processes: PROCESSES, seed: SEED, addresses: ADDRESSES, periodMs: PERIOD_MS, durationMs: LEAD_MS + WINDOW_MS + TAIL_MS, marksMs }
    for (let index = 0; index < PROCESSES; index++) workers.push(worker({ ...base, index }))
    await Promise.all(workers.map((w) => w.ready))

    // 1. The answer: the limits are the same ("100, then denied") for all three, across processes.
    const burst = []
    for (let i = 0; i <= LIMIT; i++) burst.push(await workers[i % PROCESSES].ask({ op: 'one', key: FRESH }))
    const errors = burst.filter((b) => b.error)
    assert.deepEqual(errors, [], `${library.label}: the burst's calls failed`)
    const admitted = burst.filter((b) => b.admitted).length
    assert.ok(
      burst.slice(0, LIMIT).every((b) => b.admitted) && !burst[LIMIT].admitted,
      `${library.label}: a fresh address's ${LIMIT + 1} requests round-robin: ${admitted} admitted, the last ${burst[LIMIT].admitted ? 'admitted' : 'denied'} (expected the first ${LIMIT} admitted, the last denied)`,
    )

    // 2. Warm-up: every address known to every process; memory per key.
    const memoryBefore = (await redisCounters(client)).usedMemory
    const warmStarted = nowMs()
    const warmed = await Promise.all(workers.map((w) => w.ask({ op: 'warm' })))
    const warmMs = nowMs() - warmStarted
    for (const w of warmed) {
      assert.equal(w.counts.errors, 0, `${library.label}: warm-up errors, the first: ${w.counts.firstError}`)
      assert.equal(w.counts.admitted, ADDRESSES, `${library.label}: warm-up admitted ${w.counts.admitted} of ${ADDRESSES}, the first denied ${JSON.stringify(w.counts.firstDenied)}`)
    }
    const settled = await settle(library, workers)
    say(`  ${library.label}: the burst of ${LIMIT + 1} answered right; warm-up ${fmt(warmMs / 1000, 1)} s (${fmt(ADDRESSES * PROCESSES)} requests, all admitted), settled ${settled < 0 ? `NOT within ${fmt(-settled / 1000, 1)} s` : `after ${fmt(settled / 1000, 1)} s`}`)
    const memoryAfter = (await redisCounters(client)).usedMemory

    // 3. The traffic; 4. Redis's counters at the window's edges, on the same clock as the workers'.
    const startNs = process.hrtime.bigint() + 1_000_000_000n
    const start = Number(startNs) / 1e6
    const ran = Promise.all(workers.map((w) => w.ask({ op: 'run', startNs: String(startNs) })))
    const edges = []
    for (const markMs of marksMs) {
      await sleep(Math.max(0, start + markMs - nowMs()))
      edges.push({ atMs: nowMs() - start, ...(await redisCounters(client)) })
    }
    const results = await ran
    const late = Math.max(...results.map((r) => r.lag.maxMs))
    if (late > 1_000 || results.some((r) => r.counts.errors > 0)) {
      say(`  ${library.label}: the run fell behind or failed: calls started up to ${fmt(late)} ms late; ${results.map((r) => `${fmt(r.counts.errors)} errors of ${fmt(r.counts.calls)}`).join(', ')}`)
    }
    const memoryEnd = (await redisCounters(client)).usedMemory
    const store = library.ours ? (await Promise.all(workers.map((w) => w.ask({ op: 'stats' })))).map((s) => s.store) : []

    // 5. The answers of the run.
    const calls = results.reduce((a, r) => a + r.counts.calls, 0)
    assert.equal(calls, schedule.at.length, `${library.label}: ${calls} calls made of ${schedule.at.length} arrivals`)
    const overload = 'a store call timed out: this machine could not keep up with the rate (a quieter machine, or fewer BENCH_LONGTAIL_ADDRESSES)'
    for (const r of results) assert.equal(r.counts.errors, 0, `${library.label}: errors in the run, the first: ${r.counts.firstError}${/ERR_STORE_UNAVAILABLE|timeoutMs/.test(r.counts.firstError) ? `\n${overload}` : ''}`)
    const runAdmitted = results.reduce((a, r) => a + r.counts.admitted, 0)
    const denied = results.map((r, i) => `process ${i}: ${r.counts.denied} denied, the first ${JSON.stringify(r.counts.firstDenied)}`).join('\n')
    assert.equal(runAdmitted, calls, `${library.label}: admitted ${runAdmitted} of ${calls} requests, every address under its limit\n${denied}`)
    if (library.key) {
      const expected = new Int32Array(ADDRESSES).fill(WARM_REQUESTS)
      for (const a of schedule.who) expected[a]++
      const stored = []
      for (let a = 0; a < ADDRESSES; a += 5_000) {
        const pipeline = client.pipeline()
        for (let b = a; b < Math.min(a + 5_000, ADDRESSES); b++) pipeline.get(library.key(address(b)))
        for (const [error, value] of await pipeline.exec()) stored.push(error ? NaN : Number(value))
      }
      const wrong = stored.findIndex((n, a) => n !== expected[a])
      assert.equal(wrong, -1, `${library.label}: ${address(wrong)} counted ${stored[wrong]} in Redis, sent ${expected[wrong]}`)
    }
    for (const s of store) assert.equal(s.errors + s.timeouts, 0, `${library.label}: store errors or timeouts ${JSON.stringify(s)}`)

    // The requests the processes started in the window (those scheduled in it, when none starts late).
    const requests = results.reduce((a, r) => a + r.marks[1].issued - r.marks[0].issued, 0)
    const sent = {}
    for (const r of results) {
      for (const [name, n] of Object.entries(delta(r.marks[0].sent, r.marks[1].sent))) sent[name.toLowerCase()] = (sent[name.toLowerCase()] ?? 0) + n
    }
    const cpuUs = results.reduce((a, r) => a + (r.marks[1].cpu.user - r.marks[0].cpu.user) + (r.marks[1].cpu.system - r.marks[0].cpu.system), 0)
    const commands = delta(edges[0].calls, edges[1].calls)
    const scripts = Object.entries(commands).filter(([name]) => SCRIPT.test(name)).reduce((a, [, n]) => a + n, 0)
    return {
      library,
      requests,
      scheduled: schedule.at.filter((t) => t >= marksMs[0] && t < marksMs[1]).length,
      warmMs,
      settled,
      reniced,
      roundTrips: sum(sent) / requests,
      sent,
      scriptsPerRequest: scripts / requests,
      // Keys a script call named, on average over the window and at most in the run (a batch of takes: its size).
      keysPerScript: results.reduce((a, r) => a + r.marks[1].scripted.keys - r.marks[0].scripted.keys, 0) / Math.max(1, results.reduce((a, r) => a + r.marks[1].scripted.calls - r.marks[0].scripted.calls, 0)),
      mostKeys: Math.max(...results.map((r) => r.marks[1].scripted.most)),
      commandsPerRequest: sum(commands) / requests,
      commands,
      redisCpuUs: ((edges[1].cpuS - edges[0].cpuS) * 1e6) / requests,
      scriptUs: (edges[1].scriptUsec - edges[0].scriptUsec) / requests,
      processCpuUs: cpuUs / requests,
      memoryPerKey: (memoryAfter - memoryBefore) / ADDRESSES,
      memoryEndPerKey: (memoryEnd - memoryBefore) / ADDRESSES,
      lagMaxMs: Math.max(...results.map((r) => r.lag.maxMs)),
      lagMeanMs: results.reduce((a, r) => a + r.lag.meanMs, 0) / results.length,
      markSkewMs: Math.max(...results.flatMap((r) => r.marks.map((m, k) => Math.abs(m.atMs - edges[k].atMs)))),
      latency: { p50: Math.max(...results.map((r) => r.latency.p50)), p99: Math.max(...results.map((r) => r.latency.p99)) },
      loop: { p99: Math.max(...results.map((r) => r.loop.p99)), max: Math.max(...results.map((r) => r.loop.max)) },
      store,
    }
  } finally {
    await Promise.all(workers.map((w) => w.kill()))
    client.disconnect()
    await redis.stop()
  }
}

/** The long-tail case: every library in turn, then the tables. */
async function longTail(say = (line) => console.log(line)) {
  const schedule = arrivals({ seed: SEED, addresses: ADDRESSES, periodMs: PERIOD_MS, durationMs: LEAD_MS + WINDOW_MS + TAIL_MS, processes: PROCESSES })
  const rate = (ADDRESSES / PERIOD_MS) * 1000
  say('')
  say(`(f) a long tail: ${fmt(ADDRESSES)} client addresses, each a request about every ${fmt(PERIOD_MS / 1000, 0)} s to one of ${PROCESSES} processes (drawn at random; ${fmt(rate)} requests/s in all, seed ${SEED}), "100 per 15 minutes per address"; after a warm-up request for every address from every process (and what it left in the background settled), ${fmt(LEAD_MS / 1000)} s unmeasured, then ${fmt(WINDOW_MS / 1000)} s measured; a fresh redis-server a library`)
  const results = []
  // BENCH_LONGTAIL_LIBRARIES=ours,rate-limiter-flexible runs only those (the ratios need a peer).
  const only = new Set((process.env.BENCH_LONGTAIL_LIBRARIES || LIBRARIES.filter((l) => !l.named).map((l) => l.id).join(',')).split(','))
  for (const library of LIBRARIES.filter((l) => only.has(l.id))) {
    const load = os.loadavg()[0]
    const result = await runLibrary(library, schedule, say)
    result.load = [load, os.loadavg()[0]]
    results.push(result)
    const versions = [library.pkg, library.also].filter(Boolean).map((name) => `${name} ${versionOf(name)}`).join(', ')
    say(`  ${library.label} (${versions}): ${fmt(result.requests)} requests measured (${fmt(result.scheduled)} scheduled in the window); calls started late by ${fmt(result.lagMeanMs, 1)} ms on average, ${fmt(result.lagMaxMs)} ms at most; marks within ${fmt(result.markSkewMs)} ms of Redis's readings${result.markSkewMs > 500 ? ' (a process\'s loop was held up: its figures and Redis\'s cover different stretches of time, not to be compared)' : ''}; redis-server ${result.reniced ? 'at nice -10' : 'at normal priority'}; load average ${result.load.map((x) => x.toFixed(1)).join(' -> ')}`)
  }
  const peers = results.filter((r) => !r.library.ours)
  const ours = results.find((r) => r.library.id === 'ours')
  const metrics = [
    ['store round trips / request', (r) => r.roundTrips, 2],
    ['Redis commands / request', (r) => r.commandsPerRequest, 2],
    ['Redis CPU µs / request', (r) => r.redisCpuUs, 1],
    ['Redis time in scripts µs / request (commandstats)', (r) => r.scriptUs, 1],
    ['processes\' CPU µs / request', (r) => r.processCpuUs, 0],
    ['Redis memory B / key', (r) => r.memoryPerKey, 0],
  ]
  say('')
  say(`| library | ${metrics.map(([name]) => name).join(' | ')} | latency p50 / p99 ms | event-loop delay p99 / max ms |`)
  say(`|---|${metrics.map(() => '---:').join('|')}|---:|---:|`)
  for (const r of results) say(`| ${r.library.label} | ${metrics.map(([, get, digits]) => fmt(get(r), digits)).join(' | ')} | ${fmt(r.latency.p50, 2)} / ${fmt(r.latency.p99, 2)} | ${fmt(r.loop.p99, 1)} / ${fmt(r.loop.max, 1)} |`)
  const best = (get) => Math.min(...peers.map(get))
  if (peers.length > 0) {
    say('')
    say(`| × the best peer | ${metrics.map(([name]) => name).join(' | ')} |`)
    say(`|---|${metrics.map(() => '---:').join('|')}|`)
    for (const r of results) say(`| ${r.library.label} | ${metrics.map(([, get]) => `${(get(r) / best(get)).toFixed(2)}×`).join(' | ')} |`)
  }
  say('')
  for (const r of results) {
    const perRequest = (counts) => Object.entries(counts).sort((a, b) => b[1] - a[1]).map(([name, n]) => `${name} ${(n / r.requests).toFixed(3)}`).join(', ')
    say(`  ${r.library.label}: sent by the clients, a request: ${perRequest(r.sent)} (EVALSHA + EVAL by commandstats ${r.scriptsPerRequest.toFixed(3)}: ${(1 / r.scriptsPerRequest).toFixed(2)} requests a script call, naming ${r.keysPerScript.toFixed(2)} keys on average, ${r.mostKeys} at most); run by Redis, a request: ${perRequest(r.commands)}; Redis memory per key after the run ${fmt(r.memoryEndPerKey)} B`)
  }
  if (ours === undefined) return results
  say('')
  if (peers.length > 0) say(`at most one store round trip a request: ${ours.roundTrips.toFixed(2)} (${met(ours.roundTrips <= 1.0005)}); Redis CPU a request at most the best peer's: ${ours.redisCpuUs.toFixed(1)} µs against ${best((r) => r.redisCpuUs).toFixed(1)} (${met(ours.redisCpuUs <= best((r) => r.redisCpuUs))}); Redis memory per key within 1.5× the best peer's: ${fmt(ours.memoryPerKey)} B against ${fmt(best((r) => r.memoryPerKey))} (${met(ours.memoryPerKey <= 1.5 * best((r) => r.memoryPerKey))})`)
  for (const [i, s] of ours.store.entries()) say(`  ${ours.library.label}, process ${i}: stats().store ${JSON.stringify(s)}`)
  return results
}

module.exports = { longTail }

if (require.main === module) {
  console.log(`bench:fleet long tail on Node ${process.version}; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores`)
  longTail().catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
}
