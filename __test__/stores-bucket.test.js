'use strict'

// The fleet bucket's store operations (lib/share/protocol.js: bucketTake, bucketRead, bucketFill),
// every step of the protocol on every store: the in-process test store (the reference model the
// driver's unit tests use, its clock stepped), redis-server standalone through ioredis and
// node-redis (its wall clock steppable), a real three-node Redis Cluster through both cluster
// clients, and the MongoDB wire-compatible test server. The fleet clock is driven by the caller's
// fleetMs where a test needs it exact (it never passes the store's own elapsed time, so a short
// sleep makes room for it), and frozen at the last answer's reading where a test needs no refill.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const Redis = require('ioredis')
const { createClient, createCluster } = require('redis')
const { MongoClient } = require('mongodb')
const { redisStore, mongoStore } = require('quota-clock-source/shared')
const { QuotaClockError } = require('quota-clock-source')
const { storeOperations, checkBucketAnswer, checkBucketUsage, bucketKeptMs } = require('../lib/share/protocol.js')
const { startRedisServer, startRedisCluster } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { testStore } = require('./helpers/test-store.js')
const { decodeBucketRecord, HEAD_BYTES } = require('./helpers/redis-bucket-record.js')

let unique = 0
const freshName = () => `bucket-${process.pid}-${++unique}`
const part = (text) => `${Buffer.byteLength(text)}:${text}`
/** The documented Redis key of a bucket record. */
const redisKey = (name, key, prefix = 'qcs:') => `${prefix}{${part(name)}:${part(key)}}:b`
const mongoId = (name, key) => `bucket:${part(name)}:${part(key)}`

const L = 10_000
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const near = (actual, expected, within = 1e-9) => assert.ok(Math.abs(actual - expected) <= within, `${actual} != ${expected}`)
const isStoreResponse = (error) => error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE'

/** A bucketTake request: capacity 10, 2 tokens a second, want 1, nothing else, unless `fields` says otherwise. */
function takeOf(name, fields) {
  return {
    name,
    key: 'k',
    capacity: 10,
    refillPerSecond: 2,
    instance: 'A',
    leaseMs: L,
    want: 1,
    more: 0,
    held: 0,
    give: 0,
    charge: 0,
    fleetMs: -1,
    recordId: 0,
    ...fields,
  }
}

/** A call that moves no fleet time: fleetMs at the previous answer's reading. */
const frozen = (previous, fields) => ({ fleetMs: previous.fleetMs, recordId: previous.recordId, ...fields })

/** Every step on one store (variant: { ops, step?(ms), manual?: its clock moves only by step, drop(name, key) }). */
function stepsOn(label, variant) {
  describe(label, () => {
    const v = () => variant()
    // Time passing for the store: the test store's clock moves only when stepped.
    const pass = async (ms) => (v().manual ? v().step(ms) : sleep(ms))

    test('1. a new record is made full, with the identity the caller offered, and the fleet clock at 0', async () => {
      const { ops } = v()
      const name = freshName()
      const newId = 1_000_000 + unique
      const a = await ops.bucketTake(takeOf(name, { want: 3, newId }))
      assert.deepEqual({ ...a, storeNowMs: 0 }, { granted: 3, held: 3, tokens: 7, fleetMs: 0, storeNowMs: 0, recordId: newId, others: 0, repaired: false })
      if (v().step === undefined) assert.ok(Math.abs(a.storeNowMs - Date.now()) < 10_000, `store time ${a.storeNowMs}, here ${Date.now()}`)
      // Without newId the store makes an identity below 2**48.
      const b = await ops.bucketTake(takeOf(freshName(), { want: 0 }))
      assert.ok(Number.isSafeInteger(b.recordId) && b.recordId > 0 && b.recordId < 2 ** 48)
      assert.deepEqual([b.granted, b.held, b.tokens], [0, 0, 10])
      // The same record after: the same identity, nothing made again.
      const again = await ops.bucketTake(takeOf(name, frozen(a, { want: 0, held: 3, newId: newId + 1 })))
      assert.deepEqual([again.granted, again.held, again.tokens, again.recordId], [0, 3, 7, newId])
    })

    test('1. a caller that names a record the store lost finds it made again EMPTY, and its old slice counts for nothing', async () => {
      const { ops, drop } = v()
      const name = freshName()
      const a = await ops.bucketTake(takeOf(name, { want: 4 }))
      await drop(name, 'k')
      const back = await ops.bucketTake(takeOf(name, { want: 1, held: 2, give: 2, fleetMs: 5_000, recordId: a.recordId }))
      assert.notEqual(back.recordId, a.recordId)
      // Empty, no refill (the fleet clock starts at 0 and the caller's reading is of the old record),
      // nothing kept, nothing given back.
      assert.deepEqual([back.granted, back.held, back.tokens, back.fleetMs, back.others], [0, 0, 0, 0, 0])
      // A record of another identity is lost to the caller too.
      const other = await ops.bucketTake(takeOf(name, { want: 0, held: 1, give: 1, recordId: a.recordId }))
      assert.deepEqual([other.held, other.recordId], [0, back.recordId])
      // (A lost caller's fleetMs is not used: the store's elapsed time refills, 2 a second; a loaded
      // machine's MongoDB may take a few hundred ms between the two calls.)
      near(other.tokens, 0, 1)
    })

    test('3. the fleet clock moves to min(store elapsed, the caller fleetMs), never backwards; a caller without fleetMs at most C / R s', async () => {
      const { ops, step } = v()
      const name = freshName()
      // C 10, R 10: C / R = 1 s. A takes everything and spends it: an empty bucket, nothing out.
      const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 10, want: 10 }))
      const spent = await ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 10, want: 0 })))
      assert.deepEqual([spent.held, spent.tokens, spent.fleetMs], [0, 0, 0])
      await pass(300)
      // The caller saw 100 ms pass: the fleet clock moves 100 ms, 1 token.
      const b = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 10, want: 0, fleetMs: 100, recordId: a.recordId }))
      assert.equal(b.fleetMs, 100)
      near(b.tokens, 1)
      // A reading behind the record's: the clock stays.
      const behind = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 10, want: 0, fleetMs: 50, recordId: a.recordId }))
      assert.equal(behind.fleetMs, 100)
      near(behind.tokens, 1)
      // A caller far ahead: the store's own elapsed time (less than the sleep since, plus slack).
      await pass(50)
      const ahead = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 10, want: 0, fleetMs: 1e9, recordId: a.recordId }))
      assert.ok(ahead.fleetMs - 100 >= 40 && ahead.fleetMs - 100 < 5_000, `moved ${ahead.fleetMs - 100}`)
      near(ahead.tokens, 1 + ((ahead.fleetMs - 100) * 10) / 1000, 1e-6)
      // Without fleetMs (no previous answered call): at most C / R = 1 s, however long the store saw.
      await pass(1_200)
      const fresh = await ops.bucketTake(takeOf(name, { instance: 'C', refillPerSecond: 10, want: 0, recordId: a.recordId }))
      near(fresh.fleetMs, ahead.fleetMs + 1_000, 1e-6)
      assert.equal(fresh.tokens, 10)
      if (step === undefined) return
      // A store clock stepped an hour forward moves the fleet clock only as far as the caller saw;
      // stepped back, not at all.
      // (Steps shorter than the record's 72 s to live.)
      step(30_000)
      const forward = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 10, want: 0, fleetMs: fresh.fleetMs + 200, recordId: a.recordId }))
      near(forward.fleetMs, fresh.fleetMs + 200, 1e-6)
      step(-60_000)
      const backwards = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 10, want: 0, fleetMs: 1e12, recordId: a.recordId }))
      near(backwards.fleetMs, forward.fleetMs, 1e-6)
      step(30_000)
    })

    test('3. the refill is capped at C - out', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 10, want: 10 }))
      // A spent 4 and keeps 6: out 6, tokens 0.
      const kept = await ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 10, want: 0, held: 6 })))
      assert.deepEqual([kept.held, kept.tokens], [6, 0])
      await pass(700) // 7 tokens of refill: only 4 fit
      const b = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 10, want: 0, recordId: a.recordId }))
      assert.equal(b.tokens, 4)
      assert.equal(b.others, 1)
      const view = await ops.bucketRead({ name, key: 'k' })
      assert.deepEqual({ ...view, expiresAt: 0 }, { capacity: 10, refillPerSecond: 10, tokens: 4, out: 6, expiresAt: 0 })
    })

    test('4. another holder is written off after 1.1 * leaseMs + 1000 fleet ms, spent for good: what it reports later does not come back', async () => {
      const { ops } = v()
      const name = freshName()
      // leaseMs 1: written off past 1001.1 fleet ms after its call reached the store.
      const a = await ops.bucketTake(takeOf(name, { want: 10, leaseMs: 1 }))
      await pass(1_100)
      const early = await ops.bucketTake(takeOf(name, { instance: 'B', want: 1, fleetMs: 1_000, recordId: a.recordId }))
      assert.deepEqual([early.granted, early.tokens, early.others, early.fleetMs], [0, 0, 1, 1_000])
      await pass(10)
      // F = 1002 > 1001.1: A's 10 are spent, and the refill's cap counts them only until their
      // margin passed: of the 2 ms since the last move, the 0.9 after 1001.1 refill 0.0018.
      const late = await ops.bucketTake(takeOf(name, { instance: 'B', want: 1, fleetMs: 1_002, recordId: a.recordId }))
      const micro = (x) => Math.round(x * 1e6) / 1e6
      assert.deepEqual([late.granted, micro(late.tokens), late.others, late.fleetMs], [0, 0.0018, 0, 1_002])
      assert.equal((await ops.bucketRead({ name, key: 'k' })).out, 0)
      // A comes back (it was paused): what it reports keeping or giving back goes nowhere, and
      // the answer tells it its slice is gone (held 0).
      const report = await ops.bucketTake(takeOf(name, frozen(late, { want: 0, held: 10, give: 7 })))
      assert.deepEqual([report.granted, report.held, micro(report.tokens), report.others], [0, 0, 0.0018, 0])
      assert.equal((await ops.bucketRead({ name, key: 'k' })).out, 0)
    })

    test('4. a call that moves the fleet clock past a margin at once gives the slice one more margin, once: its holder can still report', async () => {
      const { ops } = v()
      const name = freshName()
      // C 10, R 1 (C / R = 10 s). A takes 6 with leaseMs 1 (margin 1001.1 fleet ms).
      const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 1, want: 6, leaseMs: 1 }))
      await pass(1_600)
      // B's first call moves the fleet clock 1500 ms at once, past A's margin: A keeps its slice,
      // with one more margin from the new fleet clock.
      const jump = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 1, want: 0, fleetMs: 1_500, recordId: a.recordId }))
      assert.deepEqual([jump.fleetMs, jump.others], [1_500, 1])
      assert.equal((await ops.bucketRead({ name, key: 'k' })).out, 6)
      // A reports within that margin: its unspent tokens go back.
      const report = await ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 1, want: 0, held: 0, give: 5, fleetMs: 1_600 })))
      assert.deepEqual([report.held, report.others], [0, 0])
      assert.ok(report.tokens >= 4 + 5 - 1e-9, `A's 5 unspent tokens came back: ${report.tokens}`)
      // Once: another holder, jumped past twice without a call of its own, is written off.
      const c = await ops.bucketTake(takeOf(name, { instance: 'C', refillPerSecond: 1, want: 2, leaseMs: 1, fleetMs: 1_600, recordId: a.recordId }))
      assert.equal(c.granted, 2)
      await pass(1_200)
      const first = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 1, want: 0, fleetMs: 2_700, recordId: a.recordId }))
      assert.equal(first.others, 1, 'C had one more margin')
      await pass(1_200)
      const second = await ops.bucketTake(takeOf(name, { instance: 'B', refillPerSecond: 1, want: 0, fleetMs: 3_800, recordId: a.recordId }))
      assert.equal(second.others, 0, 'C was written off at the second jump')
      const back = await ops.bucketTake(takeOf(name, frozen(c, { refillPerSecond: 1, want: 0, held: 2, give: 0, fleetMs: 3_900 })))
      assert.equal(back.held, 0, 'C keeps nothing of a slice written off')
    })

    test('5. held keeps at most the slice, give returns at most the rest, and a renewal keeps its lease', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.bucketTake(takeOf(name, { want: 10 }))
      const report = await ops.bucketTake(takeOf(name, frozen(a, { want: 0, held: 4, give: 3 }))) // 3 spent
      assert.deepEqual([report.granted, report.held, report.tokens], [0, 4, 3])
      const greedy = await ops.bucketTake(takeOf(name, frozen(a, { want: 0, held: 10 })))
      assert.deepEqual([greedy.held, greedy.tokens], [4, 3], 'no more kept than held')
      const generous = await ops.bucketTake(takeOf(name, frozen(a, { want: 0, held: 1, give: 99 })))
      assert.deepEqual([generous.held, generous.tokens], [1, 6], 'no more given than the slice had')
      const fractional = await ops.bucketTake(takeOf(name, frozen(a, { want: 0, held: 0, give: 0.25 })))
      assert.deepEqual([fractional.held, fractional.tokens], [0, 6.25])
      const view = await ops.bucketRead({ name, key: 'k' })
      assert.equal(view.out, 0)
    })

    test("5. the caller's slice counts as out for the refill until it last spent from it (spentMs), then no more", async () => {
      const { ops } = v()
      // A takes all 10 (refill 10 a second), spends them, and reports 500 fleet ms later that it
      // last spent from the slice `spentMs` before the call: the refill of those 500 ms counts
      // the slice as out (room 0) until then, and not after.
      for (const [spentMs, tokens] of [[0, 0], [200, 2], [500, 5], [1e12, 5]]) {
        const name = freshName()
        const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 10, want: 10 }))
        assert.deepEqual([a.granted, a.tokens], [10, 0])
        await pass(550)
        const report = await ops.bucketTake(takeOf(name, { refillPerSecond: 10, want: 0, fleetMs: a.fleetMs + 500, recordId: a.recordId, spentMs }))
        assert.equal(report.fleetMs, a.fleetMs + 500)
        near(report.tokens, tokens, 1e-9)
        assert.equal(report.held, 0)
      }
    })

    test('6. a failOpen charge is taken even below zero', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 0.001, want: 6 }))
      const charged = await ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 0.001, want: 1, held: 6, charge: 10 })))
      assert.deepEqual([charged.granted, charged.held, charged.tokens], [0, 6, -6])
      near((await ops.bucketRead({ name, key: 'k' })).tokens, -6, 0.01)
    })

    test('7. want and more: at least want or nothing; a fair share among k others; everything there is', async () => {
      const { ops } = v()
      const name = freshName()
      const base = { capacity: 100, refillPerSecond: 0.001 }
      const a = await ops.bucketTake(takeOf(name, { ...base, want: 10, fleetMs: 0 }))
      assert.deepEqual([a.granted, a.tokens, a.others], [10, 90, 0])
      const b = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'B', want: 0, more: 1 })))
      // A quarter of a fair share (the refill of SHARE_REFILL_MS is less): fair = C / (k + 2),
      // at most (tk - w) / (k + 1) of what the bucket has left.
      const bGranted = 1 + Math.floor(Math.min(89 / 2, 100 / 3) / 4)
      assert.deepEqual([b.granted, b.tokens, b.others], [bGranted, 90 - bGranted, 1])
      const c = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'C', want: 5, more: 1 })))
      const cGranted = 5 + Math.floor(Math.min((b.tokens - 5) / 3, 100 / 4) / 4)
      assert.deepEqual([c.granted, c.tokens, c.others], [cGranted, b.tokens - cGranted, 2])
      const rest = c.tokens
      const tooMuch = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'D', want: rest + 1, more: 2 })))
      assert.deepEqual([tooMuch.granted, tooMuch.held, tooMuch.tokens, tooMuch.others], [0, 0, rest, 3])
      const d = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'D', want: 0, more: 2, give: 0.5 })))
      assert.deepEqual([d.granted, d.held, d.tokens, d.others], [rest, rest, 0, 3])
      const e = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'E', want: 1 })))
      assert.deepEqual([e.granted, e.held, e.tokens, e.others], [0, 0, 0, 4])
      const renewal = await ops.bucketTake(takeOf(name, frozen(a, { ...base, want: 0, held: 10 })))
      assert.deepEqual([renewal.granted, renewal.held, renewal.others], [0, 10, 3])
      // A fractional bucket grants whole tokens.
      const g = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'C', want: 0, held: 18, give: 0, more: 0 })))
      assert.equal(g.granted, 0)
      const f = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'D', want: 0, held: 32, give: 1.5, more: 2 })))
      assert.deepEqual([f.granted, f.held], [1, 33])
      near(f.tokens, 0.5)
    })

    test('7. all there is, asked after a wait, is shared with the instances that found the bucket short, during their local denial', async () => {
      const { ops } = v()
      const name = freshName()
      // leaseMs 10,000: a denial of 1.3 * min(1,250, 1,000, C / (2R) = 500) ms, and B hungry for
      // 650 * 1.25 + 50 = 862.5 fleet ms (lib/share/protocol.js, hungerMs).
      const base = { capacity: 10, refillPerSecond: 10, leaseMs: 10_000 }
      // A takes the whole bucket and reports it spent at once: empty, nothing out.
      const a = await ops.bucketTake(takeOf(name, { ...base, want: 10 }))
      await ops.bucketTake(takeOf(name, frozen(a, { ...base, want: 0, held: 0, spentMs: 1e12 })))
      // B is denied: it found the bucket short.
      const b = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'B', want: 1 })))
      assert.equal(b.granted, 0)
      await pass(600)
      // C, after its wait, asks for all there is: it takes its share, B's is left in the store.
      const c = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'C', want: 0, more: 2, fleetMs: a.fleetMs + 600 })))
      const there = c.tokens + c.granted
      assert.ok(there >= 5, `the refill of 600 ms: ${there}`)
      assert.equal(c.granted, 1 + Math.floor((there - 1) / 2), `C took ${c.granted} of ${there}`)
      // B, still hungry, finds its share.
      const b2 = await ops.bucketTake(takeOf(name, frozen(b, { ...base, instance: 'B', want: 0, more: 2, fleetMs: c.fleetMs })))
      assert.ok(b2.granted >= Math.floor(there / 2) - 1, `B took ${b2.granted}`)
      // Past its hunger, an instance that asks no more is not counted: D takes all there is.
      await pass(1_000)
      const d = await ops.bucketTake(takeOf(name, frozen(a, { ...base, instance: 'D', want: 0, more: 2, fleetMs: c.fleetMs + 1_000 })))
      assert.ok(d.tokens < 1, `D left ${d.tokens} to nobody`)
    })

    test('7. hungerMs is the local denial of src/keyed/slices.rs, a quarter more and 50 ms', () => {
      const { hungerMs } = require('../lib/share/protocol.js')
      // (C 10, R 10, leaseMs 10,000, empty: 1.3 * 500 ms; C 20, R 20, leaseMs 1,000: 1.3 * 125 ms;
      // a slow refill: the wait for a token, at most 1 s.)
      for (const [args, denial] of [[[10_000, 10, 10, 0], 650], [[1_000, 20, 20, 0.5], 162.5], [[10_000, 100, 0.1, 0], 1_000], [[4_000, 100, 1.25, 0], 800]]) {
        near(hungerMs(...args), denial * 1.25 + 50, 1e-9)
      }
    })

    test("2. a plan change is the request's, what was used staying used: tk = min(C' - out, tk + C' - C), below zero if need be", async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 0.001, want: 6 }))
      assert.equal(a.tokens, 4)
      const smaller = await ops.bucketTake(takeOf(name, frozen(a, { instance: 'B', capacity: 8, refillPerSecond: 0.001, want: 0 })))
      assert.equal(smaller.tokens, 2)
      const tiny = await ops.bucketTake(takeOf(name, frozen(a, { capacity: 3, refillPerSecond: 0.001, want: 0, held: 6 })))
      assert.deepEqual([tiny.held, tiny.tokens], [6, -3], 'X keeps its slice; the bucket owes it')
      const larger = await ops.bucketTake(takeOf(name, frozen(a, { capacity: 20, refillPerSecond: 0.5, want: 0, held: 6 })))
      assert.deepEqual([larger.held, larger.tokens], [6, 14], 'what was used stays used: -3 + 20 - 3, at most 20 - 6')
      const view = await ops.bucketRead({ name, key: 'k' })
      assert.deepEqual([view.capacity, view.refillPerSecond, view.out], [20, 0.5, 6])
    })

    test('2. a plan change is refilled at the old rate up to the call that brings it, then carried over', async () => {
      const { ops } = v()
      const name = freshName()
      const a = await ops.bucketTake(takeOf(name, { want: 10 }))
      // A spent its slice: the bucket is empty and nothing is out.
      const spent = await ops.bucketTake(takeOf(name, frozen(a, { want: 0 })))
      assert.deepEqual([spent.held, spent.tokens], [0, 0])
      await pass(1_000)
      const upgraded = await ops.bucketTake(takeOf(name, { instance: 'B', capacity: 20, refillPerSecond: 1_000, want: 0 }))
      // 1 s at the old 2 a second, then the 10 more of the new capacity: not a full new bucket.
      near(upgraded.tokens, 2 + 10, 0.3)
      const view = await ops.bucketRead({ name, key: 'k' })
      assert.deepEqual([view.capacity, view.refillPerSecond], [20, 1_000])
    })

    test('9. the record expires max(C / R, 1.1 * the longest lease + 1 s) + 60 s of store time after a take', async () => {
      const { ops, step } = v()
      const name = freshName()
      const slow = await ops.bucketTake(takeOf(name, { capacity: 1000, refillPerSecond: 1, want: 0 }))
      near((await ops.bucketRead({ name, key: 'k' })).expiresAt - slow.storeNowMs, 1_060_000, 1_000)
      const longLease = await ops.bucketTake(takeOf(name, { capacity: 10, refillPerSecond: 1000, leaseMs: 600_000, want: 1 }))
      near((await ops.bucketRead({ name, key: 'k' })).expiresAt - longLease.storeNowMs, 721_000, 1_000)
      // Another instance's shorter lease does not pull it in while the long slice is out.
      const short = await ops.bucketTake(takeOf(name, { instance: 'B', capacity: 10, refillPerSecond: 1000, leaseMs: 1_000, want: 0 }))
      near((await ops.bucketRead({ name, key: 'k' })).expiresAt - short.storeNowMs, 721_000, 1_000)
      if (step === undefined) return
      step(722_000)
      assert.equal(await ops.bucketRead({ name, key: 'k' }), null, 'gone by the store clock')
      step(-722_000)
    })

    test('bucketRead moves nothing; bucketFill sets tokens to C - out; both answer null without a record', async () => {
      const { ops } = v()
      const name = freshName()
      assert.equal(await ops.bucketRead({ name, key: 'k' }), null)
      assert.equal(await ops.bucketFill({ name, key: 'k' }), null)
      assert.equal(await ops.bucketRead({ name, key: 'k' }), null, 'fill makes no record')
      const a = await ops.bucketTake(takeOf(name, { refillPerSecond: 0.001, want: 6 }))
      const charged = await ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 0.001, want: 0, held: 6, charge: 10 })))
      assert.equal(charged.tokens, -6)
      const read = await ops.bucketRead({ name, key: 'k' })
      near(read.tokens, -6, 0.01)
      const same = await ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 0.001, want: 0, held: 6 })))
      assert.equal(same.tokens, -6, 'the read moved no fleet time')
      const filled = await ops.bucketFill({ name, key: 'k' })
      assert.deepEqual({ ...filled, expiresAt: 0 }, { capacity: 10, refillPerSecond: 0.001, tokens: 4, out: 6, expiresAt: 0 })
      assert.ok(Number.isSafeInteger(filled.expiresAt) && filled.expiresAt > same.storeNowMs)
      assert.deepEqual({ ...(await ops.bucketRead({ name, key: 'k' })), expiresAt: 0 }, { ...filled, expiresAt: 0 })
      const b = await ops.bucketTake(takeOf(name, frozen(a, { instance: 'B', refillPerSecond: 0.001, want: 4 })))
      assert.deepEqual([b.granted, b.tokens], [4, 0])
    })

    test('8. takes their calls spend at once leave a record that lists no instance: the refill, a denial, hunger and a recorded slice from there are the protocol\'s', async () => {
      const { ops } = v()
      const name = freshName()
      const base = { capacity: 10, refillPerSecond: 10, spend: true }
      const a = await ops.bucketTake(takeOf(name, { ...base, want: 10 }))
      assert.deepEqual([a.granted, a.held, a.tokens, a.others], [10, 10, 0, 0])
      assert.equal((await ops.bucketRead({ name, key: 'k' })).out, 0, 'a take spent at once is out to nobody')
      // 500 fleet ms refill 5, whatever spentMs says: nothing of A's counts as out.
      await pass(550)
      const b = await ops.bucketTake(takeOf(name, { ...base, want: 0, fleetMs: a.fleetMs + 500, recordId: a.recordId, spentMs: 200 }))
      assert.deepEqual([b.granted, b.held, b.fleetMs, b.recordId, b.others, b.repaired], [0, 0, a.fleetMs + 500, a.recordId, 0, false])
      near(b.tokens, 5)
      const c = await ops.bucketTake(takeOf(name, frozen(b, { ...base, instance: 'C', want: 3 })))
      assert.deepEqual([c.granted, c.held, c.others], [3, 3, 0])
      near(c.tokens, 2)
      // D is denied: hungry, so E's "all there is" is shared with it.
      const d = await ops.bucketTake(takeOf(name, frozen(b, { ...base, instance: 'D', want: 3 })))
      assert.deepEqual([d.granted, d.held, d.others], [0, 0, 0])
      near(d.tokens, 2)
      const e = await ops.bucketTake(takeOf(name, frozen(b, { ...base, instance: 'E', want: 0, more: 2 })))
      assert.deepEqual([e.granted, e.held, e.others], [1, 1, 0])
      near(e.tokens, 1)
      // A take not spent at once is recorded as F's slice.
      const f = await ops.bucketTake(takeOf(name, frozen(b, { capacity: 10, refillPerSecond: 10, instance: 'F', want: 1 })))
      assert.deepEqual([f.granted, f.held], [1, 1])
      assert.equal((await ops.bucketRead({ name, key: 'k' })).out, 1)
    })

    test('8. on a record that lists no instance: a fair share, the most a take brings, and a plan change', async () => {
      const { ops } = v()
      const name = freshName()
      const slow = { capacity: 100, refillPerSecond: 0.001, spend: true }
      const a = await ops.bucketTake(takeOf(name, { ...slow, want: 10 }))
      assert.equal(a.tokens, 90)
      // Nobody else shares: a quarter of min(tk - 1, C / 2).
      const b = await ops.bucketTake(takeOf(name, frozen(a, { ...slow, want: 0, more: 1 })))
      assert.deepEqual([b.granted, b.held, b.tokens, b.others], [1 + Math.floor(Math.min(89, 50) / 4), 13, 77, 0])
      const c = await ops.bucketTake(takeOf(name, frozen(a, { ...slow, want: 2, more: 2, most: 5 })))
      assert.deepEqual([c.granted, c.tokens], [5, 72])
      const smaller = await ops.bucketTake(takeOf(name, frozen(a, { ...slow, capacity: 60, want: 0 })))
      assert.equal(smaller.tokens, 32, 'what was used stays used: 72 + 60 - 100')
      const larger = await ops.bucketTake(takeOf(name, frozen(a, { ...slow, capacity: 80, refillPerSecond: 0.5, want: 1 })))
      assert.deepEqual([larger.granted, larger.tokens], [1, 51])
      const view = await ops.bucketRead({ name, key: 'k' })
      assert.deepEqual([view.capacity, view.refillPerSecond, view.out], [80, 0.5, 0])
    })

    test('names and keys with separators and lone surrogates are records of their own', async () => {
      const { ops } = v()
      const name = freshName()
      const keys = ['a:b', 'a', 'b:a', '\ud800', '\ud801', 'é']
      for (const [at, key] of keys.entries()) await ops.bucketTake(takeOf(name, { key, want: at + 1 }))
      for (const [at, key] of keys.entries()) assert.equal((await ops.bucketRead({ name, key })).out, at + 1)
    })
  })
}

describe('the fleet bucket store operations', () => {
  let redis
  let cluster
  let mongo
  const clients = {}
  const variants = {}

  before(async () => {
    ;[redis, cluster, mongo] = await Promise.all([startRedisServer({ fakeTime: true }), startRedisCluster(), startMongoServer()])
    clients.ioredis = new Redis({ host: redis.host, port: redis.port })
    clients.nodeRedis = createClient({ url: redis.url })
    await clients.nodeRedis.connect()
    clients.ioCluster = new Redis.Cluster(cluster.rootNodes)
    clients.nodeCluster = createCluster({ rootNodes: cluster.rootNodes.map(({ host, port }) => ({ url: `redis://${host}:${port}` })) })
    await clients.nodeCluster.connect()
    clients.mongo = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 10_000 })
    await clients.mongo.connect()
    clients.db = clients.mongo.db(`bucket_${process.pid}`)
    const step = (ms) => redis.stepClock(ms)
    variants.ioredis = { ops: storeOperations(redisStore(clients.ioredis)), step, drop: (name, key) => clients.ioredis.del(redisKey(name, key)) }
    variants.nodeRedis = { ops: storeOperations(redisStore(clients.nodeRedis)), step, drop: (name, key) => clients.nodeRedis.del(redisKey(name, key)) }
    variants.ioCluster = { ops: storeOperations(redisStore(clients.ioCluster)), drop: (name, key) => clients.ioCluster.del(redisKey(name, key)) }
    variants.nodeCluster = { ops: storeOperations(redisStore(clients.nodeCluster)), drop: (name, key) => clients.nodeCluster.del(redisKey(name, key)) }
    variants.mongo = {
      ops: storeOperations(mongoStore(clients.db)),
      drop: (name, key) => clients.db.collection('quota_shares').deleteOne({ _id: mongoId(name, key) }),
    }
    const t = testStore()
    variants.test = { ops: storeOperations(t.store), manual: true, step: (ms) => t.stepClock(ms), drop: (name, key) => t.records.delete(JSON.stringify(['bucket', name, key])) }
  })

  after(async () => {
    await Promise.allSettled([clients.ioredis?.quit(), clients.nodeRedis?.close(), clients.ioCluster?.quit(), clients.nodeCluster?.close(), clients.mongo?.close()])
    await Promise.allSettled([redis?.stop(), cluster?.stop(), mongo?.stop()])
  })

  stepsOn('the in-process test store (the reference model, its clock stepped)', () => variants.test)
  stepsOn('Redis through ioredis (its clock stepped)', () => variants.ioredis)
  stepsOn('Redis through node-redis (its clock stepped)', () => variants.nodeRedis)
  stepsOn('a three-node Redis Cluster through ioredis Cluster', () => variants.ioCluster)
  stepsOn('a three-node Redis Cluster through node-redis createCluster', () => variants.nodeCluster)
  stepsOn('MongoDB', () => variants.mongo)

  test('the records of one name spread over the cluster: no hash tag shared by its keys', async () => {
    const shards = await clients.ioCluster.cluster('SHARDS')
    assert.equal(shards.length, 3)
    const name = freshName()
    const slots = new Set()
    const nodes = new Set()
    for (let i = 0; i < 40; i++) {
      const slot = await clients.ioCluster.cluster('KEYSLOT', redisKey(name, `k${i}`))
      slots.add(slot)
      nodes.add(Math.floor(slot / 5462))
    }
    assert.ok(slots.size > 30, `${slots.size} slots`)
    assert.equal(nodes.size, 3)
    // The take wrote where the documented key says, on both cluster clients.
    await variants.ioCluster.ops.bucketTake(takeOf(name, { key: 'k0' }))
    await variants.nodeCluster.ops.bucketTake(takeOf(name, { key: 'k1' }))
    assert.deepEqual([await clients.ioCluster.exists(redisKey(name, 'k0')), await clients.ioCluster.exists(redisKey(name, 'k1'))], [1, 1])
  })

  // (Braces of a user's forming the tag would put all 3,000 of each case on one node.)
  const SPREAD_CASES = [
    ['keys u{x}N of a plain name', 'plain', (i) => `u{x}${i}`],
    ['keys uN of a name api{v1}', 'api{v1}', (i) => `u${i}`],
    ['keys u{x}N of a name api{v1}', 'api{v1}', (i) => `u{x}${i}`],
  ]
  for (const [label, base, keyOf] of SPREAD_CASES) {
    test(`braces form no hash tag: 3,000 ${label} spread over the three nodes; a key's records share one slot`, { timeout: 120_000 }, async (t) => {
      const prefix = `spread${process.pid}-${++unique}:`
      const ops = storeOperations(redisStore(clients.ioCluster, { prefix }))
      const name = `${base}-${process.pid}`
      const keys = Array.from({ length: 3_000 }, (_, i) => keyOf(i))
      for (let at = 0; at < keys.length; at += 100) {
        await Promise.all(keys.slice(at, at + 100).map((key) => ops.bucketTake(takeOf(name, { key, want: 1 }))))
      }
      // The records each master holds (SCAN on each node).
      const masters = clients.ioCluster.nodes('master')
      assert.equal(masters.length, 3)
      const counts = []
      for (const node of masters) {
        let cursor = '0'
        let count = 0
        do {
          const [next, found] = await node.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1_000)
          cursor = next
          count += found.length
        } while (cursor !== '0')
        counts.push(count)
      }
      t.diagnostic(`bucket records per node: ${counts.join(' / ')}`)
      assert.equal(counts.reduce((a, b) => a + b, 0), 3_000)
      for (const count of counts) assert.ok(count >= 800 && count <= 1_200, `records per node ${counts.join(' / ')}: not spread`)
      // The tag is the escaped (name, key) pair: the documented name holds the bucket.
      const escaped = (text) => part(text.replace(/[{}]/g, (c) => (c === '{' ? '%7B' : '%7D')))
      const key = keyOf(7)
      const bucketName = `${prefix}{${escaped(name)}:${escaped(key)}}:b`
      assert.equal(await clients.ioCluster.exists(bucketName), 1, `${bucketName} holds the bucket of ${key}`)
      // Every record of one (name, key) is in one slot: its quota periods and its bucket.
      const slotOf = (redisKeyName) => clients.ioCluster.cluster('KEYSLOT', redisKeyName)
      await ops.reserve({ name, key, periodId: '2024-03', limit: 10, leaseUnits: 1, lacking: 1, charge: 0, expiresAtMs: Date.now() + 60_000 })
      const quotaName = bucketName.replace(/:b$/, ':2024-03')
      assert.equal(await clients.ioCluster.hget(quotaName, 'c'), '1')
      assert.equal(await slotOf(quotaName), await slotOf(bucketName))
    })
  }

  test('the Redis record is the documented string: its fields exact, an entry per instance listed, its TTL set', async () => {
    const name = freshName()
    const a = await variants.ioredis.ops.bucketTake(takeOf(name, { refillPerSecond: 0.1, want: 3, newId: 42 }))
    const bytes = await clients.ioredis.getBuffer(redisKey(name, 'k'))
    assert.equal(bytes.length, HEAD_BYTES + 3 + 1 + 20, 'the fixed part, then A: its name and a slice')
    assert.deepEqual(decodeBucketRecord(bytes), { C: 10, R: 0.1, tk: 7, F: 0, S: a.storeNowMs, i: 42, instances: { A: { o: 3, a: 0, l: L } } })
    const ttl = await clients.ioredis.pttl(redisKey(name, 'k'))
    assert.ok(ttl > 159_000 && ttl <= 160_000, `PTTL ${ttl}`)
    // B denied: hungry until a mark past the fleet clock, and no slice.
    const b = await variants.ioredis.ops.bucketTake(takeOf(name, frozen(a, { refillPerSecond: 0.1, instance: 'Bé', want: 8 })))
    assert.equal(b.granted, 0)
    const both = decodeBucketRecord(await clients.ioredis.getBuffer(redisKey(name, 'k')))
    assert.deepEqual(Object.keys(both.instances).sort(), ['A', 'Bé'])
    assert.ok(both.instances['Bé'].d > 0 && both.instances['Bé'].o === undefined, JSON.stringify(both.instances))
  })

  test("a long tail's Redis record is 42 bytes in one allocation, and a take on it runs GET, TIME, SET and the block record's HGET alone", async () => {
    const name = freshName()
    const { ops } = variants.ioredis
    const a = await ops.bucketTake(takeOf(name, { capacity: 1000, want: 1, spend: true }))
    assert.equal(await clients.ioredis.strlen(redisKey(name, 'k')), HEAD_BYTES)
    assert.equal(await clients.ioredis.object('ENCODING', redisKey(name, 'k')), 'embstr')
    await clients.ioredis.config('RESETSTAT')
    for (let i = 0; i < 50; i++) {
      const b = await ops.bucketTake(takeOf(name, { capacity: 1000, instance: `I${i % 3}`, want: 1, spend: true, recordId: a.recordId, fleetMs: -1 }))
      assert.deepEqual([b.granted, b.held, b.others, b.repaired, b.recordId], [1, 1, 0, false, a.recordId])
    }
    const stats = await clients.ioredis.info('commandstats')
    const calls = Object.fromEntries([...stats.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map(([, command, n]) => [command, Number(n)]))
    delete calls.config
    delete calls.info
    assert.deepEqual(calls, { evalsha: 50, get: 50, time: 50, set: 50, hget: 50 })
    assert.equal(await clients.ioredis.strlen(redisKey(name, 'k')), HEAD_BYTES)
    const ttl = await clients.ioredis.pttl(redisKey(name, 'k'))
    assert.ok(ttl > 60_000 && ttl <= bucketKeptMs(1000, 2, L), `PTTL ${ttl}`)
  })

  test('a take on Redis runs well under a millisecond, with ten instances in the record', async (t) => {
    const name = freshName()
    const { ops } = variants.ioredis
    for (let i = 0; i < 10; i++) await ops.bucketTake(takeOf(name, { instance: `I${i}`, capacity: 1000 }))
    await clients.ioredis.config('RESETSTAT')
    for (let i = 0; i < 200; i++) await ops.bucketTake(takeOf(name, { instance: `I${i % 10}`, capacity: 1000, held: 1 }))
    const info = await clients.ioredis.info('commandstats')
    const perCall = Number(/cmdstat_evalsha:calls=\d+,usec=\d+,usec_per_call=([\d.]+)/.exec(info)[1])
    t.diagnostic(`bucketTake: ${perCall} µs a script`)
    assert.ok(perCall < 250, `${perCall} µs`)
  })

  test('the MongoDB document has expiresAt as a Date (the TTL index covers it)', async () => {
    const name = freshName()
    const a = await variants.mongo.ops.bucketTake(takeOf(name, { capacity: 1000, refillPerSecond: 1 }))
    const document = await clients.db.collection('quota_shares').findOne({ _id: mongoId(name, 'k') })
    assert.ok(document.expiresAt instanceof Date)
    near(document.expiresAt.getTime() - a.storeNowMs, 1_060_000, 1)
    assert.equal(document.rid, a.recordId)
  })

  describe('an answer that makes no sense is ERR_STORE_RESPONSE', () => {
    /** An ioredis client whose script replies pass through `corrupt`. */
    function corrupted(client, corrupt) {
      return new Proxy(client, {
        get(target, property) {
          if (property === 'call') return async (...args) => corrupt(await target.call(...args))
          const value = Reflect.get(target, property)
          return typeof value === 'function' ? value.bind(target) : value
        },
      })
    }

    const takeCases = [
      ['a grant below want', (reply) => [1, ...reply.slice(1)], { want: 3 }],
      ['a grant above capacity', (reply) => [11, 11, ...reply.slice(2)], { want: 1 }],
      ['held below granted', (reply) => [reply[0], 0, ...reply.slice(2)], { want: 2 }],
      ['held above what was kept and granted', (reply) => [reply[0], reply[1] + 1, ...reply.slice(2)], { want: 2 }],
      ['tokens above capacity', (reply) => [reply[0], reply[1], '10.5', ...reply.slice(3)], { want: 0 }],
      ['tokens not a number', (reply) => [reply[0], reply[1], 'lots', ...reply.slice(3)], { want: 1 }],
      ['an infinite fleet clock', (reply) => [...reply.slice(0, 3), 'inf', ...reply.slice(4)], { want: 1 }],
      ['a negative store time', (reply) => [...reply.slice(0, 4), '-1', ...reply.slice(5)], { want: 1 }],
      ['no identity', (reply) => [...reply.slice(0, 5), '0', ...reply.slice(6)], { want: 1 }],
      ['a fractional count of others', (reply) => [...reply.slice(0, 6), '0.5', reply[7]], { want: 1 }],
      ['repaired neither 0 nor 1', (reply) => [...reply.slice(0, 7), 2], { want: 1 }],
      ['a missing field', (reply) => reply.slice(0, 7), { want: 1 }],
      ['not a list', () => 'OK', { want: 1 }],
    ]
    for (const [what, corrupt, fields] of takeCases) {
      test(`bucketTake on Redis: ${what}`, async () => {
        const ops = storeOperations(redisStore(corrupted(clients.ioredis, corrupt)))
        await assert.rejects(ops.bucketTake(takeOf(freshName(), fields)), isStoreResponse)
      })
    }

    // The short answer of a take on a record that lists no instance: { granted, identity, and
    // tokens, fleetMs, storeNowMs as the four 48-bit words (little-endian) of their 24 bytes }.
    const words = (tokens, fleetMs, storeNowMs) => {
      const bytes = Buffer.alloc(24)
      bytes.writeDoubleLE(tokens, 0)
      bytes.writeDoubleLE(fleetMs, 8)
      bytes.writeDoubleLE(storeNowMs, 16)
      return [0, 1, 2, 3].map((at) => bytes.readUIntLE(at * 6, 6))
    }
    const short = (change) => (reply) => (reply.length === 6 ? change(reply) : reply)
    const shortCases = [
      ['tokens above capacity', short((reply) => [...reply.slice(0, 2), ...words(1000.5, 0, Date.now())])],
      ['tokens nan', short((reply) => [...reply.slice(0, 2), ...words(Number.NaN, 0, Date.now())])],
      ['a negative store time', short((reply) => [...reply.slice(0, 2), ...words(5, 0, -1)])],
      ['a word past 48 bits', short((reply) => [...reply.slice(0, 5), 2 ** 48])],
      ['a word not an integer', short((reply) => [...reply.slice(0, 5), '1.5'])],
      ['a fractional grant', short((reply) => ['0.5', ...reply.slice(1)])],
      ['no identity', short((reply) => [reply[0], 0, ...reply.slice(2)])],
      ['a field more (seven) that is no block', short((reply) => [...reply, 0])],
      ['a missing field (five)', short((reply) => reply.slice(0, 5))],
    ]
    test('bucketTake on Redis, the short answer of a record that lists no instance, read exactly', async () => {
      const name = freshName()
      const spent = { capacity: 1000, refillPerSecond: 0.1, want: 1, spend: true }
      const a = await variants.ioredis.ops.bucketTake(takeOf(name, spent))
      let seen
      const ops = storeOperations(redisStore(corrupted(clients.ioredis, (reply) => ((seen = reply), reply))))
      const b = await ops.bucketTake(takeOf(name, { ...spent, recordId: a.recordId, fleetMs: a.fleetMs + 1234.5678 }))
      assert.equal(seen.length, 6)
      assert.deepEqual(seen.slice(2), words(b.tokens, b.fleetMs, b.storeNowMs))
      const record = decodeBucketRecord(await clients.ioredis.getBuffer(redisKey(name, 'k')))
      assert.deepEqual([record.tk, record.F, record.S, record.i], [b.tokens, b.fleetMs, b.storeNowMs, a.recordId])
      assert.ok(b.tokens > 998 && b.tokens < 999 && !Number.isInteger(b.tokens), `${b.tokens}`)
    })
    for (const [what, corrupt] of shortCases) {
      test(`bucketTake on Redis, the short answer of a record that lists no instance: ${what}`, async () => {
        const name = freshName()
        const spent = { capacity: 1000, want: 1, spend: true }
        const a = await variants.ioredis.ops.bucketTake(takeOf(name, spent))
        const ops = storeOperations(redisStore(corrupted(clients.ioredis, corrupt)))
        await assert.rejects(ops.bucketTake(takeOf(name, { ...spent, recordId: a.recordId })), isStoreResponse)
        // (uncorrupted, the same call answers)
        assert.equal((await variants.ioredis.ops.bucketTake(takeOf(name, { ...spent, recordId: a.recordId }))).granted, 1)
      })
    }

    const viewCases = [
      ['tokens above capacity', (reply) => (reply.length === 5 ? [reply[0], reply[1], '11', ...reply.slice(3)] : reply)],
      ['a zero refill', (reply) => (reply.length === 5 ? [reply[0], '0', ...reply.slice(2)] : reply)],
      ['a capacity past 2**31', (reply) => (reply.length === 5 ? [2 ** 31 + 1, ...reply.slice(1)] : reply)],
      ['a missing field', (reply) => (reply.length === 5 ? reply.slice(0, 4) : reply)],
    ]
    for (const [what, corrupt] of viewCases) {
      test(`bucketRead and bucketFill on Redis: ${what}`, async () => {
        const name = freshName()
        await variants.ioredis.ops.bucketTake(takeOf(name, { want: 1 }))
        const ops = storeOperations(redisStore(corrupted(clients.ioredis, corrupt)))
        await assert.rejects(ops.bucketRead({ name, key: 'k' }), isStoreResponse)
        await assert.rejects(ops.bucketFill({ name, key: 'k' }), isStoreResponse)
      })
    }

    test('bucketTake, bucketRead and bucketFill on MongoDB: a document that says nonsense', async () => {
      const db = clients.db
      const collection = db.collection('quota_shares')
      const name = freshName()
      await variants.mongo.ops.bucketTake(takeOf(name, { want: 1 }))
      const lie = (document) => (document === null ? null : { ...document, tk: 99, ans: { ...document.ans, g: -1 } })
      const lying = {
        findOneAndUpdate: async (...args) => {
          const reply = await collection.findOneAndUpdate(...args)
          return { ...reply, value: lie(reply.value) }
        },
        updateOne: (...args) => collection.updateOne(...args),
        aggregate: (...args) => ({ toArray: async () => (await collection.aggregate(...args).toArray()).map(lie) }),
      }
      const ops = storeOperations(mongoStore({ databaseName: db.databaseName, collection: () => lying }))
      await assert.rejects(ops.bucketTake(takeOf(name, { want: 1 })), isStoreResponse)
      await assert.rejects(ops.bucketRead({ name, key: 'k' }), isStoreResponse)
      await assert.rejects(ops.bucketFill({ name, key: 'k' }), isStoreResponse)
      const unanswered = storeOperations(mongoStore({ databaseName: db.databaseName, collection: () => ({ findOneAndUpdate: async () => 'OK' }) }))
      await assert.rejects(unanswered.bucketTake(takeOf(name, { want: 1 })), isStoreResponse)
    })

    test('checkBucketAnswer and checkBucketUsage name the request and the shape expected', () => {
      const request = takeOf('api', { want: 2 })
      const good = { granted: 2, held: 2, tokens: 8, fleetMs: 0, storeNowMs: 1, recordId: 7, others: 0, repaired: false }
      assert.deepEqual(checkBucketAnswer({ ...good, extra: 1 }, request), good)
      const { repaired, ...unsaid } = good
      assert.deepEqual(checkBucketAnswer(unsaid, request), good, 'an answer that does not say repaired is not')
      assert.deepEqual(checkBucketAnswer({ ...good, repaired: true }, request), { ...good, repaired: true })
      assert.equal(repaired, false)
      assert.deepEqual(checkBucketAnswer({ ...good, granted: 0, held: 0, tokens: -3.5 }, request), { ...good, granted: 0, held: 0, tokens: -3.5 })
      for (const bad of [null, 'OK', { ...good, recordId: 0 }, { ...good, others: -1 }, { ...good, granted: 1, held: 1 }, { ...good, fleetMs: Number.NaN }, { ...good, repaired: 1 }]) {
        assert.throws(() => checkBucketAnswer(bad, request), (error) => isStoreResponse(error) && /a bucket request for "api"/.test(error.message) && /granted, held, tokens/.test(error.message))
      }
      assert.equal(checkBucketUsage(null, 'api'), null)
      const usage = { capacity: 10, refillPerSecond: 0.5, tokens: -1, out: 3, expiresAt: null }
      assert.deepEqual(checkBucketUsage(usage, 'api'), usage)
      for (const bad of ['OK', { ...usage, capacity: 0 }, { ...usage, out: 1.5 }, { ...usage, expiresAt: -1 }, { ...usage, tokens: Infinity }]) {
        assert.throws(() => checkBucketUsage(bad, 'api'), (error) => isStoreResponse(error) && /a bucket for "api"/.test(error.message))
      }
    })

    test("the test store's fail, hang and late switches apply to the bucket operations, and it checks its answers", async () => {
      const t = testStore()
      const ops = storeOperations(t.store)
      t.control.mode = 'fail'
      await assert.rejects(ops.bucketTake(takeOf('x')), (error) => error === t.control.failWith)
      await assert.rejects(ops.bucketRead({ name: 'x', key: 'k' }), (error) => error === t.control.failWith)
      await assert.rejects(ops.bucketFill({ name: 'x', key: 'k' }), (error) => error === t.control.failWith)
      t.control.mode = 'hang'
      let settled = false
      const hung = ops.bucketTake(takeOf('x')).finally(() => (settled = true))
      await sleep(20)
      assert.equal(settled, false)
      t.nowMs = 5_000.5
      t.release()
      assert.equal((await hung).storeNowMs, 5_000.5, 'answered at release, by the store clock then')
      t.control.mode = 'ok'
      t.control.delayMs = 30
      const startedAt = Date.now()
      assert.equal((await ops.bucketRead({ name: 'x', key: 'k' })).out, 1)
      assert.ok(Date.now() - startedAt >= 25)
      assert.deepEqual([t.calls.bucketTake.length, t.calls.bucketRead.length, t.calls.bucketFill.length], [2, 2, 1])
      assert.equal(t.bucket('x', 'k').holders.get('A').o, 1)
      t.control.delayMs = 0
      t.control.answer = { granted: 1, held: 0, tokens: 0, fleetMs: 0, storeNowMs: 0, recordId: 1, others: 0 }
      await assert.rejects(ops.bucketTake(takeOf('x')), isStoreResponse)
      t.control.answer = { capacity: 1, refillPerSecond: 1, tokens: 2, out: 0, expiresAt: null }
      await assert.rejects(ops.bucketFill({ name: 'x', key: 'k' }), isStoreResponse)
    })
  })
})
