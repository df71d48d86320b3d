'use strict'
// `npm run bench:scale`: what a fleet bucket (`share.bucket`) costs the store as the keys grow
// (not run by `npm test`). Three processes (benchmark/scale-worker.js, each its own ioredis
// connection) limit per client address with the docs' recipe (100 per 15 minutes) on one local
// redis-server started here. Each first holds N keys of its own (one consume each), then sends
// light traffic (PER_SECOND consumes a second on keys drawn from those it holds) for 20 s, while
// this process measures, over those 20 s:
//   - Redis busy: the µs Redis spent in every command (INFO commandstats) over the window;
//   - another client's PING every 10 ms: p50, p99 and the longest round trip;
//   - SLOWLOG (threshold 1 ms): every command that ran 1 ms or longer.
// Targets (the fleet bucket's stated costs): busy under 2% for both sizes and about the same, PING p99 <= 2 ms
// and max <= 10 ms, nothing of ours in SLOWLOG. Sizes: 1,000 then 300,000 keys per process
// (SCALE_KEYS=1000,30000 to change them).

const { fork, spawnSync } = require('node:child_process')
const path = require('node:path')
const os = require('node:os')
const Redis = require('ioredis')
const { startRedisServer } = require('../__test__/helpers/redis-server.js')

const SIZES = (process.env.SCALE_KEYS || '1000,300000').split(',').map(Number)
const PROCESSES = 3
const PER_SECOND = Number(process.env.SCALE_PER_SECOND || 100)
const WINDOW_MS = Number(process.env.SCALE_WINDOW_MS || 20_000)
const LEASE_MS = 10_000

const fmt = (x, digits = 0) => x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
const met = (ok) => (ok ? 'met' : 'NOT met')
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Total µs Redis spent in scripts (every store operation is one), and their count, by INFO commandstats. */
async function busy(client) {
  const text = await client.info('commandstats')
  let usec = 0
  let calls = 0
  for (const [, name, n, spent] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    // A script's time includes the commands it runs, which commandstats lists again by name.
    if (!/^(eval|evalsha|fcall|script)(_ro)?(\|.*)?$/.test(name)) continue
    usec += Number(spent)
    calls += Number(n)
  }
  return { usec, calls }
}

function worker(url, name, maxKeys) {
  const child = fork(path.join(__dirname, 'scale-worker.js'), [JSON.stringify({ url, name, maxKeys, leaseMs: LEASE_MS })])
  const waiting = []
  child.on('message', (message) => waiting.shift()?.(message))
  const next = () => new Promise((resolve) => waiting.push(resolve))
  return { child, next, send: (message) => child.send(message) }
}

async function pings(url, stop) {
  const pinger = new Redis(url)
  const times = []
  while (!stop.done) {
    const started = performance.now()
    await pinger.ping()
    times.push(performance.now() - started)
    await sleep(10)
  }
  pinger.disconnect()
  times.sort((a, b) => a - b)
  const at = (q) => times[Math.min(times.length - 1, Math.floor(q * times.length))]
  return { count: times.length, p50: at(0.5), p99: at(0.99), max: times[times.length - 1] }
}

async function size(redis, client, keys, say) {
  const name = `scale-${keys}-${process.pid}`
  const workers = Array.from({ length: PROCESSES }, () => worker(redis.url, name, keys + 1_000))
  await Promise.all(workers.map((w) => w.next()))
  const holdStarted = performance.now()
  workers.forEach((w, i) => w.send({ op: 'hold', from: i * keys, count: keys }))
  const held = await Promise.all(workers.map((w) => w.next()))
  const holdMs = performance.now() - holdStarted
  // Let the first slices' leases and any give-back settle before the window opens.
  await sleep(2_000)
  await client.call('CONFIG', 'SET', 'slowlog-log-slower-than', '1000')
  await client.call('SLOWLOG', 'RESET')
  for (const w of workers) w.send({ op: 'traffic', perSecond: PER_SECOND })
  const before = await busy(client)
  const stop = { done: false }
  const pinged = pings(redis.url, stop)
  await sleep(WINDOW_MS)
  stop.done = true
  const after = await busy(client)
  const ping = await pinged
  const slow = await client.call('SLOWLOG', 'GET', '128')
  workers.forEach((w) => w.send({ op: 'stop' }))
  const stopped = await Promise.all(workers.map((w) => w.next()))
  const busyPct = (100 * (after.usec - before.usec)) / 1000 / WINDOW_MS
  const calls = stopped.reduce((sum, s) => sum + s.calls, 0)
  const errors = stopped.reduce((sum, s) => sum + s.errors, 0)
  const slowOurs = slow.filter((entry) => !/^(slowlog|config|info)$/i.test(String(entry[3]?.[0])))
  if (process.env.SCALE_VERBOSE) for (const entry of slowOurs) console.error(JSON.stringify(entry).slice(0, 300))
  const memory = Number(/used_memory:(\d+)/.exec(await client.info('memory'))[1])
  say(`| ${fmt(keys)} keys a process (${fmt(keys * PROCESSES)} in all) | ${busyPct.toFixed(2)}% | ${fmt((after.calls - before.calls) / (WINDOW_MS / 1000), 0)} | ${ping.p50.toFixed(2)} / ${ping.p99.toFixed(2)} / ${ping.max.toFixed(2)} | ${slowOurs.length} | ${fmt(calls)} (${errors} errors) | ${fmt(holdMs / 1000, 1)} s | ${fmt(memory / 2 ** 20, 0)} MiB |`)
  await client.call('FLUSHALL')
  return { keys, busyPct, ping, slow: slowOurs.length, errors, held }
}

async function main() {
  const redis = await startRedisServer()
  const client = new Redis(redis.url)
  // In production Redis has a core of its own; here it shares two with three workers and this
  // process, so it is given the scheduler's priority (as root; else it runs as it is and the
  // latencies include waiting for a core).
  const pid = typeof redis.pid === 'function' ? redis.pid() : redis.pid
  const reniced = spawnSync('renice', ['-n', '-10', '-p', String(pid)]).status === 0
  // SCALE_PIN=1, on a machine of two or more cores: Redis gets core 0 to itself and this process,
  // its PING client and the workers (which inherit it) the others. Unpinned, a script now and then
  // waits for a core and SLOWLOG counts that wait as the script's time; pinned, the PING client
  // waits for a core behind the workers instead.
  const cores = os.cpus().length
  const pinned =
    process.env.SCALE_PIN === '1' &&
    cores >= 2 &&
    spawnSync('taskset', ['-a', '-cp', '0', String(pid)]).status === 0 &&
    spawnSync('taskset', ['-a', '-cp', `1-${cores - 1}`, String(process.pid)]).status === 0
  const say = (line) => console.log(line)
  try {
    say(`bench:scale on Node ${process.version}, redis-server on 127.0.0.1:${redis.port}; ${PROCESSES} processes, C 100, R 100/900 s, leaseMs ${fmt(LEASE_MS)}, ${PER_SECOND} consumes a second each on keys they hold, measured over ${fmt(WINDOW_MS / 1000)} s; load average ${os.loadavg()[0].toFixed(1)} on ${os.cpus().length} cores; redis-server ${reniced ? 'at nice -10' : 'at normal priority'}${pinned ? ', alone on core 0' : ''}`)
    say('')
    say('| keys held | Redis busy | scripts a second | another client\'s PING p50 / p99 / max (ms) | SLOWLOG >= 1 ms | consumes in the window | time to hold them | Redis memory |')
    say('|---|---:|---:|---:|---:|---:|---:|---:|')
    const results = []
    for (const keys of SIZES) results.push(await size(redis, client, keys, say))
    say('')
    for (const r of results) {
      say(`${fmt(r.keys)} keys: busy < 2% ${met(r.busyPct < 2)}; PING p99 <= 2 ms ${met(r.ping.p99 <= 2)}, max <= 10 ms ${met(r.ping.max <= 10)}; SLOWLOG empty ${met(r.slow === 0)}; no errors ${met(r.errors === 0)}`)
    }
  } finally {
    client.disconnect()
    await redis.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
