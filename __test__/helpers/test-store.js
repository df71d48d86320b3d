'use strict'
// An in-process quota store: a real implementation of the store protocol (lib/share/protocol.js)
// over a Map, for the shared limiter's unit tests, with switches to make it fail, hang or answer
// late. The Redis and MongoDB stores have tests of their own against real servers.

const { KeyedQuotaClock, manualClock } = require('../..')
const { makeQuotaStore, checkReserveAnswer, checkBlockAnswer, checkBucketAnswer, checkBucketUsage, newRecordId, writeOffAfterMs, bucketKeptMs, hungerMs, SHARE_REFILL_MS } = require('../../lib/share/protocol.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }

/**
 * A KeyedQuotaClock shared through testStore `t` under the name 'api': capacity 1000, 1 token a
 * second, suspendPolicy 'ignore', a quota of 100 a UTC day, on a manual clock at noon of
 * 2024-01-15, unless `options` says otherwise; `share` adds to its share options.
 */
function sharedLimiter(t, share = {}, options = {}) {
  const clock = options.clock ?? manualClock({ monotonicMs: 0, wallMs: NOON })
  const limiter = new KeyedQuotaClock({
    capacity: 1_000,
    refillPerSecond: 1,
    suspendPolicy: 'ignore',
    clock,
    quota: { limit: 100, period: UTC_DAY },
    ...options,
    share: { store: t.store, name: 'api', ...share },
  })
  return { clock, limiter }
}

const bucketId = (name, key) => JSON.stringify(['bucket', name, key])
const writeOffAt = (holder) => holder.a + writeOffAfterMs(holder.l)
const outOf = (record, except) => {
  let sum = 0
  for (const [y, holder] of record.holders) if (y !== except) sum += holder.o
  return sum
}

/**
 * Step 4 of bucketTake (lib/share/protocol.js): others past their margin at the fleet clock,
 * moved there from `before`, get one more margin, once, when the move passed it at once; otherwise
 * they are written off, spent for good.
 */
function writeOff(record, except, before = record.F) {
  let gone = 0
  let goneUntil = -Infinity
  for (const [y, holder] of record.holders) {
    if (y === except || writeOffAt(holder) >= record.F) continue
    if (record.F - before > writeOffAfterMs(holder.l) && !holder.e) {
      record.holders.set(y, { ...holder, a: record.F, e: true })
      continue
    }
    gone += holder.o
    goneUntil = Math.max(goneUntil, writeOffAt(holder))
    record.holders.delete(y)
  }
  return { gone, goneUntil }
}

/** Step 7's share of a busy key: a quarter of the fair share, but not less than the refill of SHARE_REFILL_MS. */
const share = (fair, refillPerSecond) => Math.floor(Math.min(fair, Math.max(fair / 4, (refillPerSecond * SHARE_REFILL_MS) / 1000)))

/** bucketTake on a Map of records at store time now: lib/share/protocol.js's steps one by one. */
function bucketTakeNow(records, now, request) {
  const { name, key, capacity, refillPerSecond, instance: me, leaseMs, want, more, held, give, charge, fleetMs, recordId, most = 0, spentMs = 0 } = request
  let record = records.get(bucketId(name, key))
  let created = false
  if (record === undefined || record.expiresAtMs <= now) {
    const id = request.newId ?? newRecordId()
    record = { C: capacity, R: refillPerSecond, tk: recordId !== 0 ? 0 : capacity, F: 0, S: now, id, holders: new Map(), hungry: new Map() }
    records.set(bucketId(name, key), record)
    created = true
  }
  const lost = recordId !== 0 && (created || record.id !== recordId)
  const byStore = record.F + Math.max(0, now - record.S)
  const byCaller = fleetMs >= 0 && !lost ? fleetMs : record.F + (record.C / record.R) * 1000
  const moved = Math.max(record.F, Math.min(byStore, byCaller))
  const before = record.F
  record.F = moved
  record.S = now
  const { gone, goneUntil } = writeOff(record, me, before)
  const mine = record.holders.get(me)
  const prev = lost ? 0 : (mine?.o ?? 0)
  const keep = Math.min(held, prev)
  const back = Math.min(give, prev - keep)
  // The refill, piece by piece: X's slice counts as out in full until it was last spent from
  // (spentMs before now), what X keeps and gives back until now; the slices written off now
  // until their margin passed. Then what X gives back, under C minus what is out.
  const others = outOf(record, me)
  const clamp = (at) => Math.min(moved, Math.max(before, at))
  const spentUntil = clamp(moved - spentMs)
  const writtenUntil = clamp(goneUntil)
  // (Both marks are within [before, moved]: the pieces are before, the nearer mark, the other, moved.)
  const points = [before, Math.min(spentUntil, writtenUntil), Math.max(spentUntil, writtenUntil), moved]
  for (let i = 0; i < 3; i++) {
    const [from, to] = [points[i], points[i + 1]]
    if (!(to > from)) continue
    const room = record.C - others - (from < writtenUntil ? gone : 0) - (from < spentUntil ? prev : keep + back)
    if (record.tk < room) record.tk = Math.min(room, record.tk + ((to - from) * record.R) / 1000)
  }
  record.tk = Math.min(record.C - others - keep, record.tk + back)
  // Step 5b, a plan change: refilled at the old rate up to now, what was used stays used.
  if (record.C !== capacity || record.R !== refillPerSecond) {
    record.tk = Math.min(capacity - others - keep, record.tk + capacity - record.C)
    record.C = capacity
    record.R = refillPerSecond
  }
  record.tk -= charge
  const k = [...record.holders].filter(([y, holder]) => y !== me && holder.o > 0).length
  for (const [y, until] of record.hungry) if (y !== me && until < record.F) record.hungry.delete(y)
  const hungry = [...record.hungry.keys()].filter((y) => y !== me)
  const sharing = k + hungry.filter((y) => !(record.holders.get(y)?.o > 0)).length
  const least = more > 0 ? Math.max(want, 1) : want
  let granted = 0
  if (record.tk >= least) granted = least + (more === 0 ? 0 : more === 1 ? share(Math.min((record.tk - least) / (sharing + 1), record.C / (sharing + 2)), record.R) : Math.floor((record.tk - least) / (hungry.length + 1)))
  if (most > 0 && granted > Math.max(least, most)) granted = Math.max(least, most)
  record.tk -= granted
  if ((least > 0 && granted === 0) || (granted > 0 && record.tk < 1)) record.hungry.set(me, record.F + hungerMs(leaseMs, record.C, record.R, record.tk))
  else record.hungry.delete(me)
  const slice = keep + granted
  // (A take the asking call spends at once, spend, is not recorded.)
  const recorded = request.spend ? keep : slice
  if (recorded > 0) record.holders.set(me, { o: recorded, a: record.F, l: leaseMs })
  else record.holders.delete(me)
  let longest = leaseMs
  for (const holder of record.holders.values()) longest = Math.max(longest, holder.l)
  record.expiresAtMs = now + bucketKeptMs(record.C, record.R, longest)
  return { granted, held: slice, tokens: record.tk, fleetMs: record.F, storeNowMs: now, recordId: record.id, others: k }
}

/** The operator's view of a bucket record (lib/share/protocol.js): what bucketRead and bucketFill answer. */
function bucketView(record, tokens, out) {
  return { capacity: record.C, refillPerSecond: record.R, tokens, out, expiresAt: Math.ceil(record.expiresAtMs) }
}

/** bucketRead at store time now: moves nothing. */
function bucketReadNow(records, now, { name, key }) {
  const record = records.get(bucketId(name, key))
  if (record === undefined || record.expiresAtMs <= now) return null
  const at = record.F + Math.min(Math.max(0, now - record.S), (record.C / record.R) * 1000)
  let out = 0
  for (const holder of record.holders.values()) if (writeOffAt(holder) >= at) out += holder.o
  const tokens = record.tk >= record.C - out ? record.tk : Math.min(record.C - out, record.tk + ((at - record.F) * record.R) / 1000)
  return bucketView(record, tokens, out)
}

/** bucketFill at store time now: the slices past their margin written off (F not moved), tk = C - out. */
function bucketFillNow(records, now, { name, key }) {
  const record = records.get(bucketId(name, key))
  if (record === undefined || record.expiresAtMs <= now) return null
  writeOff(record, undefined)
  record.tk = record.C - outOf(record)
  return bucketView(record, record.tk, outOf(record))
}

/**
 * `testStore()` → { store, records, calls, control }. `control.mode`: 'ok' | 'fail' | 'hang';
 * `control.delayMs`: answer after that long; `control.failWith`: what a failing call rejects with;
 * `control.answer`: replaces a reserve or bucket answer (to test nonsense
 * answers). `release()` answers every hung call.
 *
 * The fleet bucket's operations (bucketTake, bucketRead, bucketFill) run lib/share/protocol.js's
 * steps on records of their own (`bucket(name, key)` shows one), timed by the store's clock: `nowMs` (settable; starts at
 * noon of 2024-01-15), moved by `stepClock(ms)` (forwards or back). The switches apply to them too.
 */
function testStore() {
  const records = new Map()
  const calls = { reserve: [], giveBack: [], bucketTake: [], bucketRead: [], bucketFill: [], blockSet: [], blockClear: [], blockRead: [] }
  // (name, key) -> { until, level, ended } on the store's clock (blocks: lib/share/protocol.js).
  const blocks = new Map()
  const blockOf = (name, key) => blocks.get(JSON.stringify([name, key]))
  const blockLeft = (name, key) => Math.max(0, (blockOf(name, key)?.until ?? 0) - clock.nowMs)
  const hung = []
  const control = { mode: 'ok', delayMs: 0, failWith: new Error('store down'), answer: undefined }
  const clock = { nowMs: NOON }

  const id = (name, key, periodId) => JSON.stringify([name, key, periodId])

  function reserveNow({ name, key, periodId, limit, leaseUnits, lacking, charge, expiresAtMs }) {
    const record = records.get(id(name, key, periodId)) ?? { count: 0, expiresAtMs }
    record.count += charge
    const room = Math.max(0, limit - record.count)
    const want = Math.max(lacking, Math.min(leaseUnits, Math.ceil(room / 8)))
    const granted = room >= want ? want : 0
    record.count += granted
    record.expiresAtMs = expiresAtMs
    records.set(id(name, key, periodId), record)
    const blockedMs = blockLeft(name, key)
    return { granted, unreserved: room - granted, ...(blockedMs > 0 ? { blockedMs } : {}) }
  }

  function blockSetNow({ name, key, forMs, levels, resetAfterMs }) {
    const now = clock.nowMs
    const record = blockOf(name, key) ?? { until: 0, level: 0, ended: 0 }
    let ms = forMs
    if (levels !== undefined) {
      if (now - record.ended >= resetAfterMs) record.level = 0
      ms = levels[record.level]
      record.level = Math.min(record.level + 1, levels.length - 1)
    }
    record.until = Math.max(record.until, now + ms)
    record.ended = Math.max(record.ended, record.until)
    blocks.set(JSON.stringify([name, key]), record)
    return { blockedMs: record.until - now, level: record.level }
  }

  function giveBackNow({ name, key, periodId, units }) {
    const record = records.get(id(name, key, periodId))
    if (record !== undefined) record.count = Math.max(0, record.count - units)
  }

  /** Runs `work` as the current mode says, at call time or (delayed, hung) later. */
  function answer(work) {
    const mode = control.mode
    if (mode === 'fail') return Promise.reject(control.failWith)
    return new Promise((resolve, reject) => {
      const run = () => {
        try {
          resolve(work())
        } catch (error) {
          reject(error)
        }
      }
      if (mode === 'hang') hung.push(run)
      else if (control.delayMs > 0) setTimeout(run, control.delayMs)
      else queueMicrotask(run)
    })
  }

  const store = makeQuotaStore('redis', {
    reserve(request) {
      calls.reserve.push({ ...request })
      return answer(() => checkReserveAnswer(control.answer !== undefined ? control.answer : reserveNow(request), request))
    },
    giveBack(request) {
      calls.giveBack.push({ ...request })
      return answer(() => giveBackNow(request))
    },
    blockSet(request) {
      calls.blockSet.push({ ...request })
      return answer(() => checkBlockAnswer(blockSetNow(request), request.name))
    },
    blockClear(request) {
      calls.blockClear.push({ ...request })
      return answer(() => {
        const blockedMs = blockLeft(request.name, request.key)
        blocks.delete(JSON.stringify([request.name, request.key]))
        return checkBlockAnswer({ blockedMs, level: 0 }, request.name)
      })
    },
    blockRead(request) {
      calls.blockRead.push({ ...request })
      return answer(() => checkBlockAnswer({ blockedMs: blockLeft(request.name, request.key), level: blockOf(request.name, request.key)?.level ?? 0 }, request.name))
    },
    bucketTake(request) {
      calls.bucketTake.push({ ...request })
      return answer(() => {
        if (control.answer !== undefined) return checkBucketAnswer(control.answer, request)
        // The key's block comes with the take, as with a reservation.
        const blockedMs = blockLeft(request.name, request.key)
        return checkBucketAnswer({ ...bucketTakeNow(records, clock.nowMs, request), ...(blockedMs > 0 ? { blockedMs } : {}) }, request)
      })
    },
    bucketRead(request) {
      calls.bucketRead.push({ ...request })
      return answer(() => checkBucketUsage(control.answer !== undefined ? control.answer : bucketReadNow(records, clock.nowMs, request), request.name))
    },
    bucketFill(request) {
      calls.bucketFill.push({ ...request })
      return answer(() => checkBucketUsage(control.answer !== undefined ? control.answer : bucketFillNow(records, clock.nowMs, request), request.name))
    },
  })

  return {
    store,
    records,
    calls,
    control,
    /** The block left of (name, key) by the store's clock (0: none). */
    blockLeft,
    /** The store's count for (name, key, periodId), 0 if none. */
    count: (name, key, periodId) => records.get(id(name, key, periodId))?.count ?? 0,
    release() {
      for (const run of hung.splice(0)) run()
    },
    /** The store's clock (ms since the epoch, fractional allowed). */
    get nowMs() {
      return clock.nowMs
    },
    set nowMs(value) {
      clock.nowMs = value
    },
    /** Moves the store's clock by ms (negative: back). */
    stepClock(ms) {
      clock.nowMs += ms
    },
    /** The bucket record of (name, key) as { C, R, tk, F, S, id, expiresAtMs, holders: Map(X → { o, w, a, l }) }, or undefined. */
    bucket: (name, key) => records.get(bucketId(name, key)),
  }
}

module.exports = { testStore, sharedLimiter, bucketTakeNow, bucketReadNow, bucketFillNow }
