'use strict'

// The fleet bucket's takes on a Redis store that is not a cluster's: takes for different keys
// asked in one event-loop turn go to Redis as one script call, and each take keeps its own answer
// (the one a lone take would get), its own deadline and its own errors; the round trip is counted
// once in the process and once in each limiter with a take in it, as the server counts it.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient } = require('redis')
const { redisStore } = require('quota-clock-source/shared')
const { storeOperations } = require('../lib/share/protocol.js')
const { sendStoreCall, storeCallWithin, roundTripsSent } = require('../lib/share/store-call.js')
const { startRedisServer } = require('./helpers/redis-server.js')
const { scriptCalls } = require('./helpers/server-counts.js')

let unique = 0
const freshName = () => `batch-${process.pid}-${++unique}`
const part = (text) => `${Buffer.byteLength(text)}:${text}`
const redisKey = (name, key) => `qcs:{${part(name)}:${part(key)}}:b`
const KEYS = Array.from({ length: 24 }, (_, at) => `client-${at}`)

/** A bucketTake request for `key` (capacity 10, 2 tokens a second), with `fields`. */
function takeOf(name, key, fields) {
  return { name, key, capacity: 10, refillPerSecond: 2, instance: 'A', leaseMs: 10_000, want: 1, more: 0, held: 0, give: 0, charge: 0, fleetMs: -1, recordId: 0, ...fields }
}

/** The first round's take for the key at `at`: wants, fair shares, takes spent at once (the fast path), a denial. */
function firstTake(name, key, at) {
  return takeOf(name, key, { want: at % 12, more: at % 3, spend: at % 2 === 0, newId: 5_000 + at, most: at % 5 === 0 ? 4 : 0 })
}

/** The second round's, after `previous`: the fleet clock frozen (no refill), the slice kept or given back, more asked. */
function secondTake(name, key, at, previous) {
  const held = at % 4 === 0 ? previous.held : 0
  return takeOf(name, key, { want: at % 7, more: (at + 1) % 3, held, give: previous.held - held, fleetMs: previous.fleetMs, recordId: previous.recordId, spend: at % 5 === 1, newId: 9_000 + at })
}

/** An answer without the store's time (the one field two takes made apart cannot share). */
const exact = ({ storeNowMs: _storeNowMs, ...answer }) => answer

/** Server counts of EVALSHA and EVAL since the last `CONFIG RESETSTAT`. */
async function commandCalls(admin) {
  const info = await admin.info('commandstats')
  const calls = (command) => Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0)
  return { evalsha: calls('evalsha'), eval: calls('eval') }
}

describe('takes for many keys in one turn are one script call on a Redis that is not a cluster', () => {
  let server
  let client
  let admin
  let ops
  before(async () => {
    server = await startRedisServer()
    client = new Redis({ host: server.host, port: server.port })
    admin = new Redis({ host: server.host, port: server.port })
    ops = storeOperations(redisStore(client))
    // Both scripts loaded (a batch and a lone take), so that a call below is one EVALSHA.
    await Promise.all([ops.bucketTake(takeOf(freshName(), 'warm-a')), ops.bucketTake(takeOf(freshName(), 'warm-b'))])
    await ops.bucketTake(takeOf(freshName(), 'warm-c'))
  })
  after(async () => {
    await Promise.allSettled([client?.quit(), admin?.quit()])
    await server?.stop()
  })

  test('each key gets exactly the answer a lone take gets, over one EVALSHA a turn, counted once', async () => {
    const batched = freshName()
    const alone = freshName()
    const counter = { calls: 0 }
    const sentBefore = roundTripsSent()
    await admin.config('RESETSTAT')
    const first = await Promise.all(KEYS.map((key, at) => sendStoreCall((roundTrip) => ops.bucketTake(firstTake(batched, key, at), roundTrip), counter)))
    assert.deepEqual(await commandCalls(admin), { evalsha: 1, eval: 0 })
    assert.equal(counter.calls, 1)
    assert.equal(roundTripsSent() - sentBefore, 1)
    const firstAlone = []
    for (const [at, key] of KEYS.entries()) firstAlone.push(await ops.bucketTake(firstTake(alone, key, at)))
    assert.deepEqual(first.map(exact), firstAlone.map(exact))
    // (Some granted, some denied, some on the fast path, some holding a slice: the cases differ.)
    assert.ok(first.some((answer) => answer.granted === 0) && first.some((answer) => answer.held > 0))

    await admin.config('RESETSTAT')
    const second = await Promise.all(KEYS.map((key, at) => sendStoreCall((roundTrip) => ops.bucketTake(secondTake(batched, key, at, first[at]), roundTrip), counter)))
    assert.deepEqual(await commandCalls(admin), { evalsha: 1, eval: 0 })
    assert.equal(counter.calls, 2)
    const secondAlone = []
    for (const [at, key] of KEYS.entries()) secondAlone.push(await ops.bucketTake(secondTake(alone, key, at, firstAlone[at])))
    assert.deepEqual(second.map(exact), secondAlone.map(exact))
    // The records themselves are the same bytes but for the store's time (S, bytes 28 to 35).
    for (const key of KEYS) {
      const [a, b] = await Promise.all([client.getBuffer(redisKey(batched, key)), client.getBuffer(redisKey(alone, key))])
      assert.deepEqual(Buffer.concat([a.subarray(0, 28), a.subarray(36)]), Buffer.concat([b.subarray(0, 28), b.subarray(36)]), key)
    }
  })

  test('a second take for a key in the same turn rides in the next call; 24 keys at most in one', async () => {
    const name = freshName()
    const keys = Array.from({ length: 30 }, (_, at) => `k${at}`)
    await admin.config('RESETSTAT')
    const answers = await Promise.all([...keys, 'k0', 'k24'].map((key) => ops.bucketTake(takeOf(name, key, { want: 6 }))))
    // 24 keys, then k24 to k29 and k0 again, then k24 again: three calls, in the order asked.
    assert.deepEqual(await commandCalls(admin), { evalsha: 3, eval: 0 })
    assert.deepEqual(
      answers.map((answer) => answer.granted),
      [...keys.map(() => 6), 0, 0],
    )
    assert.deepEqual(answers.slice(-2).map((answer) => answer.tokens), [4, 4])
  })

  test("a blocked key's take in a batch answers its block, on either path, and the others none, in the one call", async () => {
    const name = freshName()
    await ops.blockSet({ name, key: 'blocked-fast', forMs: 60_000, resetAfterMs: 86_400_000 })
    await ops.blockSet({ name, key: 'blocked-full', forMs: 60_000, resetAfterMs: 86_400_000 })
    await admin.config('RESETSTAT')
    const [fast, full, free] = await Promise.all([
      ops.bucketTake(takeOf(name, 'blocked-fast', { spend: true })),
      ops.bucketTake(takeOf(name, 'blocked-full', { more: 1 })),
      ops.bucketTake(takeOf(name, 'free', { more: 1 })),
    ])
    assert.deepEqual(await commandCalls(admin), { evalsha: 1, eval: 0 })
    for (const [what, answer] of [['fast', fast], ['full', full]]) assert.ok(answer.blockedMs > 58_000 && answer.blockedMs <= 60_000, `${what}: ${answer.blockedMs}`)
    assert.equal(free.blockedMs, undefined)
    assert.deepEqual([fast.granted, full.granted >= 1, free.granted >= 1], [1, true, true], 'each take took as it would have')
  })

  test('a take with a short deadline in a batch times out alone; the others are answered', async () => {
    const name = freshName()
    const counters = [{ calls: 0 }, { calls: 0 }]
    await admin.config('RESETSTAT')
    // Redis stops answering for 400 ms: the batch's answer comes after the first take's 50 ms.
    await admin.call('CLIENT', 'PAUSE', '400', 'ALL')
    const late = Symbol('late')
    const outcomes = await Promise.all([
      storeCallWithin((roundTrip) => ops.bucketTake(takeOf(name, 'short', { want: 2 }), roundTrip), counters[0], 50, () => late),
      storeCallWithin((roundTrip) => ops.bucketTake(takeOf(name, 'long', { want: 3 }), roundTrip), counters[1], 10_000, () => late),
      storeCallWithin((roundTrip) => ops.bucketTake(takeOf(name, 'long-too', { want: 4 }), roundTrip), counters[1], 10_000, () => late),
    ])
    assert.equal(outcomes[0], late)
    assert.deepEqual(
      outcomes.slice(1).map((answer) => [answer.granted, answer.tokens]),
      [
        [3, 7],
        [4, 6],
      ],
    )
    // One EVALSHA, counted once by each limiter's counter with a take in it.
    assert.deepEqual(await commandCalls(admin), { evalsha: 1, eval: 0 })
    assert.deepEqual(
      counters.map((counter) => counter.calls),
      [1, 1],
    )
  })

  test('a batch where a record is corrupt repairs that one and answers the others', async () => {
    const name = freshName()
    await client.set(redisKey(name, 'k3'), 'not a record')
    await client.hset(redisKey(name, 'k5'), 'C', '10')
    const keys = Array.from({ length: 8 }, (_, at) => `k${at}`)
    await admin.config('RESETSTAT')
    const answers = await Promise.all(keys.map((key) => ops.bucketTake(takeOf(name, key, { want: 2, newId: 77 }))))
    assert.deepEqual(await commandCalls(admin), { evalsha: 1, eval: 0 })
    assert.deepEqual(
      answers.map((answer) => [answer.granted, answer.repaired]),
      keys.map((key) => (key === 'k3' || key === 'k5' ? [0, true] : [2, false])),
    )
    assert.equal(await client.type(redisKey(name, 'k5')), 'string')
  })

  test('a cluster client (ioredis or iovalkey Cluster, node-redis cluster) keeps one call per take', async () => {
    // Both clients here talk to the one server; only what marks them as a cluster's differs.
    const ioredisCluster = new Proxy(client, { get: (target, property) => (property === 'isCluster' ? true : Reflect.get(target, property)) })
    const nodeRedis = createClient({ url: `redis://${server.host}:${server.port}` })
    await nodeRedis.connect()
    try {
      const nodeRedisCluster = { masters: [], sendCommand: (key, readOnly, args) => nodeRedis.sendCommand(args) }
      for (const cluster of [ioredisCluster, nodeRedisCluster]) {
        const clustered = storeOperations(redisStore(cluster))
        const name = freshName()
        await admin.config('RESETSTAT')
        const answers = await Promise.all(['a', 'b', 'c'].map((key) => clustered.bucketTake(takeOf(name, key, { want: 2 }))))
        assert.deepEqual(
          answers.map((answer) => answer.granted),
          [2, 2, 2],
        )
        assert.deepEqual(await commandCalls(admin), { evalsha: 3, eval: 0 })
      }
      // The same client, not marked: one call.
      const plain = storeOperations(redisStore(nodeRedis))
      await admin.config('RESETSTAT')
      await Promise.all(['a', 'b', 'c'].map((key) => plain.bucketTake(takeOf(freshName(), key))))
      assert.deepEqual(await commandCalls(admin), { evalsha: 1, eval: 0 })
    } finally {
      await nodeRedis.quit()
    }
  })

  test('NOSCRIPT: the batch is sent once more as EVAL, counted as a second round trip; a failed call fails each take', async () => {
    const name = freshName()
    const counter = { calls: 0 }
    await admin.script('FLUSH')
    await admin.config('RESETSTAT')
    const answers = await Promise.all(['a', 'b', 'c'].map((key) => sendStoreCall((roundTrip) => ops.bucketTake(takeOf(name, key), roundTrip), counter)))
    assert.deepEqual(
      answers.map((answer) => answer.granted),
      [1, 1, 1],
    )
    assert.equal(counter.calls, 2)
    assert.equal(counter.calls, await scriptCalls(admin))
    // A client that fails the call: each take rejects with its error.
    const failing = storeOperations(redisStore(new Proxy(client, { get: (target, property) => (property === 'call' ? async () => Promise.reject(new Error('connection lost')) : Reflect.get(target, property)) })))
    const settled = await Promise.allSettled(['a', 'b'].map((key) => failing.bucketTake(takeOf(name, key))))
    assert.deepEqual(
      settled.map((outcome) => [outcome.status, outcome.reason?.message]),
      [
        ['rejected', 'connection lost'],
        ['rejected', 'connection lost'],
      ],
    )
  })
})
