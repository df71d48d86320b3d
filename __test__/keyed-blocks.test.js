'use strict'
// Blocking a key (the block option, block, unblock, blockedForMs), sentence by sentence, on manual
// clocks: an in-process table, and a shared table over the in-process test store.

const test = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, QuotaClockError, manualClock } = require('..')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')
const { storeOperations } = require('../lib/share/protocol.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const MINUTE = 60_000
const LOGIN = { after: 5, withinMs: MINUTE, forMs: [MINUTE, 10 * MINUTE, 60 * MINUTE] }

function make(options = {}) {
  const clock = options.clock ?? manualClock({ monotonicMs: 0, wallMs: NOON })
  const limiter = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock, block: LOGIN, ...options })
  return { clock, limiter }
}

const isCode = (Class, code) => (error) => error instanceof Class && error.code === code

/** The key's next `denials` denials (what its bucket still holds is taken first). */
function deny(limiter, key, denials) {
  const answers = []
  while (answers.length < denials) {
    const decision = limiter.tryConsume(key)
    if (!decision.allowed) answers.push(decision)
  }
  return answers
}

test('a blocked key is denied every tryConsume and consume, consuming nothing, with the block\'s time left and basis block', async () => {
  const { clock, limiter } = make({ capacity: 5, refillPerSecond: 1 })
  limiter.block('k', 30_000)
  const before = limiter.status('k').tokens
  const d = limiter.tryConsume('k')
  assert.equal(d.allowed, false)
  assert.equal(d.retryAfterMs, 30_000)
  assert.equal(d.retryAfterBasis, 'block')
  assert.equal(limiter.status('k').tokens, before, 'nothing consumed')
  clock.advance(10_000.4)
  const c = await limiter.consume('k')
  assert.equal(c.allowed, false)
  assert.equal(c.retryAfterMs, 20_000, 'rounded up')
  assert.equal(c.retryAfterBasis, 'block')
  assert.equal(limiter.status('k').blockedForMs, 20_000)
  clock.advance(20_000)
  assert.equal(limiter.tryConsume('k').allowed, true, 'the block is over')
  assert.equal(limiter.status('k').blockedForMs, 0)
})

test('refund, status and delete work as usual; delete ends the block', () => {
  const { limiter } = make({ capacity: 5, refillPerSecond: 1 })
  assert.equal(limiter.tryConsume('k').allowed, true)
  limiter.block('k', 30_000)
  limiter.refund('k')
  assert.equal(limiter.status('k').tokens, 5)
  assert.equal(limiter.delete('k'), true)
  assert.equal(limiter.status('k').blockedForMs, 0)
  assert.equal(limiter.tryConsume('k').allowed, true)
})

test('a wall clock step neither shortens nor lengthens a block', () => {
  const { clock, limiter } = make()
  limiter.block('k', MINUTE)
  clock.stepWall(-3_600_000)
  assert.equal(limiter.status('k').blockedForMs, MINUTE)
  clock.stepWall(7_200_000)
  assert.equal(limiter.tryConsume('k').retryAfterMs, MINUTE)
  clock.advance(MINUTE)
  assert.equal(limiter.status('k').blockedForMs, 0)
})

test('a block runs on the limiter\'s timeline: a suspend credited to the buckets runs it down too', () => {
  const { clock, limiter } = make({ clock: manualClock({ monotonicMs: 0, wallMs: NOON, elapsedRealtimeMs: 0 }) })
  limiter.block('k', MINUTE)
  clock.suspend(40_000) // the monotonic clock stops; the reader counts it
  assert.equal(limiter.status('k').blockedForMs, MINUTE - 40_000)
  clock.suspend(40_000)
  assert.equal(limiter.tryConsume('k').allowed, true, 'over after 80 s of real elapsed time')
})

test('after denials within withinMs the key is blocked for forMs[level]; the denial that starts it answers with it', () => {
  const { limiter } = make()
  assert.equal(limiter.tryConsume('k').allowed, true)
  const answers = deny(limiter, 'k', 5)
  for (const a of answers.slice(0, 4)) assert.equal(a.retryAfterBasis, 'monotonic-refill')
  assert.equal(answers[4].retryAfterBasis, 'block')
  assert.equal(answers[4].retryAfterMs, MINUTE)
  assert.equal(limiter.status('k').blockedForMs, MINUTE)
  const stats = limiter.stats()
  assert.equal(stats.blocks, 1)
})

test('the denial that starts a block answers with the longer wait, basis block on a tie', () => {
  const { limiter } = make({ capacity: 1, refillPerSecond: 0.1, block: { after: 1, withinMs: MINUTE, forMs: 1000 } })
  assert.equal(limiter.tryConsume('k').allowed, true)
  const d = limiter.tryConsume('k')
  assert.equal(d.retryAfterBasis, 'monotonic-refill', 'its own wait is longer')
  assert.equal(d.retryAfterMs, 10_000)
  const { limiter: tie } = make({ capacity: 1, refillPerSecond: 1, block: { after: 1, withinMs: MINUTE, forMs: 1000 } })
  tie.tryConsume('k')
  const t = tie.tryConsume('k')
  assert.deepEqual([t.retryAfterMs, t.retryAfterBasis], [1000, 'block'])
})

test('a run is counted from its first denial; a denial more than withinMs after it starts a new run', () => {
  const { clock, limiter } = make()
  limiter.tryConsume('k')
  deny(limiter, 'k', 4)
  clock.advance(MINUTE + 1)
  const answers = deny(limiter, 'k', 4)
  assert.ok(answers.every((a) => a.retryAfterBasis !== 'block'), 'the old run expired: 4 of a new run')
  assert.equal(deny(limiter, 'k', 1)[0].retryAfterBasis, 'block')
})

test('denials during a block do not count; a block ends the run and the next denial starts a new one; levels escalate to the last entry', () => {
  const { clock, limiter } = make()
  limiter.tryConsume('k')
  deny(limiter, 'k', 5)
  deny(limiter, 'k', 20) // during the block
  clock.advance(MINUTE)
  assert.equal(limiter.status('k').blockedForMs, 0)
  const second = deny(limiter, 'k', 5)
  assert.ok(second.slice(0, 4).every((a) => a.retryAfterBasis !== 'block'))
  assert.equal(second[4].retryAfterMs, 10 * MINUTE)
  clock.advance(10 * MINUTE)
  assert.equal(deny(limiter, 'k', 5)[4].retryAfterMs, 60 * MINUTE)
  clock.advance(60 * MINUTE)
  assert.equal(deny(limiter, 'k', 5)[4].retryAfterMs, 60 * MINUTE, 'the last entry again')
  assert.equal(limiter.stats().blocks, 4)
})

test('a single forMs is every level\'s; a key with no block for resetAfterMs goes back to level 0', () => {
  const { clock, limiter } = make({ block: { ...LOGIN, resetAfterMs: 5 * MINUTE } })
  limiter.tryConsume('k')
  deny(limiter, 'k', 5)
  clock.advance(MINUTE + 5 * MINUTE)
  assert.equal(deny(limiter, 'k', 5)[4].retryAfterMs, MINUTE, 'level 0 again')
  const { clock: c2, limiter: single } = make({ block: { after: 2, withinMs: MINUTE, forMs: 1000 } })
  single.tryConsume('k')
  deny(single, 'k', 2)
  c2.advance(1000)
  assert.equal(deny(single, 'k', 2)[1].retryAfterMs, 1000)
})

test('a manual block does not change the level; unblock brings it back to 0 and answers whether it was blocked', () => {
  const { clock, limiter } = make()
  limiter.block('k', 1000)
  clock.advance(1000)
  limiter.tryConsume('k')
  assert.equal(deny(limiter, 'k', 5)[4].retryAfterMs, MINUTE, 'level 0 after a manual block')
  assert.equal(limiter.unblock('k'), true)
  assert.equal(limiter.unblock('k'), false)
  assert.equal(deny(limiter, 'k', 5)[4].retryAfterMs, MINUTE, 'level 0 after unblock')
})

test('block replaces a shorter block, never a longer one', () => {
  const { limiter } = make()
  limiter.block('k', 10_000)
  limiter.block('k', 20_000)
  assert.equal(limiter.status('k').blockedForMs, 20_000)
  limiter.block('k', 5_000)
  assert.equal(limiter.status('k').blockedForMs, 20_000)
  assert.equal(limiter.stats().blocks, 1, 'extending a block is not a new one')
})

test('block asks policy for a key not held; unblock of a key not held asks none', () => {
  const asked = []
  const { limiter } = make({ policy: (key) => (asked.push(key), undefined) })
  limiter.block('new', 1000)
  assert.deepEqual(asked, ['new'])
  assert.equal(limiter.unblock('other'), false)
  assert.deepEqual(asked, ['new'])
  const { limiter: bad } = make({ policy: () => ({ capacity: -1 }) })
  assert.throws(() => bad.block('x', 1000), isCode(RangeError, 'ERR_INVALID_OPTION'))
})

test('bad arguments of block and bad block options are coded errors and change nothing', () => {
  const { limiter } = make()
  assert.throws(() => limiter.block('k', '1000'), isCode(TypeError, 'ERR_INVALID_ARG'))
  for (const forMs of [0, -1, 1.5, 365 * 86_400_000 + 1, NaN]) assert.throws(() => limiter.block('k', forMs), isCode(RangeError, 'ERR_INVALID_ARG'), String(forMs))
  assert.throws(() => limiter.block('', 1000), isCode(RangeError, 'ERR_INVALID_ARG'))
  assert.throws(() => limiter.block(1, 1000), isCode(TypeError, 'ERR_INVALID_ARG'))
  assert.equal(limiter.status('k').blockedForMs, 0)
  const bad = [
    [{ after: 0, withinMs: 1, forMs: 1 }, 'block.after'],
    [{ after: 1.5, withinMs: 1, forMs: 1 }, 'block.after'],
    [{ after: 1, withinMs: 0, forMs: 1 }, 'block.withinMs'],
    [{ after: 1, withinMs: 1, forMs: 0 }, 'block.forMs'],
    [{ after: 1, withinMs: 1, forMs: [1, 365 * 86_400_000 + 1] }, 'block.forMs[1]'],
    [{ after: 1, withinMs: 1, forMs: 1, resetAfterMs: 0 }, 'block.resetAfterMs'],
    [{ after: 1, withinMs: 1, forMs: 1, forMS: 1 }, 'block.forMS'],
  ]
  for (const [block, field] of bad) {
    assert.throws(() => make({ block }), (e) => e.code === 'ERR_INVALID_OPTION' && e.message.includes(field), field)
  }
  assert.throws(() => make({ block: { after: 1, withinMs: 1, forMs: '1' } }), isCode(TypeError, 'ERR_INVALID_OPTION'))
})

test('a blocked key is never dropped to make room', () => {
  const { limiter } = make({ capacity: 5, refillPerSecond: 1, maxKeys: 2 })
  limiter.block('blocked', MINUTE)
  for (let i = 0; i < 10; i++) limiter.tryConsume(`other${i}`)
  assert.equal(limiter.status('blocked').blockedForMs, MINUTE)
  assert.equal(limiter.tryConsume('blocked').retryAfterBasis, 'block')
})

test('a blocked key with a full bucket and no use is held, never dropped to make room: the least recently used key goes', () => {
  const { limiter } = make({ capacity: 5, refillPerSecond: 1, maxKeys: 2 })
  limiter.block('a', MINUTE)
  limiter.tryConsume('b')
  assert.equal(limiter.tryConsume('c').allowed, true)
  assert.equal(limiter.size, 2)
  assert.equal(limiter.status('b').tokens, 5, "b was dropped: a fresh key's bucket")
  assert.equal(limiter.delete('a'), true, 'a is still held')
})

test('when every held key is blocked or has quota use, a new key is refused with ERR_KEY_LIMIT and nothing changes', () => {
  const { limiter } = make({ capacity: 5, refillPerSecond: 1, maxKeys: 2, quota: { limit: 9, period: { unit: 'day', timeZone: 'UTC' } } })
  limiter.block('a', MINUTE)
  limiter.block('b', MINUTE)
  const before = limiter.stats()
  assert.throws(() => limiter.tryConsume('c'), isCode(QuotaClockError, 'ERR_KEY_LIMIT'))
  assert.throws(() => limiter.block('c', MINUTE), isCode(QuotaClockError, 'ERR_KEY_LIMIT'))
  assert.equal(limiter.size, 2)
  assert.deepEqual(limiter.stats(), { ...before, keyLimitRefusals: 2 }, 'only the refusals counted')
  assert.equal(limiter.status('c').blockedForMs, 0, 'c is not blocked')
  limiter.unblock('b')
  assert.equal(limiter.tryConsume('b').allowed, true, 'b has quota use now')
  assert.throws(() => limiter.tryConsume('c'), isCode(QuotaClockError, 'ERR_KEY_LIMIT'))
  assert.equal(limiter.unblock('a'), true)
  assert.equal(limiter.tryConsume('c').allowed, true, 'a, unblocked and idle, makes room')
  assert.equal(limiter.delete('a'), false, 'a was dropped')
})

test('a block that has ended no longer holds its key: seen by a call, or at its end with no call', (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] })
  const { clock, limiter } = make({ capacity: 5, refillPerSecond: 0.001, maxKeys: 2 })
  limiter.block('a', MINUTE)
  clock.advance(MINUTE)
  assert.equal(limiter.status('a').blockedForMs, 0)
  limiter.tryConsume('b')
  limiter.tryConsume('c')
  assert.equal(limiter.delete('a'), false, 'its ended block seen, a was dropped to make room')
  // No call of the key after its block ends: the timer at the block's end lets it go.
  limiter.block('d', MINUTE)
  assert.equal(limiter.delete('b'), false, 'b made room for d')
  clock.advance(MINUTE)
  t.mock.timers.tick(MINUTE)
  limiter.tryConsume('e')
  assert.equal(limiter.delete('d'), false, 'd, idle, was dropped with no call seeing its block end')
  assert.equal(limiter.delete('c'), true)
})

test('a full table lets go of a key whose block has ended before it refuses a new one, with no timer fired (a manual clock moved on)', async () => {
  for (const shared of [false, true]) {
    const t = testStore()
    const options = { capacity: 10, refillPerSecond: 1, maxKeys: 1 }
    const { clock, limiter } = shared ? sharedLimiter(t, { leaseUnits: 1 }, { ...options, quota: undefined }) : make(options)
    const what = shared ? 'shared' : 'local'
    limiter.block('a', 1000)
    assert.throws(() => limiter.block('b', 1000), isCode(QuotaClockError, 'ERR_KEY_LIMIT'), `${what}: a blocked key is not dropped`)
    clock.advance(3_600_000) // no timer fires: the block's end is seen by the full table
    assert.equal((await limiter.consume('b')).allowed, true, `${what}: a's block over, a dropped for b`)
    assert.equal(limiter.delete('a'), false)
    assert.equal(limiter.stats().keyLimitRefusals, 1, `${what}: only the refusal while a was blocked`)
    // block() of a new key likewise; an automatic block's key too.
    limiter.block('b', 1000)
    clock.advance(1000)
    limiter.block('c', 5000)
    assert.equal(limiter.status('c').blockedForMs, 5000, `${what}: b's block over, c held and blocked`)
    if (!shared) {
      clock.advance(5000)
      assert.equal(limiter.tryConsume('d').allowed, true, `${what}: tryConsume of a new key`)
    }
    await limiter.close?.()
  }
})

test('automatic blocks and blocks restored from a snapshot hold their keys too', () => {
  const options = { capacity: 1, refillPerSecond: 1, maxKeys: 2, block: { after: 1, withinMs: MINUTE, forMs: MINUTE } }
  const { clock, limiter } = make(options)
  limiter.tryConsume('a')
  assert.equal(limiter.tryConsume('a').retryAfterBasis, 'block')
  clock.advance(100)
  limiter.tryConsume('b')
  clock.advance(100)
  limiter.tryConsume('c')
  assert.equal(limiter.delete('b'), false, 'b was dropped, a was not')
  assert.equal(limiter.status('a').blockedForMs, MINUTE - 200)
  const { limiter: restored } = make({ ...options, restore: limiter.snapshot() })
  restored.tryConsume('d')
  restored.tryConsume('e')
  assert.equal(restored.status('a').blockedForMs, MINUTE - 200)
  assert.equal(restored.delete('a'), true, 'the restored block holds a')
})

test('the idle sweep never drops a blocked key', () => {
  const { clock, limiter } = make({ capacity: 5, refillPerSecond: 1000, maxKeys: 400 })
  limiter.block('a', MINUTE)
  for (let i = 0; i < 400; i++) {
    limiter.tryConsume(`k${i}`)
    clock.advance(10)
  }
  assert.ok(limiter.size < 300, `idle keys were swept (${limiter.size} held)`)
  assert.equal(limiter.delete('a'), true, 'a is still held')
})

test('snapshot carries each block\'s time left and each key\'s level in format version 2; version 1 is still read', () => {
  const { clock, limiter } = make({ capacity: 5 })
  for (let i = 0; i < 5; i++) limiter.tryConsume('k')
  deny(limiter, 'k', 5)
  clock.advance(20_000)
  limiter.block('m', 30_000)
  const image = limiter.snapshot()
  assert.equal(Buffer.from(image).readUInt16LE(4), 2)
  const later = manualClock({ monotonicMs: 5_000_000, wallMs: NOON })
  const { limiter: back } = make({ capacity: 5, clock: later, restore: image })
  assert.equal(back.status('k').blockedForMs, 40_000)
  assert.equal(back.status('m').blockedForMs, 30_000)
  later.advance(40_000)
  assert.equal(deny(back, 'k', 5)[4].retryAfterMs, 10 * MINUTE, 'the level came back')
  // A version-1 image: the keys' part of a version-2 one.
  const bytes = Buffer.from(image)
  const v1 = bytes.subarray(12, 12 + bytes.readUInt32LE(8))
  assert.equal(v1.readUInt16LE(4), 1)
  const { limiter: old } = make({ capacity: 5, refillPerSecond: 0.000001, restore: new Uint8Array(v1) })
  assert.equal(old.size, 2, 'k, and m, which its block held')
  assert.equal(old.status('k').blockedForMs, 0)
  // Corrupt, truncated and unknown versions are refused naming restore.
  const corrupt = Buffer.from(image)
  corrupt[corrupt.length - 10] ^= 1
  assert.throws(() => make({ restore: new Uint8Array(corrupt) }), (e) => e.code === 'ERR_INVALID_OPTION' && /restore/.test(e.message))
  assert.throws(() => make({ restore: new Uint8Array(bytes.subarray(0, 20)) }), (e) => e.code === 'ERR_INVALID_OPTION' && /restore/.test(e.message))
  const v3 = Buffer.from(image)
  v3.writeUInt16LE(3, 4)
  assert.throws(() => make({ restore: new Uint8Array(v3) }), (e) => e.code === 'ERR_INVALID_OPTION' && /version 3/.test(e.message))
})

test('stats: blocked is of denied, the calls a block denied; blocks counts blocks started', () => {
  const { limiter } = make()
  limiter.tryConsume('k')
  deny(limiter, 'k', 5)
  deny(limiter, 'k', 3)
  const stats = limiter.stats()
  assert.equal(stats.allowed, 1)
  assert.equal(stats.denied, 8)
  assert.equal(stats.blocked, 4, 'the denial that started it and the three after')
  assert.equal(stats.blocks, 1)
})

test('a shared limiter: a blocked key is denied by consume with no store call; tryConsume still refuses', async () => {
  const t = testStore()
  const { limiter } = sharedLimiter(t)
  assert.equal((await limiter.consume('k')).allowed, true)
  limiter.block('k', MINUTE)
  const calls = limiter.stats().store.calls
  const d = await limiter.consume('k', 50)
  assert.deepEqual([d.allowed, d.retryAfterBasis, d.retryAfterMs], [false, 'block', MINUTE])
  assert.equal(limiter.stats().store.calls, calls, 'no store call for the blocked key')
  assert.throws(() => limiter.tryConsume('k'), isCode(TypeError, 'ERR_SHARED_ASYNC'))
  await limiter.close()
})

test('a shared limiter counts consume denials toward a block', async () => {
  const t = testStore()
  const { limiter } = sharedLimiter(t, {}, { quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC' } }, block: { after: 2, withinMs: MINUTE, forMs: MINUTE } })
  assert.equal((await limiter.consume('k')).allowed, true)
  assert.notEqual((await limiter.consume('k')).retryAfterBasis, 'block')
  const second = await limiter.consume('k')
  assert.equal(second.allowed, false)
  assert.equal(limiter.status('k').blockedForMs, MINUTE)
  await limiter.close()
})

// ---------------------------------------------------------------------------------------------
// With share: fleet-wide (the in-process test store; the Redis and MongoDB stores in
// share-blocks.test.js)

const tick = () => new Promise((resolve) => setImmediate(resolve))

test('with share, a block is written to the store in the background and honoured by another instance from its next store call', async () => {
  const t = testStore()
  const { limiter: a } = sharedLimiter(t, { leaseUnits: 1 })
  const { limiter: b } = sharedLimiter(t, { leaseUnits: 1 })
  assert.equal((await b.consume('k')).allowed, true)
  assert.equal(a.block('k', MINUTE), undefined, 'block does not wait')
  await tick()
  assert.equal(t.blockLeft('api', 'k'), MINUTE)
  const reserves = t.calls.reserve.length
  const d = await b.consume('k', 2) // not covered: its store call answers the block
  assert.ok(t.calls.reserve.length > reserves)
  assert.equal(t.calls.blockRead.length, 0, 'the block came with the reservation, no call of its own')
  assert.deepEqual([d.allowed, d.retryAfterBasis], [false, 'block'])
  assert.equal(b.status('k').blockedForMs, MINUTE)
  const calls = b.stats().store.calls
  assert.equal((await b.consume('k')).retryAfterBasis, 'block')
  assert.equal(b.stats().store.calls, calls, 'denied locally')
  await a.close()
  await b.close()
})

test('with share, an unblock is seen by another instance within a second: the store is asked again at most once a second while the key is called', async () => {
  const t = testStore()
  const { limiter: a } = sharedLimiter(t, { leaseUnits: 1 })
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const { limiter: b } = sharedLimiter(t, { leaseUnits: 1 }, { clock })
  a.block('k', MINUTE)
  await tick()
  assert.equal((await b.consume('k')).retryAfterBasis, 'block')
  assert.equal(a.unblock('k'), true)
  await tick()
  assert.equal(t.blockLeft('api', 'k'), 0)
  const reads = t.calls.blockRead.length
  for (let i = 0; i < 5; i++) assert.equal((await b.consume('k')).retryAfterBasis, 'block', 'within the second, denied locally')
  assert.equal(t.calls.blockRead.length, reads, 'asked at most once a second')
  clock.advance(1000)
  assert.equal((await b.consume('k')).retryAfterBasis, 'block', 'this call asks again, in the background')
  assert.equal(t.calls.blockRead.length, reads + 1)
  await tick()
  assert.equal((await b.consume('k')).allowed, true, 'the unblock is seen')
  await a.close()
  await b.close()
})

test("with share, the call whose store call brings the block is the block's denial, whatever the quota said; stats count it once", async () => {
  const t = testStore()
  const operator = storeOperations(t.store)
  const { limiter, clock } = sharedLimiter(t, { leaseUnits: 1 }, { quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC' } } })
  assert.equal((await limiter.consume('k')).allowed, true)
  await operator.blockSet({ name: 'api', key: 'k', forMs: MINUTE, resetAfterMs: 86_400_000 })
  clock.advance(2000) // past the second a key the store found exhausted is denied without a store call
  const calls = limiter.stats().store.calls
  const d = await limiter.consume('k')
  assert.equal(limiter.stats().store.calls, calls + 1, 'the call asked the store')
  assert.deepEqual([d.allowed, d.retryAfterBasis, d.retryAfterMs], [false, 'block', MINUTE], 'the quota is spent too, but the key is blocked')
  // Another key's call the store's answer allows, then the block denies (refunded).
  const { limiter: other } = sharedLimiter(t, { leaseUnits: 1 })
  assert.equal((await other.consume('j')).allowed, true)
  await operator.blockSet({ name: 'api', key: 'j', forMs: MINUTE, resetAfterMs: 86_400_000 })
  assert.equal((await other.consume('j', 2)).retryAfterBasis, 'block')
  const stats = other.stats()
  assert.deepEqual([stats.allowed, stats.denied, stats.blocked, stats.blocks], [1, 1, 1, 0], 'the call the block denied is counted once, as denied; the block was not started here')
  assert.deepEqual([limiter.stats().allowed, limiter.stats().denied, limiter.stats().blocked], [1, 1, 1])
  await limiter.close()
  await other.close()
})

// A fleet bucket (share.bucket): capacity 10, no quota.
const fleetBucket = (t, options = {}) => sharedLimiter(t, { bucket: true, leaseMs: 10_000 }, { capacity: 10, refillPerSecond: 1, quota: undefined, ...options })

test('with share.bucket, a block made by another instance is honoured from the next take, which answers it in its own call', async () => {
  const t = testStore()
  const { limiter: a } = fleetBucket(t)
  const { limiter: b } = fleetBucket(t)
  assert.equal((await b.consume('k')).allowed, true)
  a.block('k', MINUTE)
  await tick()
  assert.equal(t.blockLeft('api', 'k'), MINUTE)
  const takes = t.calls.bucketTake.length
  let admitted = 0
  let d
  while ((d = await b.consume('k')).allowed) admitted++
  assert.ok(admitted < 10, `at most what its slice held: ${admitted}`)
  assert.ok(t.calls.bucketTake.length > takes, 'the take that found the block')
  assert.equal(t.calls.blockRead.length, 0, 'the block came with the take, no call of its own')
  assert.deepEqual([d.allowed, d.retryAfterBasis, d.retryAfterMs], [false, 'block', MINUTE])
  assert.equal(b.status('k').blockedForMs, MINUTE)
  const calls = b.stats().store.calls
  for (let i = 0; i < 5; i++) assert.equal((await b.consume('k')).retryAfterBasis, 'block')
  assert.equal(b.stats().store.calls, calls, 'denied locally')
  await a.close()
  await b.close()
})

test("with share.bucket, an operator's block in the store is honoured from the next take, and its lifting seen within a second", async () => {
  const t = testStore()
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const { limiter } = fleetBucket(t, { clock })
  assert.equal((await limiter.consume('k', 10)).allowed, true, 'the slice spent whole')
  const operator = storeOperations(t.store)
  await operator.blockSet({ name: 'api', key: 'k', forMs: MINUTE, resetAfterMs: 86_400_000 })
  t.stepClock(5000)
  clock.advance(5000)
  const d = await limiter.consume('k')
  assert.deepEqual([d.allowed, d.retryAfterBasis], [false, 'block'])
  assert.deepEqual([limiter.stats().blocked, limiter.stats().blocks], [1, 0], "denied by the operator's block, which this process did not start")
  await operator.blockClear({ name: 'api', key: 'k' })
  const reads = t.calls.blockRead.length
  assert.equal((await limiter.consume('k')).retryAfterBasis, 'block', 'within the second, denied locally')
  assert.equal(t.calls.blockRead.length, reads)
  clock.advance(1000)
  assert.equal((await limiter.consume('k')).retryAfterBasis, 'block', 'this call asks again, in the background')
  assert.equal(t.calls.blockRead.length, reads + 1)
  await tick()
  assert.equal((await limiter.consume('k')).allowed, true, 'the lifting is seen')
  await limiter.close()
})

test('with share.bucket, a denial that starts an automatic block writes it to the store, and another instance honours it', async () => {
  const t = testStore()
  const block = { after: 2, withinMs: MINUTE, forMs: [5000, MINUTE] }
  const { limiter: a } = fleetBucket(t, { capacity: 1, block })
  const { limiter: b } = fleetBucket(t, { capacity: 1, block })
  assert.equal((await a.consume('k')).allowed, true)
  assert.equal((await a.consume('k')).allowed, false)
  assert.equal((await a.consume('k')).retryAfterBasis, 'block', 'the second denial starts the block')
  await tick()
  assert.equal(t.blockLeft('api', 'k'), 5000)
  t.stepClock(1000)
  const d = await b.consume('k')
  assert.deepEqual([d.allowed, d.retryAfterBasis], [false, 'block'], 'a refilled token, but the key is blocked fleet-wide')
  assert.equal(b.status('k').blockedForMs, 4000)
  await a.close()
  await b.close()
})

for (const shape of ['a shared quota', 'a fleet bucket']) {
  test(`with share (${shape}), a snapshot carries blocks and levels: a limiter restored from it denies the key with no store call, and sees the store's lifting within a second`, async () => {
    const t = testStore()
    const block = { after: 1, withinMs: MINUTE, forMs: [5000, MINUTE] }
    const open = (clock, restore) =>
      shape === 'a shared quota'
        ? sharedLimiter(t, { leaseUnits: 1 }, { clock, capacity: 1, block, restore })
        : fleetBucket(t, { clock, capacity: 1, block, restore })
    const { limiter: a } = open(manualClock({ monotonicMs: 0, wallMs: NOON }))
    assert.equal((await a.consume('k')).allowed, true)
    assert.equal((await a.consume('k')).retryAfterBasis, 'block', 'level 0: 5 s')
    a.block('m', 30_000)
    await tick()
    const image = a.snapshot()
    const later = manualClock({ monotonicMs: 9_000_000, wallMs: NOON })
    const { limiter: b } = open(later, image)
    assert.deepEqual([b.status('k').blockedForMs, b.status('m').blockedForMs], [5000, 30_000])
    const calls = t.calls.reserve.length + t.calls.bucketTake.length
    const reads = t.calls.blockRead.length
    const d = await b.consume('m')
    assert.deepEqual([d.allowed, d.retryAfterBasis, d.retryAfterMs], [false, 'block', 30_000])
    assert.equal(t.calls.reserve.length + t.calls.bucketTake.length, calls, 'no reservation or take for a blocked key')
    assert.ok(t.calls.blockRead.length - reads <= 1, 'at most the one ask of its first second')
    await storeOperations(t.store).blockClear({ name: 'api', key: 'm' })
    later.advance(1000)
    await b.consume('m') // asks again, in the background
    await tick()
    assert.equal((await b.consume('m')).allowed, true, "the store's lifting is seen")
    later.advance(5000)
    t.stepClock(6000)
    assert.equal((await b.consume('k')).allowed, true, "k's block over, here and in the store")
    const again = await b.consume('k')
    assert.deepEqual([again.retryAfterBasis, again.retryAfterMs], ['block', MINUTE], 'its level came back with the snapshot: level 1')
    await a.close()
    await b.close()
  })
}

test('with share, the level is the fleet\'s: an automatic block escalates from the level the store has', async () => {
  const t = testStore()
  const block = { after: 1, withinMs: MINUTE, forMs: [1000, 5000, 9000] }
  const bucket = { capacity: 1, refillPerSecond: 1 }
  const { limiter: a } = sharedLimiter(t, {}, { ...bucket, block })
  const { limiter: b } = sharedLimiter(t, {}, { ...bucket, block })
  assert.equal((await a.consume('k')).allowed, true)
  assert.equal((await a.consume('k')).retryAfterMs, 1000, "a's first block: level 0")
  await tick()
  t.stepClock(1000)
  assert.equal((await b.consume('k')).allowed, true)
  const d = await b.consume('k')
  assert.deepEqual([d.retryAfterBasis, d.retryAfterMs], ['block', 5000], "the denial that starts b's block answers with the fleet's level 1, not b's own 0")
  await tick()
  assert.equal(t.blockLeft('api', 'k'), 5000, "b's block is the fleet's level 1")
  assert.equal(b.status('k').blockedForMs, 5000)
  await a.close()
  await b.close()
})

test("with share, the denial that starts a block answers with this process's block when the store's write fails, at once", async () => {
  const t = testStore()
  const block = { after: 1, withinMs: MINUTE, forMs: [1000, 5000] }
  const { limiter } = sharedLimiter(t, { leaseUnits: 1 }, { capacity: 1, refillPerSecond: 1, block })
  assert.equal((await limiter.consume('k')).allowed, true)
  t.control.mode = 'fail'
  const d = await limiter.consume('k')
  assert.deepEqual([d.allowed, d.retryAfterBasis, d.retryAfterMs], [false, 'block', 1000])
  assert.equal(limiter.stats().store.errors, 1, 'the write failed')
  t.control.mode = 'ok'
  await limiter.close()
})

test('block holds a key the limiter does not hold: size counts it, its status is a held key\'s, a later call finds it blocked', async () => {
  const { limiter } = make({ capacity: 5, refillPerSecond: 1 })
  assert.equal(limiter.size, 0)
  limiter.block('new', MINUTE)
  assert.equal(limiter.size, 1, 'held')
  assert.equal(limiter.status('new').tokens, 5, 'its bucket untouched')
  assert.equal(limiter.stats().allowed + limiter.stats().denied, 0, 'holding it decided nothing')
  assert.equal(limiter.delete('new'), true, 'delete finds it (and ends the block)')
  assert.equal(limiter.tryConsume('new').allowed, true)
  const t = testStore()
  const { limiter: shared } = sharedLimiter(t)
  shared.block('fresh', MINUTE)
  assert.equal(shared.size, 1, 'a shared limiter holds it too')
  assert.equal((await shared.consume('fresh')).retryAfterBasis, 'block')
  await shared.close()
})

test('with share, denials are counted in each process: two processes denied under `after` times each start no block', async () => {
  const t = testStore()
  const options = { capacity: 1, refillPerSecond: 0.001, block: { after: 3, withinMs: MINUTE, forMs: MINUTE } }
  const { limiter: a } = sharedLimiter(t, {}, options)
  const { limiter: b } = sharedLimiter(t, {}, options)
  assert.equal((await a.consume('k')).allowed, true)
  assert.equal((await b.consume('k')).allowed, true)
  for (const limiter of [a, b, a, b]) assert.notEqual((await limiter.consume('k')).retryAfterBasis, 'block')
  await tick()
  assert.equal(t.blockLeft('api', 'k'), 0, 'four denials, but two in each process')
  assert.equal((await a.consume('k')).retryAfterBasis, 'monotonic-refill', "a's third denial: its own wait is longer")
  await tick()
  assert.equal(t.blockLeft('api', 'k'), MINUTE, "a's third denial blocked the key fleet-wide")
  await a.close()
  await b.close()
})

test('with share, delete ends the block in this process only; the store and the others keep it', async () => {
  const t = testStore()
  const { limiter: a } = sharedLimiter(t, { leaseUnits: 1 })
  const { limiter: b } = sharedLimiter(t, { leaseUnits: 1 })
  a.block('k', MINUTE)
  await tick()
  assert.equal((await b.consume('k')).retryAfterBasis, 'block')
  assert.equal(b.delete('k'), true)
  assert.equal(b.status('k').blockedForMs, 0, 'ended here')
  assert.equal(a.status('k').blockedForMs, MINUTE, 'still blocked in the process that made it')
  assert.equal(t.blockLeft('api', 'k'), MINUTE, 'and in the store')
  assert.equal((await b.consume('k')).retryAfterBasis, 'block', 'its next store call for the key answers it again')
  await a.close()
  await b.close()
})

test('with share, a blocked key is never dropped to make room either', async () => {
  const t = testStore()
  const { limiter } = sharedLimiter(t, {}, { maxKeys: 2 })
  limiter.block('a', MINUTE)
  assert.equal((await limiter.consume('b')).allowed, true)
  await assert.rejects(limiter.consume('c'), isCode(QuotaClockError, 'ERR_KEY_LIMIT'))
  assert.equal(limiter.size, 2)
  assert.equal(limiter.unblock('a'), true)
  assert.equal((await limiter.consume('c')).allowed, true, 'a, unblocked and idle, makes room')
  assert.equal(limiter.delete('a'), false)
  await limiter.close()
})
