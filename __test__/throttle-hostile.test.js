'use strict'
// The MongoDB throttle never fails open on nonsense: a store answer that is not a counter document
// with a non-negative safe integer count is ERR_STORE_RESPONSE (never an allowance), a database
// that throws or rejects with anything is a coded error, a limits object that cannot be read is
// ERR_INVALID_ARG, and a wall reading outside the Date range is ERR_CLOCK_READING.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { createThrottle, memoryDb, QuotaClockError } = require('..')

const WALL = Date.parse('2024-05-01T12:00:30Z')
const clock = (ms = WALL) => ({ wallMs: () => ms })

/** A database whose one collection answers every findOneAndUpdate with `answer()`. */
function answeringDb(answer) {
  const collection = {
    findOneAndUpdate: async () => answer(),
    deleteMany: async () => ({ deletedCount: 0 }),
  }
  return { collection: () => collection }
}

async function rejectsCoded(promise, code, pattern) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof Error, `expected an Error, got ${String(err)}`)
    assert.equal(err.code, code, err.message)
    if (pattern) assert.match(err.message, pattern)
    return true
  })
}

describe('a throttle store answer that makes no sense is ERR_STORE_RESPONSE, never an allowance', () => {
  const nonsense = [
    ['{ n: NaN }', { n: NaN }],
    ['{ n: -1 }', { n: -1 }],
    ['{ n: -Infinity }', { n: -Infinity }],
    ['{ n: Infinity }', { n: Infinity }],
    ['{ n: 1.5 }', { n: 1.5 }],
    ['{ n: 2 ** 53 }', { n: 2 ** 53 }],
    ['{ n: "1" }', { n: '1' }],
    ['{ n: 1n }', { n: 1n }],
    ['{} (no count)', {}],
    ['a number', 5],
    ['a string', 'ok'],
    ['true', true],
    ['an array', [{ n: 1 }]],
    ['a driver v5 wrapper holding nonsense', { value: { n: NaN }, ok: 1, lastErrorObject: {} }],
  ]
  for (const [label, answer] of nonsense) {
    it(`${label}`, async () => {
      const throttle = createThrottle({ db: answeringDb(() => answer), clock: clock() })
      await assert.rejects(throttle.check('k', { requests_per_minute: 10 }), (err) => {
        assert.ok(err instanceof QuotaClockError, `${err && err.name}: ${err && err.message}`)
        assert.equal(err.code, 'ERR_STORE_RESPONSE')
        assert.match(err.message, /counter/)
        return true
      })
    })
  }

  it('a well-formed count is still read (a real document from memoryDb)', async () => {
    const throttle = createThrottle({ db: memoryDb(), clock: clock() })
    assert.equal((await throttle.check('k', { requests_per_minute: 1 })).allowed, true)
    assert.equal((await throttle.check('k', { requests_per_minute: 1 })).allowed, false)
  })

  it("a server clock answer without a Date for '$$NOW' is ERR_STORE_RESPONSE", async () => {
    const throttle = createThrottle({ db: answeringDb(() => ({ now: 'noon' })), time: 'server', clock: clock() })
    await rejectsCoded(throttle.check('k', { requests_per_minute: 1 }), 'ERR_STORE_RESPONSE')
  })
})

describe('a database that throws or rejects gives a coded error', () => {
  const thrown = [null, undefined, false, 0, '', 'text', Symbol('s'), { message: 'not an error' }]

  it('db.collection() that throws synchronously (anything) rejects check with a coded error whose cause is what it threw', async () => {
    for (const value of [new Error('boom'), ...thrown]) {
      const db = {
        collection() {
          throw value
        },
      }
      const throttle = createThrottle({ db, clock: clock() })
      await assert.rejects(throttle.check('k', { requests_per_minute: 1 }), (err) => {
        assert.ok(err instanceof QuotaClockError, String(err))
        assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
        assert.equal(err.cause, value)
        return true
      })
    }
  })

  it('findOneAndUpdate that throws synchronously or rejects with null, false, undefined ... is ERR_STORE_UNAVAILABLE', async () => {
    for (const value of thrown) {
      for (const how of ['throw', 'reject']) {
        const collection = {
          findOneAndUpdate() {
            if (how === 'throw') throw value
            return Promise.reject(value)
          },
          deleteMany: async () => ({ deletedCount: 0 }),
        }
        const throttle = createThrottle({ db: { collection: () => collection }, clock: clock() })
        await assert.rejects(throttle.check('k', { requests_per_day: 1 }), (err) => {
          assert.ok(err instanceof QuotaClockError, `${how} ${String(value)}: ${String(err)}`)
          assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
          assert.equal(err.cause, value)
          return true
        })
      }
    }
  })

  it('sweep() and measureSkew() wrap a failing database the same way', async () => {
    const collection = {
      findOneAndUpdate: () => Promise.reject(null),
      deleteMany: () => Promise.reject(null),
    }
    const throttle = createThrottle({ db: { collection: () => collection }, clock: clock() })
    await rejectsCoded(throttle.sweep(), 'ERR_STORE_UNAVAILABLE')
    await rejectsCoded(throttle.measureSkew(), 'ERR_STORE_UNAVAILABLE')
  })
})

describe('a limits object that cannot be read is ERR_INVALID_ARG, before the database is touched', () => {
  it('a getter that throws (anything), or a Proxy whose traps throw', async () => {
    let touched = 0
    const db = answeringDb(() => {
      touched++
      return { n: 1 }
    })
    const throttle = createThrottle({ db, clock: clock() })
    const getterThrowing = (value) =>
      Object.defineProperty({}, 'requests_per_minute', {
        enumerable: true,
        get() {
          throw value
        },
      })
    const cases = [
      getterThrowing(new Error('getter')),
      getterThrowing(null),
      getterThrowing(undefined),
      new Proxy({}, { ownKeys() { throw null } }),
      new Proxy({ requests_per_minute: 1 }, { get() { throw false } }),
    ]
    for (const limits of cases) {
      await assert.rejects(throttle.check('k', limits), (err) => {
        assert.ok(err instanceof TypeError, String(err))
        assert.equal(err.code, 'ERR_INVALID_ARG')
        assert.match(err.message, /limits/)
        return true
      })
    }
    assert.equal(touched, 0)
  })
})

describe('a wall reading outside the Date range is ERR_CLOCK_READING, not an uncoded RangeError', () => {
  for (const wallMs of [9e15, -9e15, 8.64e15 + 1, Number.MAX_VALUE]) {
    it(`${wallMs}`, async () => {
      for (const limits of [{ requests_per_minute: 1 }, { requests_per_day: 1 }, { requests_per_month: 1 }]) {
        const throttle = createThrottle({ db: memoryDb(), clock: clock(wallMs) })
        await assert.rejects(throttle.check('k', limits), (err) => {
          assert.ok(err instanceof RangeError, String(err))
          assert.equal(err.code, 'ERR_CLOCK_READING')
          return true
        })
      }
    })
  }

  it('the last representable instants still give a coded answer or a result, never an uncoded error', async () => {
    for (const wallMs of [8.64e15, 8.64e15 - 1, -8.64e15]) {
      for (const limits of [{ requests_per_minute: 1 }, { requests_per_day: 1 }, { requests_per_month: 1 }]) {
        const throttle = createThrottle({ db: memoryDb(), clock: clock(wallMs) })
        try {
          const result = await throttle.check('k', limits)
          assert.equal(typeof result.allowed, 'boolean')
        } catch (err) {
          assert.equal(typeof err.code, 'string', `${wallMs} ${JSON.stringify(limits)}: ${err}`)
        }
      }
    }
  })
})

describe('createThrottle options and a clock that throw are coded', () => {
  const throwing = (value) => ({
    get() {
      throw value
    },
    enumerable: true,
  })

  it('a getter or Proxy trap that throws in the options, db or clock is TypeError ERR_INVALID_ARG with what it threw as cause', () => {
    for (const value of [null, new Error('getter')]) {
      const cases = [
        Object.defineProperty({}, 'db', throwing(value)),
        Object.defineProperty({}, 'collection', throwing(value)),
        { db: Object.defineProperty({}, 'collection', throwing(value)) },
        { db: memoryDb(), clock: Object.defineProperty({}, 'wallMs', throwing(value)) },
        new Proxy({ db: memoryDb() }, { ownKeys() { throw value } }),
      ]
      for (const options of cases) {
        assert.throws(() => createThrottle(options), (err) => {
          assert.ok(err instanceof TypeError, String(err))
          assert.equal(err.code, 'ERR_INVALID_ARG')
          assert.equal(err.cause, value)
          return true
        })
      }
    }
  })

  it('a clock.wallMs() that throws anything is RangeError ERR_CLOCK_READING with it as cause', async () => {
    for (const value of [null, undefined, new Error('clock')]) {
      const throttle = createThrottle({ db: memoryDb(), clock: { wallMs: () => { throw value } } })
      await assert.rejects(throttle.check('k', { requests_per_minute: 1 }), (err) => {
        assert.ok(err instanceof RangeError, String(err))
        assert.equal(err.code, 'ERR_CLOCK_READING')
        assert.equal(err.cause, value)
        return true
      })
    }
  })
})
