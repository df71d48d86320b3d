'use strict'
// The native cell book of share.bucket, driven directly through the binding as the JS
// driver (lib/share-cells.js) drives it: one acquire / credit / consume / tick / renewed cycle on a
// manualClock limiter, the statuses and shapes each call answers, and bad arguments refused with
// coded errors.
const test = require('node:test')
const assert = require('node:assert/strict')

const native = require('../lib/native.js')
const { manualClock } = require('..')
const { parseOptions } = require('../lib/options.js')
const { KeyedTable } = require('../lib/keyed-table.js')
const { readStats } = require('../lib/stats.js')
const { AT, OPERATION, STATUS } = require('../lib/contract.js')
const { cellsTable: table, stepTheStoreClock, waitFor } = require('./helpers/cells-table.js')

/** One shared consume as the driver makes it: the number -1 (needs cells) or a decision. */
function consume(keyed, key, n, operation = OPERATION.sharedConsume) {
  keyed.result[0] = n
  keyed.result[AT.operation] = operation
  keyed.call(key)
  return keyed.settle(key, n, operation)
}

test('the contract has the needsCells status, distinct from the others', () => {
  assert.equal(typeof STATUS.needsCells, 'number')
  const statuses = Object.values(STATUS)
  assert.equal(new Set(statuses).size, statuses.length)
})

test('one cycle: needs cells, request, credit, consume, status, tick, renewed, urgent give-back, release all', () => {
  const { keyed, clock } = table()
  const handle = keyed.handle
  assert.equal(native.keyedCellsHolds(handle), false)
  assert.equal(consume(keyed, 'a', 1), -1, 'a new key holds no cell: settle answers -1')
  assert.equal(native.keyedCellsRequest(handle, 'nobody'), null, 'a key not held')

  const request = native.keyedCellsRequest(handle, 'a')
  assert.deepEqual(request, { capacity: 10, refillPerSecond: 2, initial: 10, held: 0, recordId: 0, sentMs: 0 })

  clock.advance(20)
  const answer = { granted: 10, tokens: 10, held: 10, fair: 10, waiting: 0, recordId: 5, storeNowMs: 1.7e12 }
  assert.equal(native.keyedCellsCredit(handle, 'a', request.sentMs, answer), true)
  const decision = consume(keyed, 'a', 3, OPERATION.sharedAfterStore)
  assert.equal(decision.allowed, true)
  assert.equal(decision.tokens, 7)
  const status = keyed.status('a')
  assert.equal(status.cells, 10)
  assert.equal(status.tokens, 7)
  assert.equal(native.keyedCellsHolds(handle), true)

  // Holding every cell: a denial is local, with the whole bucket's wait.
  const denied = consume(keyed, 'a', 10)
  assert.equal(denied.allowed, false)
  assert.equal(denied.retryAfterBasis, 'monotonic-refill')
  assert.equal(denied.retryAfterMs, 1_500)

  clock.advance(1_000)
  const ticked = native.keyedCellsTick(handle, 60_000, false)
  assert.equal(ticked.length, 1)
  const [renewal] = ticked
  assert.ok(renewal.key instanceof Uint16Array)
  assert.equal(String.fromCharCode(...renewal.key), 'a')
  assert.deepEqual({ held: renewal.held, tokens: renewal.tokens, recordId: renewal.recordId }, { held: 10, tokens: 0, recordId: 5 })
  assert.equal(renewal.sentMs, 1_020)
  assert.deepEqual(native.keyedCellsTick(handle, 60_000, false), [], 'in flight')

  // Others wait; the fair share is 4: an urgent give-back of 6 cells with 6/10 of the tokens.
  const due = native.keyedCellsRenewed(handle, 'a', renewal.sentMs, { held: 10, waiting: 1, fair: 4 }, 1.7e12 + 1_000)
  assert.equal(due, true)
  assert.equal(consume(keyed, 'a', 1).allowed, true)
  // Used since the last tick: it keeps its fair share (unused, every cell would go).
  const urgent = native.keyedCellsTick(handle, 60_000, true)
  assert.equal(urgent.length, 1)
  assert.equal(urgent[0].held, 4)
  assert.ok(Math.abs(urgent[0].tokens - 8 * 0.6) < 1e-9, `tokens ${urgent[0].tokens}`)
  assert.equal(keyed.status('a').cells, 4, 'cells drop at send time')
  native.keyedCellsRenewFailed(handle, 'a')
  // (waiting may come as a boolean too.)
  assert.equal(native.keyedCellsRenewed(handle, 'a', urgent[0].sentMs, { held: 4, waiting: true, fair: 4 }, 1.7e12 + 1_000), false)

  const all = native.keyedCellsReleaseAll(handle)
  assert.equal(all.length, 1)
  assert.equal(all[0].held, 0)
  assert.equal(native.keyedCellsHolds(handle), false)
  assert.equal(keyed.status('a').cells, 0)
})

test('a key without a shared bucket has no cells in status', () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15) })
  const { limiterOptions, clockArgs } = parseOptions({ capacity: 10, refillPerSecond: 2, suspendPolicy: 'ignore', clock })
  const keyed = new KeyedTable({ limiterOptions, clockArgs, maxKeys: 10, listener: () => undefined, resolvePolicy: () => undefined })
  assert.equal('cells' in keyed.status('a'), false)
  assert.equal(native.keyedCellsRequest(keyed.handle, 'a'), null)
})

test('a store clock that steps raises store-clock-step: counted in stats and delivered to onAnomaly', async () => {
  const seen = []
  const { keyed, clock, owner } = table({ onAnomaly: (anomaly) => seen.push(anomaly) })
  consume(keyed, 'a', 1)
  stepTheStoreClock(keyed, clock, 'a')
  keyed.writeStats()
  assert.equal(readStats(keyed.result).anomalies['store-clock-step'], 1)
  assert.ok(await waitFor(() => seen.length > 0), 'delivered to onAnomaly')
  assert.equal(seen.length, 1, 'delivered to onAnomaly')
  const [anomaly] = seen
  assert.equal(anomaly.kind, 'store-clock-step')
  assert.equal(anomaly.wallDeltaMs, 65_000)
  assert.equal(anomaly.monotonicDeltaMs, 5_000)
  assert.equal(anomaly.creditedMs, 0)
  assert.equal(anomaly.stepMs, 60_000)
  assert.match(anomaly.detail, /store's clock/)
  assert.ok(owner)
})

test('bad arguments are coded errors, never a crash', () => {
  const { keyed } = table()
  const handle = keyed.handle
  consume(keyed, 'a', 1)
  const good = { granted: 1, tokens: 1, held: 1, fair: 1, waiting: 0, recordId: 1, storeNowMs: 1 }
  for (const [field, value] of [['granted', -1], ['tokens', Number.NaN], ['held', 1.5], ['storeNowMs', Infinity], ['recordId', 2 ** 53], ['waiting', 2]]) {
    assert.throws(() => native.keyedCellsCredit(handle, 'a', 0, { ...good, [field]: value }), (error) => error.code === 'ERR_INVALID_ARG' && error.message.includes(field))
  }
  assert.throws(() => native.keyedCellsCredit(handle, 'a', Number.NaN, good), { code: 'ERR_INVALID_ARG' })
  assert.throws(() => native.keyedCellsCredit(handle, 42, 0, good), { code: 'ERR_INVALID_ARG' })
  assert.throws(() => native.keyedCellsCredit(handle, 'a', 0, { granted: 1 }))
  assert.throws(() => native.keyedCellsTick(handle, -1, false), { code: 'ERR_INVALID_ARG' })
  assert.throws(() => native.keyedCellsRenewed(handle, 'a', 0, { held: -2, waiting: 0, fair: 1 }, 1), { code: 'ERR_INVALID_ARG' })
  assert.throws(() => native.keyedCellsRequest({}, 'a'))
})

test('a shared bucket needs an integer capacity from 1 to 2**31 and leaseMs from 1000 to 600000', () => {
  for (const capacity of [1.5, 2 ** 31 + 1]) {
    assert.throws(() => table({ capacity }), (error) => error.code === 'ERR_INVALID_OPTION' && /capacity/.test(error.message) && /share\.bucket/.test(error.message))
  }
  assert.ok(table({ capacity: 2 ** 31 }))
  const clock = manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 15) })
  const { limiterOptions, clockArgs } = parseOptions({ capacity: 10, refillPerSecond: 2, suspendPolicy: 'ignore', clock })
  for (const leaseMs of [999, 600_001, 1_500.5]) {
    assert.throws(
      () => new KeyedTable({ limiterOptions, clockArgs, maxKeys: 10, listener: () => undefined, share: { bucket: true, leaseMs }, resolvePolicy: () => undefined }),
      (error) => error.code === 'ERR_INVALID_OPTION' && /share\.leaseMs/.test(error.message),
    )
  }
})

test("every KeyPolicy's capacity is checked for a shared bucket, naming the policy", () => {
  const policyOf = (capacity) => () => ({ capacity, refillPerSecond: 1, initialTokens: capacity, path: 'policy("a")' })
  const { keyed } = table({ resolvePolicy: policyOf(2.5) })
  assert.throws(
    () => consume(keyed, 'a', 1),
    (error) => error.code === 'ERR_INVALID_OPTION' && error.message.startsWith('policy("a").capacity') && /share\.bucket/.test(error.message),
  )
  assert.throws(() => keyed.status('a'), { code: 'ERR_INVALID_OPTION' })
  assert.equal(keyed.size, 0, 'nothing held')
  const { keyed: whole } = table({ resolvePolicy: policyOf(3) })
  assert.equal(consume(whole, 'a', 1), -1)
  assert.equal(native.keyedCellsRequest(whole.handle, 'a').capacity, 3)
})

