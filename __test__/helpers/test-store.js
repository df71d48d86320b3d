'use strict'
// An in-process quota store: a real implementation of the store protocol (lib/quota-store.js)
// over a Map, for the shared limiter's unit tests, with switches to make it fail, hang or answer
// late. The Redis and MongoDB stores have tests of their own against real servers.

const { KeyedQuotaClock, manualClock } = require('../..')
const { makeQuotaStore } = require('../../lib/quota-store.js')

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

/**
 * `testStore()` → { store, records, calls, control }. `control.mode`: 'ok' | 'fail' | 'hang';
 * `control.delayMs`: answer after that long; `control.failWith`: what a failing call rejects with;
 * `control.answer`: replaces a reserve answer (to test nonsense answers). `release()` answers
 * every hung call.
 */
function testStore() {
  const records = new Map()
  const calls = { reserve: [], giveBack: [] }
  const hung = []
  const control = { mode: 'ok', delayMs: 0, failWith: new Error('store down'), answer: undefined }

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
    return { granted, unreserved: room - granted }
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
      return answer(() => (control.answer !== undefined ? control.answer : reserveNow(request)))
    },
    giveBack(request) {
      calls.giveBack.push({ ...request })
      return answer(() => giveBackNow(request))
    },
  })

  return {
    store,
    records,
    calls,
    control,
    /** The store's count for (name, key, periodId), 0 if none. */
    count: (name, key, periodId) => records.get(id(name, key, periodId))?.count ?? 0,
    release() {
      for (const run of hung.splice(0)) run()
    },
  }
}

module.exports = { testStore, sharedLimiter }
