'use strict'

// Shared per-key limits (the @nodedk/throttle API). One suite, two stores: memoryDb() and a real
// MongoDB wire-compatible server reached through the official driver. The server tests fail (they
// never skip) when the server cannot be started.

const assert = require('node:assert/strict')
const path = require('node:path')
const { pathToFileURL } = require('node:url')
const { describe, it, before, after } = require('node:test')
const { MongoClient } = require('mongodb')

const { createThrottle, memoryDb } = require('../lib/throttle/index.js')
const { MemoryDbError } = require('../lib/throttle/memory-db.js')
const { startMongoServer } = require('./helpers/mongo-server.js')

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

function at(iso) {
  return Date.parse(iso)
}

/** A wall clock the test sets: `{ wallMs(), set(iso | ms), advance(ms) }`. */
function fakeClock(start) {
  let ms = typeof start === 'string' ? at(start) : start
  return {
    wallMs: () => ms,
    set(to) {
      ms = typeof to === 'string' ? at(to) : to
    },
    advance(delta) {
      ms += delta
    },
  }
}

/** Wraps a db and records every collection() and collection method call, in order. */
function spyDb(db) {
  const calls = []
  return {
    calls,
    db: {
      collection(name) {
        calls.push(`collection(${name})`)
        const target = db.collection(name)
        return new Proxy(target, {
          get(obj, prop) {
            const value = Reflect.get(obj, prop, obj)
            if (typeof value !== 'function') return value
            return (...args) => {
              calls.push(String(prop))
              return value.apply(obj, args)
            }
          },
        })
      },
    },
  }
}

// Reads a document through the only methods both stores share: a harmless $set that returns it.
async function readDoc(db, _id) {
  return db.collection('throttle').findOneAndUpdate({ _id }, { $set: { read_by_test: true } }, { returnDocument: 'after' })
}

async function checkMany(throttle, key, limits, count) {
  const results = []
  for (let i = 0; i < count; i++) results.push(await throttle.check(key, limits))
  return results
}

function allowedCount(results) {
  return results.filter((r) => r.allowed).length
}

async function rejectsWithCode(promiseOrFn, ErrorClass, code) {
  await assert.rejects(promiseOrFn, (err) => {
    assert.ok(err instanceof ErrorClass, `expected ${ErrorClass.name}, got ${err && err.name}: ${err && err.message}`)
    assert.equal(err.code, code)
    return true
  })
}

// ---------------------------------------------------------------------------------------------
// The stores. Each provides fresh, isolated databases and, for one database, several clients.

function memoryStore() {
  return {
    name: 'memoryDb()',
    realServer: false,
    async setup() {},
    async teardown() {},
    /** A fresh database; `serverClock` plays the server's clock for '$$NOW'. */
    async freshDb({ serverClock } = {}) {
      const db = memoryDb(serverClock ? { clock: serverClock } : undefined)
      return { db, clients: async () => [db, db, db, db] }
    },
  }
}

function serverStore() {
  let server
  let mainClient
  let counter = 0
  const extraClients = []
  const dbNames = []
  return {
    name: 'MongoDB wire-compatible server (official driver)',
    realServer: true,
    async setup() {
      server = await startMongoServer()
      mainClient = new MongoClient(server.uri, { serverSelectionTimeoutMS: 10_000 })
      await mainClient.connect()
    },
    async teardown() {
      if (mainClient) {
        for (const name of dbNames) await mainClient.db(name).dropDatabase().catch(() => {})
      }
      await Promise.all([mainClient, ...extraClients].filter(Boolean).map((c) => c.close()))
      if (server) await server.stop()
    },
    async freshDb() {
      const name = `throttle_test_${process.pid}_${++counter}`
      dbNames.push(name)
      const db = mainClient.db(name)
      return {
        db,
        // Separate MongoClient instances (separate connection pools), as separate service instances have.
        async clients(n = 4) {
          const dbs = []
          for (let i = 0; i < n; i++) {
            const client = new MongoClient(server.uri, { serverSelectionTimeoutMS: 10_000 })
            await client.connect()
            extraClients.push(client)
            dbs.push(client.db(name))
          }
          return dbs
        },
      }
    },
  }
}

// ---------------------------------------------------------------------------------------------

function throttleSuite(store) {
  describe(`shared limits on ${store.name}`, () => {
    before(() => store.setup())
    after(() => store.teardown())

    describe('the @nodedk/throttle API, call for call', () => {
      it('createThrottle({ db }) is synchronous and returns check() and sweep()', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db })
        assert.equal(typeof throttle.then, 'undefined')
        assert.equal(typeof throttle.check, 'function')
        assert.equal(typeof throttle.sweep, 'function')
      })

      it('an allowed attempt is { allowed: true } and a refused one carries the original reasons', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:10Z') })
        const ok = await throttle.check('acct-1', { requests_per_minute: 1, requests_per_day: 5 })
        assert.equal(ok.allowed, true)
        assert.equal('reason' in ok, false)
        const minute = await throttle.check('acct-1', { requests_per_minute: 1, requests_per_day: 5 })
        assert.equal(minute.allowed, false)
        assert.equal(minute.reason, 'RATE_LIMIT_MINUTE')
        const day = await throttle.check('acct-2', { requests_per_day: 0 })
        assert.equal(day.allowed, false)
        assert.equal(day.reason, 'RATE_LIMIT_DAY')
      })

      it('methods work detached from the throttle object', async () => {
        const { db } = await store.freshDb()
        const { check, sweep } = createThrottle({ db })
        assert.equal((await check('k', { requests_per_minute: 1 })).allowed, true)
        assert.deepEqual(await sweep(), { n: 0 })
      })

      it('db is required, and must provide collection(name)', () => {
        for (const options of [undefined, null, {}, { db: undefined }, { db: null }, { db: {} }, { db: 42 }]) {
          assert.throws(() => createThrottle(options), (err) => err instanceof TypeError && err.code === 'ERR_INVALID_ARG')
        }
      })

      it('uses only the throttle collection, through findOneAndUpdate() and deleteMany(), and creates no indexes', async () => {
        const { db } = await store.freshDb()
        const spy = spyDb(db)
        const throttle = createThrottle({ db: spy.db })
        await throttle.check('k', { requests_per_minute: 3, requests_per_day: 5 })
        await throttle.check('k', { requests_per_minute: 3, requests_per_day: 5 })
        await throttle.sweep()
        const server = createThrottle({ db: spy.db, time: 'server' })
        await server.check('k', { requests_per_minute: 3 })
        await server.sweep()
        const used = new Set(spy.calls)
        assert.deepEqual([...used].sort(), ['collection(throttle)', 'deleteMany', 'findOneAndUpdate'])
      })

      it('counters are documents keyed by MongoDB _id, holding n and expires_at (the window end)', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:34:56Z') })
        await throttle.check('acct-1', { requests_per_minute: 10, requests_per_day: 100 })
        await throttle.check('acct-1', { requests_per_minute: 10, requests_per_day: 100 })
        const minute = await readDoc(db, 'acct-1|minute|2024-05-01T12:34Z')
        assert.equal(minute.n, 2)
        assert.equal(minute.expires_at.getTime(), at('2024-05-01T12:35:00Z'))
        const day = await readDoc(db, 'acct-1|day|UTC|2024-05-01')
        assert.equal(day.n, 2)
        assert.equal(day.expires_at.getTime(), at('2024-05-02T00:00:00Z'))
      })
    })

    describe('keys', () => {
      it('instances using the same database and key share counters', async () => {
        const { db, clients } = await store.freshDb()
        const [a, b] = await clients(2)
        const clock = fakeClock('2024-05-01T12:00:00Z')
        const one = createThrottle({ db: a, clock })
        const two = createThrottle({ db: b, clock })
        const limits = { requests_per_minute: 3 }
        assert.equal((await one.check('shared', limits)).allowed, true)
        assert.equal((await two.check('shared', limits)).allowed, true)
        assert.equal((await one.check('shared', limits)).allowed, true)
        assert.equal((await two.check('shared', limits)).reason, 'RATE_LIMIT_MINUTE')
        assert.equal((await readDoc(db, 'shared|minute|2024-05-01T12:00Z')).n, 4)
      })

      it('different keys have separate counters, even keys containing the id separator', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:00Z') })
        const limits = { requests_per_minute: 1, requests_per_day: 1 }
        const keys = ['a', 'a|b', 'a%7Cb', 'a|minute|2024-05-01T12:00Z', 'a|day', 'a|clock', '%', '|', '192.168.0.1', 'user:ü✓😀']
        for (const key of keys) assert.equal((await throttle.check(key, limits)).allowed, true, key)
        for (const key of keys) assert.equal((await throttle.check(key, limits)).allowed, false, key)
      })

      it('a key must be a non-empty string: refused with a coded TypeError/RangeError before touching the database', async () => {
        const { db } = await store.freshDb()
        const spy = spyDb(db)
        const throttle = createThrottle({ db: spy.db })
        for (const key of [undefined, null, 42, {}, ['k'], Symbol('k')]) {
          await rejectsWithCode(throttle.check(key, { requests_per_minute: 1 }), TypeError, 'ERR_INVALID_ARG')
        }
        await rejectsWithCode(throttle.check('', { requests_per_minute: 1 }), RangeError, 'ERR_INVALID_ARG')
        await rejectsWithCode(throttle.check('a\uD800', { requests_per_minute: 1 }), RangeError, 'ERR_INVALID_ARG')
        assert.deepEqual(spy.calls, [])
      })
    })

    describe('limits', () => {
      it('limits must be non-negative safe integers: refused with coded errors before touching the database', async () => {
        const { db } = await store.freshDb()
        const spy = spyDb(db)
        const throttle = createThrottle({ db: spy.db })
        for (const bad of [-1, 1.5, NaN, Infinity, -Infinity, 2 ** 53, -0.5]) {
          for (const name of ['requests_per_minute', 'requests_per_day', 'requests_per_month']) {
            await rejectsWithCode(throttle.check('k', { [name]: bad }), RangeError, 'ERR_INVALID_ARG')
          }
        }
        for (const bad of ['10', null, true, {}, 10n]) {
          await rejectsWithCode(throttle.check('k', { requests_per_minute: bad }), TypeError, 'ERR_INVALID_ARG')
        }
        for (const bad of [null, 10, 'x', [10]]) {
          await rejectsWithCode(throttle.check('k', bad), TypeError, 'ERR_INVALID_ARG')
        }
        await rejectsWithCode(throttle.check('k', { requests_per_minutes: 10 }), TypeError, 'ERR_INVALID_ARG')
        assert.deepEqual(spy.calls, [])
      })

      it('an omitted limit is unlimited', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:00Z') })
        const dayOnly = await checkMany(throttle, 'k', { requests_per_day: 30 }, 30)
        assert.equal(allowedCount(dayOnly), 30)
        assert.equal(dayOnly[29].windows.minute, undefined)
        const minuteOnly = await checkMany(throttle, 'other', { requests_per_minute: 30, requests_per_day: undefined }, 30)
        assert.equal(allowedCount(minuteOnly), 30)
        assert.equal(minuteOnly[29].windows.day, undefined)
      })

      it('no limits at all: always allowed, and the database is not touched', async () => {
        const { db } = await store.freshDb()
        const spy = spyDb(db)
        const throttle = createThrottle({ db: spy.db })
        assert.equal(allowedCount(await checkMany(throttle, 'k', {}, 5)), 5)
        assert.equal((await throttle.check('k')).allowed, true)
        assert.deepEqual(spy.calls, [])
      })

      it('a limit of 0 blocks every attempt', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:00Z') })
        for (const r of await checkMany(throttle, 'm', { requests_per_minute: 0 }, 3)) assert.equal(r.reason, 'RATE_LIMIT_MINUTE')
        for (const r of await checkMany(throttle, 'd', { requests_per_day: 0, requests_per_minute: 100 }, 3)) assert.equal(r.reason, 'RATE_LIMIT_DAY')
        for (const r of await checkMany(throttle, 'mo', { requests_per_month: 0 }, 3)) assert.equal(r.reason, 'RATE_LIMIT_MONTH')
      })

      it('the daily counter is checked first', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:00Z') })
        // Both limits exceeded: the day decides.
        await throttle.check('k', { requests_per_minute: 1, requests_per_day: 1 })
        const r = await throttle.check('k', { requests_per_minute: 1, requests_per_day: 1 })
        assert.equal(r.reason, 'RATE_LIMIT_DAY')
      })

      it('attempts refused by the minute limit still count toward the daily limit', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T12:00:00Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_minute: 1, requests_per_day: 3 }
        const first = await checkMany(throttle, 'k', limits, 3)
        assert.deepEqual(first.map((r) => r.reason), [undefined, 'RATE_LIMIT_MINUTE', 'RATE_LIMIT_MINUTE'])
        clock.advance(MINUTE)
        const next = await throttle.check('k', limits)
        assert.equal(next.reason, 'RATE_LIMIT_DAY') // 1 allowed + 2 minute-refused = 3 counted today
        assert.equal(next.windows.day.count, 4)
      })

      it('attempts refused by the daily limit do not increment the minute counter', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:00Z') })
        const limits = { requests_per_minute: 5, requests_per_day: 1 }
        const results = await checkMany(throttle, 'k', limits, 4)
        assert.deepEqual(results.map((r) => r.reason), [undefined, 'RATE_LIMIT_DAY', 'RATE_LIMIT_DAY', 'RATE_LIMIT_DAY'])
        assert.equal(results[3].windows.minute.count, null)
        assert.equal((await readDoc(db, 'k|minute|2024-05-01T12:00Z')).n, 1)
        assert.equal((await readDoc(db, 'k|day|UTC|2024-05-01')).n, 4)
      })

      it('an attempt a limit refuses still counts in that limit\'s own counter (increment, then compare)', async () => {
        const { db } = await store.freshDb()
        const throttle = createThrottle({ db, clock: fakeClock('2024-05-01T12:00:00Z') })
        const results = await checkMany(throttle, 'k', { requests_per_minute: 2 }, 5)
        assert.deepEqual(results.map((r) => r.windows.minute.count), [1, 2, 3, 4, 5])
        assert.deepEqual(results.map((r) => r.windows.minute.remaining), [1, 0, 0, 0, 0])
      })
    })

    describe('fixed windows', () => {
      it('the minute window resets at the UTC minute boundary', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T12:00:59.999Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_minute: 2 }
        assert.equal(allowedCount(await checkMany(throttle, 'k', limits, 4)), 2)
        clock.set('2024-05-01T12:01:00.000Z')
        const r = await throttle.check('k', limits)
        assert.equal(r.allowed, true)
        assert.equal(r.windows.minute.id, '2024-05-01T12:01Z')
        assert.equal(r.windows.minute.count, 1)
      })

      it('the day window resets at the UTC day boundary', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T23:59:59.999Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_day: 2 }
        assert.equal(allowedCount(await checkMany(throttle, 'k', limits, 3)), 2)
        clock.set('2024-05-02T00:00:00.000Z')
        const r = await throttle.check('k', limits)
        assert.equal(r.allowed, true)
        assert.equal(r.windows.day.id, '2024-05-02')
      })

      it('a burst on either side of a boundary is possible (fixed windows, documented)', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T12:00:59.500Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_minute: 5 }
        const before = allowedCount(await checkMany(throttle, 'k', limits, 5))
        clock.set('2024-05-01T12:01:00.000Z')
        const after = allowedCount(await checkMany(throttle, 'k', limits, 5))
        assert.equal(before + after, 10) // twice the limit within one second
      })

      it('expired counters never affect new windows, even before a sweep', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T23:59:30Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_minute: 1, requests_per_day: 1, requests_per_month: 1 }
        await checkMany(throttle, 'k', limits, 3)
        clock.set('2024-06-01T00:00:00Z') // new minute, day and month; nothing swept
        const r = await throttle.check('k', limits)
        assert.equal(r.allowed, true)
        assert.equal(r.windows.month.count, 1)
        assert.equal(r.windows.day.count, 1)
        assert.equal(r.windows.minute.count, 1)
        assert.equal((await readDoc(db, 'k|minute|2024-05-01T23:59Z')).n, 1) // the old counter still lingers
      })

      it('results carry retryAfterMs and the window ids', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T12:00:30.250Z')
        const throttle = createThrottle({ db, clock })
        const ok = await throttle.check('k', { requests_per_minute: 1, requests_per_day: 10 })
        assert.equal(ok.retryAfterMs, 0)
        assert.equal(ok.nowMs, at('2024-05-01T12:00:30.250Z'))
        assert.deepEqual(ok.windows, {
          day: { id: '2024-05-01', startMs: at('2024-05-01T00:00Z'), endMs: at('2024-05-02T00:00Z'), limit: 10, count: 1, remaining: 9 },
          minute: { id: '2024-05-01T12:00Z', startMs: at('2024-05-01T12:00Z'), endMs: at('2024-05-01T12:01Z'), limit: 1, count: 1, remaining: 0 },
        })
        const minute = await throttle.check('k', { requests_per_minute: 1, requests_per_day: 10 })
        assert.equal(minute.retryAfterMs, 29_750)
        clock.set('2024-05-01T23:00:00Z')
        const day = await checkMany(throttle, 'd', { requests_per_day: 1 }, 2)
        assert.equal(day[1].retryAfterMs, HOUR)
      })
    })

    describe('sweep()', () => {
      it('removes expired counters and returns how many', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-05-01T12:00:00Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_minute: 10, requests_per_day: 10 }
        await throttle.check('a', limits)
        await throttle.check('b', limits)
        assert.deepEqual(await throttle.sweep(), { n: 0 }) // nothing has expired yet
        clock.set('2024-05-01T12:01:00Z') // a counter is expired once expires_at <= now
        assert.deepEqual(await throttle.sweep(), { n: 2 }) // the two minute counters
        assert.equal((await throttle.check('a', limits)).windows.day.count, 2) // day counters untouched
        clock.set('2024-05-02T00:00:00Z')
        assert.deepEqual(await throttle.sweep(), { n: 3 }) // two day counters, a's second minute counter
        assert.deepEqual(await throttle.sweep(), { n: 0 })
      })

    })

    describe('better than the original', () => {
      it('timeZone: the day window resets at local midnight (New York, on a 23-hour DST day)', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-03-10T04:59:59.999Z') // 23:59:59.999 on 9 March in New York
        const throttle = createThrottle({ db, timeZone: 'America/New_York', clock })
        const limits = { requests_per_day: 1 }
        const late = await checkMany(throttle, 'k', limits, 2)
        assert.equal(late[0].windows.day.id, '2024-03-09')
        assert.equal(late[1].reason, 'RATE_LIMIT_DAY')
        assert.equal(late[1].retryAfterMs, 1)
        clock.set('2024-03-10T05:00:00Z') // local midnight
        const r = await throttle.check('k', limits)
        assert.equal(r.allowed, true)
        assert.equal(r.windows.day.id, '2024-03-10')
        assert.equal(r.windows.day.endMs - r.windows.day.startMs, 23 * HOUR) // clocks spring forward
        assert.equal((await readDoc(db, 'k|day|America/New_York|2024-03-10')).expires_at.getTime(), at('2024-03-11T04:00:00Z'))
      })

      it('an unknown time zone is a RangeError ERR_UNKNOWN_TIME_ZONE at createThrottle, before touching the database', async () => {
        const { db } = await store.freshDb()
        const spy = spyDb(db)
        assert.throws(() => createThrottle({ db: spy.db, timeZone: 'Mars/Olympus_Mons' }), (err) => err instanceof RangeError && err.code === 'ERR_UNKNOWN_TIME_ZONE')
        for (const timeZone of [42, null, '']) {
          assert.throws(() => createThrottle({ db: spy.db, timeZone }), (err) => err instanceof TypeError && err.code === 'ERR_INVALID_ARG')
        }
        assert.deepEqual(spy.calls, [])
      })

      it('other bad options are coded errors', () => {
        const db = memoryDb()
        const invalid = (options, ErrorClass) => assert.throws(() => createThrottle(options), (err) => err instanceof ErrorClass && err.code === 'ERR_INVALID_ARG')
        invalid({ db, time: 'client' }, RangeError)
        invalid({ db, clock: () => 0 }, TypeError)
        invalid({ db, timezone: 'UTC' }, TypeError) // a typo of timeZone
        invalid(db, TypeError) // createThrottle(db) instead of createThrottle({ db })
      })

      it('requests_per_month adds a calendar-month window, checked before the day', async () => {
        const { db } = await store.freshDb()
        const clock = fakeClock('2024-02-29T23:59:00Z')
        const throttle = createThrottle({ db, clock })
        const limits = { requests_per_month: 2, requests_per_day: 1 }
        const results = await checkMany(throttle, 'k', limits, 3)
        assert.deepEqual(results.map((r) => r.reason), [undefined, 'RATE_LIMIT_DAY', 'RATE_LIMIT_MONTH'])
        assert.equal(results[2].windows.month.id, '2024-02')
        assert.equal(results[2].windows.day.count, null) // refused by the month: the day was not touched
        assert.equal(results[2].retryAfterMs, MINUTE)
        clock.set('2024-03-01T00:00:00Z')
        const r = await throttle.check('k', limits)
        assert.equal(r.allowed, true)
        assert.equal(r.windows.month.id, '2024-03')
        assert.equal(r.windows.month.endMs, at('2024-04-01T00:00:00Z'))
      })

      it('time: "server" takes the time from the database server and reports the skew', async () => {
        const { db } = await store.freshDb()
        const localClock = fakeClock(Date.now() - 2 * HOUR) // this instance's clock is two hours slow
        const throttle = createThrottle({ db, time: 'server', clock: localClock })
        const startedAt = Date.now()
        const r = await throttle.check('k', { requests_per_minute: 5, requests_per_day: 100 })
        const endedAt = Date.now()
        assert.equal(r.allowed, true)
        // The server shares this machine's clock: the windows follow it, not the slow local clock.
        assert.ok(r.nowMs >= startedAt - 5 && r.nowMs <= endedAt + 5, `${r.nowMs} not in [${startedAt}, ${endedAt}]`)
        assert.ok(Math.abs(r.skewMs - 2 * HOUR) < 1000, `skewMs ${r.skewMs}`)
        assert.equal(r.windows.day.id, new Date(r.nowMs).toISOString().slice(0, 10))
        const skew = await throttle.measureSkew()
        assert.ok(Math.abs(skew.skewMs - 2 * HOUR) < 1000)
        assert.ok(skew.roundTripMs >= 0)
      })

      it('sweep() with time: "server" decides expiry by the server clock', async () => {
        const { db } = await store.freshDb()
        const local = createThrottle({ db, clock: fakeClock(Date.now() - 2 * MINUTE) })
        await local.check('k', { requests_per_minute: 1 }) // a counter whose window ended a minute ago
        const slowServerMode = createThrottle({ db, time: 'server', clock: fakeClock(Date.now() - HOUR) })
        assert.deepEqual(await slowServerMode.sweep(), { n: 1 })
      })

      if (!store.realServer) {
        it('time: "server" files every instance\'s attempt in the server\'s window, whatever the local clocks say', async () => {
          const serverClock = fakeClock('2024-05-01T12:00:59.000Z')
          const { db } = await store.freshDb({ serverClock })
          const limits = { requests_per_minute: 2 }
          // Two instances whose clocks straddle the minute boundary.
          const behind = fakeClock('2024-05-01T12:00:30Z')
          const ahead = fakeClock('2024-05-01T12:01:20Z')
          const localA = createThrottle({ db, clock: behind })
          const localB = createThrottle({ db, clock: ahead })
          // With local time, the classic bug: the instances count in different windows, 4 allowed.
          assert.equal(allowedCount([...(await checkMany(localA, 'local', limits, 2)), ...(await checkMany(localB, 'local', limits, 2))]), 4)
          const serverA = createThrottle({ db, time: 'server', clock: behind })
          const serverB = createThrottle({ db, time: 'server', clock: ahead })
          const results = [...(await checkMany(serverA, 'server', limits, 2)), ...(await checkMany(serverB, 'server', limits, 2))]
          assert.equal(allowedCount(results), 2)
          assert.deepEqual(new Set(results.map((r) => r.windows.minute.id)), new Set(['2024-05-01T12:00Z']))
          assert.equal(results[0].skewMs, 29_000)
          assert.equal(results[2].skewMs, -21_000)
          serverClock.set('2024-05-01T12:01:00.000Z')
          assert.equal((await serverA.check('server', limits)).retryAfterMs, 0)
        })
      }

      if (store.realServer) {
        it('the optional TTL index on expires_at is accepted and counters carry what it expires by', async () => {
          // The TTL monitor deletes a document once its indexed Date is before now - expireAfterSeconds;
          // it runs every 60 s (mongod and the test server alike), too slow to wait for here.
          const { db } = await store.freshDb()
          const collection = db.collection('throttle')
          await collection.createIndex({ expires_at: 1 }, { expireAfterSeconds: 0 })
          // Tomorrow's counters, so the monitor cannot remove them while the test looks at them.
          const throttle = createThrottle({ db, clock: fakeClock(Date.now() + DAY) })
          const [, second] = await checkMany(throttle, 'k', { requests_per_minute: 5, requests_per_day: 5 }, 2)
          assert.equal(second.windows.minute.count, 2)
          const ids = { minute: `k|minute|${second.windows.minute.id}`, day: `k|day|UTC|${second.windows.day.id}` }
          for (const [unit, _id] of Object.entries(ids)) {
            const doc = await collection.findOne({ _id })
            assert.ok(doc.expires_at instanceof Date, unit) // a BSON Date: the TTL monitor ignores other types
            assert.equal(doc.expires_at.getTime(), second.windows[unit].endMs) // expireAfterSeconds 0: gone once the window ends
          }
          const live = createThrottle({ db })
          assert.equal((await checkMany(live, 'live', { requests_per_minute: 5 }, 2))[1].windows.minute.count, 2)
        })
      }
    })

    describe('concurrency', () => {
      for (const time of ['local', 'server']) {
        it(`60 concurrent checks for one key across 4 clients never allow more than the limit (time: '${time}')`, async () => {
          const { clients } = await store.freshDb()
          const throttles = (await clients(4)).map((db) => createThrottle({ db, time }))
          const limits = { requests_per_minute: 10 }
          const results = await Promise.all(Array.from({ length: 60 }, (_, i) => throttles[i % 4].check('hot', limits)))
          // All in one minute unless the run straddles a boundary; then each window allows at most 10.
          const perWindow = new Map()
          for (const r of results) {
            const w = perWindow.get(r.windows.minute.id) ?? { allowed: 0, counts: [] }
            if (r.allowed) w.allowed++
            w.counts.push(r.windows.minute.count)
            perWindow.set(r.windows.minute.id, w)
          }
          for (const w of perWindow.values()) {
            assert.equal(w.allowed, Math.min(10, w.counts.length))
            assert.deepEqual(w.counts.sort((x, y) => x - y), Array.from({ length: w.counts.length }, (_, i) => i + 1)) // no lost or repeated count
          }
        })
      }

      it('concurrent checks with a day and a minute limit: the day caps, the minute caps what the day let through', async () => {
        const { clients } = await store.freshDb()
        const clock = fakeClock('2024-05-01T12:00:00Z')
        const throttles = (await clients(4)).map((db) => createThrottle({ db, clock }))
        const results = await Promise.all(Array.from({ length: 60 }, (_, i) => throttles[i % 4].check('hot', { requests_per_minute: 5, requests_per_day: 8 })))
        assert.equal(allowedCount(results), 5)
        assert.equal(results.filter((r) => r.reason === 'RATE_LIMIT_DAY').length, 52)
        assert.equal(results.filter((r) => r.reason === 'RATE_LIMIT_MINUTE').length, 3)
      })
    })

    describe('the store contract both stores meet (the subset the library relies on)', () => {
      it('findOneAndUpdate: null without a match, the document itself with returnDocument "after", "before" by default', async () => {
        const { db } = await store.freshDb()
        const c = db.collection('throttle')
        assert.equal(await c.findOneAndUpdate({ _id: 'x' }, { $inc: { n: 1 } }, { returnDocument: 'after' }), null)
        const created = await c.findOneAndUpdate({ _id: 'x' }, { $setOnInsert: { n: 0, expires_at: new Date(0) } }, { upsert: true, returnDocument: 'after' })
        assert.deepEqual(created, { _id: 'x', n: 0, expires_at: new Date(0) })
        assert.deepEqual(await c.findOneAndUpdate({ _id: 'x' }, { $setOnInsert: { n: 99 } }, { upsert: true, returnDocument: 'after' }), created)
        assert.equal((await c.findOneAndUpdate({ _id: 'x' }, { $inc: { n: 1 } }, { returnDocument: 'after' })).n, 1)
        assert.equal((await c.findOneAndUpdate({ _id: 'x' }, { $inc: { n: 1 } })).n, 1) // the document before
        assert.equal((await c.findOneAndUpdate({ _id: 'y' }, { $inc: { n: 1 } }, { upsert: true, returnDocument: 'after' })).n, 1)
      })

      it('an upsert whose filter misses a document that exists is E11000; conflicting operators are code 40', async () => {
        const { db } = await store.freshDb()
        const c = db.collection('throttle')
        await c.findOneAndUpdate({ _id: 'x' }, { $set: { expires_at: new Date(0) } }, { upsert: true })
        await assert.rejects(c.findOneAndUpdate({ _id: 'x', expires_at: { $gt: new Date(1) } }, { $inc: { n: 1 } }, { upsert: true }), (err) => err.code === 11000)
        await assert.rejects(c.findOneAndUpdate({ _id: 'z' }, { $inc: { n: 1 }, $setOnInsert: { n: 0 } }, { upsert: true }), (err) => err.code === 40)
      })

      it('an update pipeline can read the server time through $$NOW', async () => {
        const { db } = await store.freshDb()
        const before = Date.now()
        const doc = await db.collection('throttle').findOneAndUpdate({ _id: 'clock' }, [{ $set: { now: '$$NOW' } }], { upsert: true, returnDocument: 'after' })
        assert.ok(doc.now instanceof Date)
        assert.ok(Math.abs(doc.now.getTime() - before) < 5000)
      })

      it('deleteMany with $lte on a Date reports deletedCount', async () => {
        const { db } = await store.freshDb()
        const c = db.collection('throttle')
        for (const [id, ms] of [['a', 1000], ['b', 2000], ['c', 3000]]) await c.findOneAndUpdate({ _id: id }, { $set: { expires_at: new Date(ms) } }, { upsert: true })
        assert.equal((await c.deleteMany({ expires_at: { $lte: new Date(2000) } })).deletedCount, 2)
        assert.equal((await c.deleteMany({})).deletedCount, 1)
      })
    })
  })
}

function activeTimers() {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout' || kind === 'Immediate').length
}

throttleSuite(memoryStore())
throttleSuite(serverStore())

describe('the library itself', () => {
  it('starts no timers (the embedded store neither)', async () => {
    const timersBefore = activeTimers()
    const throttle = createThrottle({ db: memoryDb(), time: 'server' })
    await throttle.check('k', { requests_per_minute: 1, requests_per_day: 1 })
    await throttle.sweep()
    assert.equal(activeTimers(), timersBefore)
  })
})

describe('memoryDb()', () => {
  it('refuses what it does not implement instead of misreading it', async () => {
    const c = memoryDb().collection('throttle')
    await assert.rejects(c.findOneAndUpdate({ _id: 'x' }, { $push: { a: 1 } }), (err) => err instanceof TypeError)
    await assert.rejects(c.findOneAndUpdate({ n: { $in: [1] } }, { $inc: { n: 1 } }), (err) => err instanceof TypeError)
    await assert.rejects(c.findOneAndUpdate({ _id: 'x' }, [{ $set: { n: { $add: ['$n', 1] } } }]), (err) => err instanceof TypeError)
    await assert.rejects(c.findOneAndUpdate({ _id: 'x' }, { $inc: { 'a.b': 1 } }), (err) => err instanceof TypeError)
    assert.throws(() => memoryDb({ clock: 5 }), TypeError)
  })

  it('reports server-style errors with the server codes', async () => {
    const c = memoryDb().collection('throttle')
    await c.findOneAndUpdate({ _id: 's' }, { $set: { n: 'text' } }, { upsert: true })
    await assert.rejects(c.findOneAndUpdate({ _id: 's' }, { $inc: { n: 1 } }), (err) => err instanceof MemoryDbError && err.code === 14)
  })

  it('returns copies: changing a returned document does not change the stored one', async () => {
    const c = memoryDb().collection('throttle')
    const doc = await c.findOneAndUpdate({ _id: 'x' }, { $inc: { n: 1 } }, { upsert: true, returnDocument: 'after' })
    doc.n = 100
    assert.equal((await c.findOneAndUpdate({ _id: 'x' }, { $inc: { n: 1 } }, { returnDocument: 'after' })).n, 2)
  })
})

describe('the package face', () => {
  it('require("quota-clock-source") exports createThrottle and memoryDb', () => {
    const pkg = require('..')
    assert.equal(pkg.createThrottle, createThrottle)
    assert.equal(pkg.memoryDb, memoryDb)
  })

  it('createThrottle and memoryDb are also ESM named exports', async () => {
    const pkg = require('../package.json')
    let entry
    try {
      entry = await import('quota-clock-source') // through package.json "exports", when it has one
    } catch {
      entry = await import(pathToFileURL(path.join(__dirname, '..', pkg.main ?? 'index.js')).href)
    }
    assert.equal(typeof entry.createThrottle, 'function')
    assert.equal(typeof entry.memoryDb, 'function')
  })
})
