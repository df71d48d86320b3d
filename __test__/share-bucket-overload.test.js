'use strict'
// The fleet bucket (`share.bucket`) on a process too busy for its traffic: its event loop held
// past timeoutMs and leaseMs while its store calls are under way, calls of one key made together,
// a take answered after the lease it would be spent under has lapsed, a second round that does not
// come back within the call's time. Whatever the process does, a call is denied only when the
// fleet's bucket lacks its tokens; otherwise it is admitted, or refused with ERR_STORE_UNAVAILABLE
// when no store answer it could spend came within timeoutMs. (The long-tail benchmark at a load
// average of 10 to 17 found denials with a wait of 1 ms while the fleet held 99 of 100 tokens.)
// First the in-process store (helpers/test-store.js), then a real Redis through ioredis.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { KeyedQuotaClock, QuotaClockError } = require('..')
const { redisStore } = require('../lib/shared.js')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')
const { startRedisServer } = require('./helpers/redis-server.js')

// The long tail's key: 100 per 15 minutes.
const C = 100
const R = C / 900

/** Holds the event loop for `ms`, as a long synchronous task (or a starved process) would. */
function busyFor(ms) {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // the event loop held
  }
}

/** Lets microtasks run (no timer, no I/O): a store call made by them is sent, none is answered. */
async function microtasks(condition, what) {
  for (let i = 0; i < 1_000 && !condition(); i++) await Promise.resolve()
  assert.ok(condition(), `${what} (within microtasks)`)
}

/**
 * Lets microtasks and then the immediates already queued run, no I/O between them: a Redis take
 * waits for the turn's immediates (the takes of one turn go as one call), so it is sent there,
 * and its answer is not read yet (no poll phase has run since).
 */
async function sentThisTurn(condition, what) {
  for (let i = 0; i < 1_000 && !condition(); i++) await Promise.resolve()
  if (!condition()) await new Promise((resolve) => setImmediate(resolve))
  assert.ok(condition(), `${what} (within this turn's immediates)`)
}

/** A call's outcome: 'A' admitted, 'D' denied (with its wait and the fleet's tokens then), or the error's code. */
function outcomeOf(limiter, key) {
  return (promise) =>
    promise.then(
      (decision) => (decision.allowed ? { outcome: 'A' } : { outcome: 'D', retryAfterMs: decision.retryAfterMs, basis: decision.retryAfterBasis, fleetTokens: limiter.status(key).fleetTokens }),
      (error) => ({ outcome: error instanceof QuotaClockError ? error.code : String(error), message: error.message }),
    )
}

/** Admitted, or refused because the store did not answer in time: never denied while the fleet holds the tokens. */
function assertNeverDeniedWithTokens(outcomes) {
  for (const outcome of outcomes) {
    assert.ok(['A', 'ERR_STORE_UNAVAILABLE'].includes(outcome.outcome), `a call of a key whose fleet holds its tokens: ${JSON.stringify(outcome)}`)
  }
}

describe('the in-process store', () => {
  /** A limiter on the long tail's key, shared through testStore `t` (manual clock). */
  const limiterOn = (t, share = {}) => sharedLimiter(t, { bucket: true, leaseMs: 10_000, timeoutMs: 300, ...share }, { capacity: C, refillPerSecond: R, quota: undefined })

  test('two calls of one key made together by a process then held past timeoutMs are both admitted, by one take', async () => {
    const t = testStore()
    const { limiter } = limiterOn(t)
    const of = outcomeOf(limiter, 'ip')
    const calls = [of(limiter.consume('ip')), of(limiter.consume('ip'))]
    busyFor(400)
    const outcomes = await Promise.all(calls)
    assert.deepEqual(outcomes, [{ outcome: 'A' }, { outcome: 'A' }])
    assert.equal(t.calls.bucketTake.length, 1, 'one take for what the two calls lack together')
    assert.equal(t.bucket('api', 'ip').tk, C - 2)
  })

  test('a take answered after the lease it would be spent under lapsed (the process held past leaseMs and timeoutMs): the call asks again and is admitted', async () => {
    const t = testStore()
    const { limiter, clock } = limiterOn(t, { leaseMs: 1_000 })
    t.control.mode = 'hang'
    const call = outcomeOf(limiter, 'ip')(limiter.consume('ip'))
    await microtasks(() => t.calls.bucketTake.length === 1, 'the take is sent')
    // The process stalls: its clock moves past the lease, and past timeoutMs in real time.
    clock.advance(1_100)
    busyFor(400)
    t.control.mode = 'ok'
    t.release()
    assert.deepEqual(await call, { outcome: 'A' })
    assert.equal(t.calls.bucketTake.length, 2, 'a second take, on a lease of its own')
    // The first take's token was spent at the store (a take its call spends at once is not
    // recorded), so the fleet holds C - 2 and the process nothing.
    assert.equal(t.bucket('api', 'ip').tk, C - 2)
    assert.equal(limiter.status('ip').tokens, 0)
  })

  test('a call that joins a take under way and whose second take does not come back within its time is refused with ERR_STORE_UNAVAILABLE, not denied', async () => {
    const t = testStore()
    const { limiter } = limiterOn(t, { timeoutMs: 200 })
    t.control.delayMs = 160
    const of = outcomeOf(limiter, 'ip')
    const first = of(limiter.consume('ip'))
    await microtasks(() => t.calls.bucketTake.length === 1, 'the first take is sent')
    await new Promise(setImmediate)
    // Made while the first take is under way: it waits for it, and the take (what the first call
    // lacked) does not cover it; its next take answers 160 ms later, after its time.
    const second = of(limiter.consume('ip'))
    const outcomes = await Promise.all([first, second])
    assert.equal(outcomes[0].outcome, 'A')
    assertNeverDeniedWithTokens(outcomes)
    if (outcomes[1].outcome === 'ERR_STORE_UNAVAILABLE') assert.match(outcomes[1].message, /share\.timeoutMs \(200 ms\)/)
    assert.ok(limiter.status('ip').fleetTokens >= C / 2, `the fleet holds its tokens: ${limiter.status('ip').fleetTokens}`)
  })

  test('a call made while its key waits on a store held past timeoutMs: never denied while the fleet holds its tokens', async () => {
    const t = testStore()
    const { limiter } = limiterOn(t)
    t.control.mode = 'hang'
    const of = outcomeOf(limiter, 'ip')
    const first = of(limiter.consume('ip'))
    await microtasks(() => t.calls.bucketTake.length === 1, 'the first take is sent')
    await new Promise(setImmediate)
    const second = of(limiter.consume('ip'))
    busyFor(400)
    t.control.mode = 'ok'
    t.release()
    const outcomes = await Promise.all([first, second])
    assert.equal(outcomes[0].outcome, 'A')
    assertNeverDeniedWithTokens(outcomes)
    // And the key is sound after: its next call is admitted.
    assert.deepEqual(await of(limiter.consume('ip')), { outcome: 'A' })
  })

  test('a take answered after its call timed out (a take the call would spend at once) leaves the key sound: its next call is admitted', async () => {
    const t = testStore()
    const { limiter } = limiterOn(t)
    t.control.mode = 'hang'
    const of = outcomeOf(limiter, 'ip')
    // (The store's timer is unref'd, and a hung test store holds no socket: this keeps the process up.)
    const alive = setInterval(() => {}, 1_000)
    const timedOut = await of(limiter.consume('ip')).finally(() => clearInterval(alive))
    assert.equal(timedOut.outcome, 'ERR_STORE_UNAVAILABLE')
    t.control.mode = 'ok'
    t.release()
    // (Until its answer has settled, the key's calls fail at once: nothing queues behind a hung call.)
    await new Promise(setImmediate)
    for (let i = 0; i < 3; i++) assert.deepEqual(await of(limiter.consume('ip')), { outcome: 'A' }, `call ${i}`)
    await limiter.close()
  })

  test('a take its call would spend at once, answered after the call timed out, leaves the slice the process keeps counted out: never over the bound', async () => {
    const t = testStore()
    const { limiter, clock } = limiterOn(t, { leaseMs: 1_000 })
    const of = outcomeOf(limiter, 'ip')
    // A busy key: its second call takes a share beyond what it lacks, and the slice keeps it.
    let admitted = 0
    for (let i = 0; i < 2; i++) if ((await of(limiter.consume('ip'))).outcome === 'A') admitted++
    const kept = limiter.status('ip').tokens
    assert.ok(kept >= 2, `the slice keeps ${kept}`)
    // Not busy any more (leaseMs / 2 on), its lease still running: a call of kept + 1 takes only
    // the one it lacks, to spend at once, keeping the slice; the store holds it past timeoutMs.
    clock.advance(600)
    t.control.mode = 'hang'
    const alive = setInterval(() => {}, 1_000)
    const timedOut = await of(limiter.consume('ip', kept + 1)).finally(() => clearInterval(alive))
    assert.equal(timedOut.outcome, 'ERR_STORE_UNAVAILABLE')
    assert.equal(t.calls.bucketTake.at(-1).spend, true)
    // The answer comes; any store call it leads to is held until what the slice holds is spent.
    t.release()
    for (let i = 0; i < 3; i++) await new Promise(setImmediate)
    const holds = limiter.status('ip').tokens
    for (let i = 0; i < holds; i++) if ((await of(limiter.consume('ip'))).outcome === 'A') admitted++
    t.control.mode = 'ok'
    t.release()
    for (let i = 0; i < 3; i++) await new Promise(setImmediate)
    // The slice the process kept is still out to it in the store, never also back in the bucket:
    // draining the key (no refill: the clocks stand still) admits at most C in all.
    for (let i = 0; i < 2 * C; i++) if ((await of(limiter.consume('ip'))).outcome === 'A') admitted++
    assert.ok(admitted <= C, `admitted ${admitted} of a bucket of ${C}`)
    assert.ok(admitted >= C - 2, `admitted ${admitted}: the store's answer lost the slice`)
  })
})

describe('redis-server through ioredis', () => {
  let redis
  let client
  const limiters = []
  let unique = 0

  before(async () => {
    redis = await startRedisServer()
    client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 0 })
    await client.connect()
  })

  after(async () => {
    for (const limiter of limiters) await limiter.close().catch(() => {})
    client?.disconnect()
    await redis?.stop()
  })

  /** The long tail's limiter on the real store: leaseMs 1,000, timeoutMs 2,000 (a healthy store answers well within it). */
  function limiterOn(share = {}) {
    const limiter = new KeyedQuotaClock({
      capacity: C,
      refillPerSecond: R,
      suspendPolicy: 'ignore',
      share: { store: redisStore(client), name: `overload-${process.pid}-${++unique}`, bucket: true, leaseMs: 1_000, timeoutMs: 2_000, ...share },
    })
    limiters.push(limiter)
    return limiter
  }

  test('a process that holds its event loop past leaseMs and timeoutMs right after its calls: every call of keys far from their limit is admitted', async () => {
    const limiter = limiterOn()
    const keys = Array.from({ length: 50 }, (_, i) => `198.18.0.${i}`)
    // Two calls of each key made together (a lagging process's overdue arrivals), then the loop held.
    const calls = keys.flatMap((key) => [outcomeOf(limiter, key)(limiter.consume(key)), outcomeOf(limiter, key)(limiter.consume(key))])
    busyFor(2_200)
    const outcomes = await Promise.all(calls)
    assert.deepEqual(
      outcomes.filter((o) => o.outcome !== 'A'),
      [],
      'every call admitted',
    )
    assert.ok(limiter.stats().store.calls <= 2 * keys.length, `${limiter.stats().store.calls} store calls for ${keys.length} keys`)
  })

  // (On Redis the takes of one turn go as one call, sent among the turn's immediates, where the
  // call's time starts too: a loop held after that counts against timeoutMs. So the call is
  // admitted, or refused with ERR_STORE_UNAVAILABLE when the hold outlasted its time; never denied.)
  test('a take sent, then the loop held past leaseMs and timeoutMs before its answer is read: never denied while the fleet holds its tokens', async () => {
    const limiter = limiterOn()
    const of = outcomeOf(limiter, 'k')
    const sent = limiter.stats().store.calls
    const call = of(limiter.consume('k'))
    await sentThisTurn(() => limiter.stats().store.calls === sent + 1, 'the take is sent')
    busyFor(2_200)
    const outcome = await call
    assert.ok(outcome.outcome === 'A' || outcome.outcome === 'ERR_STORE_UNAVAILABLE', JSON.stringify(outcome))
    // The key is sound: once its store call is answered (refused at once until then), it admits.
    let next = await of(limiter.consume('k'))
    for (let i = 0; i < 100 && next.outcome === 'ERR_STORE_UNAVAILABLE'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      next = await of(limiter.consume('k'))
    }
    assert.deepEqual(next, { outcome: 'A' })
    const status = limiter.status('k')
    // (What the process's slice holds and the fleet's: at most the calls' few tokens are spent.)
    assert.ok(status.tokens + status.fleetTokens >= C - 4, `the slice's ${status.tokens} and the fleet's ${status.fleetTokens} tokens`)
    assert.equal(limiter.stats().store.errors, 0)
  })
})
