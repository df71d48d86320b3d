'use strict'
// A fleet bucket (`share.bucket`) holding many keys on a healthy redis-server: the store is never
// reported unavailable because of this package's own background work, and that work never holds
// the store up. One limiter takes a slice of 40,000 keys (two consumes each, so each keeps
// unspent tokens), then goes idle: the give-backs of all of them start together. While they run,
// the first consumes of new keys must all be decided (none ERR_STORE_UNAVAILABLE, at the default
// timeoutMs of 300 ms), each background store operation is one short script on one key, and
// another client's PING never waits behind a queue of them. The latencies are judged against a
// baseline taken in the same run, so that a loaded machine's scheduler (which stops Redis in the
// middle of any script) is not taken for ours: a trivial script another client runs alongside
// (none of ours in Redis's SLOWLOG past 10 ms or twice the trivial one's worst plus 5 ms; at most
// a few in a thousand at 1 ms, or as many as the trivial one's share), and the PINGs before the
// give-backs start (PING's p99 while they run under 50 ms or three times that baseline).

const { after, before, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { startRedisServer } = require('./helpers/redis-server.js')
const { KeyedQuotaClock } = require('..')
const { redisStore } = require('../lib/shared.js')

// The baseline: a script that does next to nothing, run by another client alongside ours.
const TRIVIAL = "return redis.call('TIME')"
const TRIVIAL_BATCH = 50
const KEYS = 40_000
const BATCH = 500

let redis
let client
let admin

before(async () => {
  redis = await startRedisServer()
  client = new Redis(redis.url, { maxRetriesPerRequest: null })
  admin = new Redis(redis.url)
})

after(async () => {
  client?.disconnect()
  admin?.disconnect()
  await redis?.stop()
})

/** Commands of our scripts Redis ran (EVALSHA and EVAL), by INFO commandstats. */
async function scriptCalls() {
  const text = await admin.info('commandstats')
  let calls = 0
  for (const [, name, n] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (/^(eval|evalsha)$/.test(name)) calls += Number(n)
  return calls
}

test('many keys given back at once: new keys are still decided, and no store operation holds Redis up', { timeout: 240_000 }, async () => {
  const limiter = new KeyedQuotaClock({
    capacity: 10,
    refillPerSecond: 1,
    suspendPolicy: 'ignore',
    maxKeys: KEYS * 2,
    share: { store: redisStore(client, { prefix: 'scale:' }), name: 'many', bucket: true, leaseMs: 1_000, timeoutMs: 10_000 },
  })
  // Two consumes a key: the second takes a fair share, so every key keeps unspent tokens.
  for (let i = 0; i < KEYS; i += BATCH) {
    const batch = []
    for (let j = i; j < Math.min(KEYS, i + BATCH); j++) batch.push(limiter.consume(`ip:${j}`).then(() => limiter.consume(`ip:${j}`)))
    await Promise.all(batch)
  }
  assert.ok(limiter.status(`ip:${KEYS - 1}`).tokens > 0, 'a key keeps unspent tokens')
  await admin.call('CONFIG', 'SET', 'slowlog-log-slower-than', '1000')
  await admin.call('SLOWLOG', 'RESET')
  const callsBefore = await scriptCalls()
  const fresh = new KeyedQuotaClock({
    capacity: 10,
    refillPerSecond: 1,
    suspendPolicy: 'ignore',
    share: { store: redisStore(client, { prefix: 'scale:' }), name: 'many', bucket: true, leaseMs: 1_000 }, // timeoutMs: the default 300
  })
  // Past min(idleMs, leaseMs / 2) = 500 ms every key is idle: their give-backs run meanwhile.
  const idleFrom = performance.now() + 600
  const outcomes = []
  const pings = []
  const pingsBefore = []
  let trivialRuns = 0
  let k = 0
  while (performance.now() < idleFrom + 4_000) {
    const started = performance.now()
    await admin.ping()
    ;(started < idleFrom - 100 ? pingsBefore : pings).push(performance.now() - started)
    // (As many trivial scripts as the give-backs run, about: a scheduler that stops Redis now and
    // then stops it as often in one as in the other.)
    const pipeline = admin.pipeline()
    for (let i = 0; i < TRIVIAL_BATCH; i++) pipeline.eval(TRIVIAL, 0)
    await pipeline.exec()
    trivialRuns += TRIVIAL_BATCH
    if (performance.now() > idleFrom) {
      outcomes.push(await fresh.consume(`new:${k++}`).then((d) => (d.allowed ? 'A' : 'D'), (error) => error.code))
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  // The give-backs went on while the new keys were decided.
  const given = (await scriptCalls()) - callsBefore
  assert.ok(given > 1_000, `the give-backs ran meanwhile (${given} scripts)`)
  assert.ok(outcomes.length > 100, `${outcomes.length} first consumes`)
  assert.deepEqual(outcomes.filter((o) => o !== 'A'), [], 'every first consume of a new key on a healthy store is admitted')
  const slow = await admin.call('SLOWLOG', 'GET', '100000')
  const scripts = slow.filter((entry) => /^eval/i.test(String(entry[3]?.[0])))
  const trivial = scripts.filter((entry) => String(entry[3]?.[1]) === TRIVIAL)
  const ours = scripts.filter((entry) => String(entry[3]?.[1]) !== TRIVIAL)
  const trivialWorstUs = Math.max(0, ...trivial.map((entry) => entry[2]))
  const limitUs = Math.max(10_000, 2 * trivialWorstUs + 5_000)
  assert.deepEqual(ours.filter((entry) => entry[2] >= limitUs), [], `no script of ours ran ${limitUs / 1000} ms (the trivial script's worst: ${trivialWorstUs / 1000} ms)`)
  const allowed = Math.max(3, given / 200, ((trivial.length + 1) / trivialRuns) * given * 2)
  assert.ok(ours.length <= allowed, `${ours.length} of ${given} scripts ran 1 ms or more (the trivial script: ${trivial.length} of ${trivialRuns})`)
  const p99Of = (times) => [...times].sort((a, b) => a - b)[Math.floor(times.length * 0.99)]
  const p99 = p99Of(pings)
  const before = p99Of(pingsBefore)
  assert.ok(p99 < Math.max(50, 3 * before), `another client's PING p99 ${p99.toFixed(1)} ms while the give-backs ran (${before.toFixed(1)} ms before them)`)
  await fresh.close()
  await limiter.close()
  assert.equal(limiter.stats().store.errors, 0)
})
