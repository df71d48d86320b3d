'use strict'
// The MongoDB throttle as a rateLimit entry, on the real MongoDB wire-compatible test
// server: its windows as header items, its denials as 429s, and a store that does not answer
// (stopped, or hanging) answered 503 within timeoutMs, or passed with failOpen. Never skipped: the
// tests fail when the server cannot be started.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { MongoClient } = require('mongodb')

const { QuotaClock, createThrottle, manualClock, memoryDb } = require('..')
const { rateLimit } = require('../lib/http.js')
const { startMongoServer } = require('./helpers/mongo-server.js')
const { serve, items } = require('./helpers/http-servers.js')
const { warningsDuring } = require('./helpers/warnings.js')

const WALL = Date.parse('2024-05-01T12:00:30Z')
const UNAVAILABLE = 'QUOTA_CLOCK_THROTTLE_UNAVAILABLE'

function wallClock(ms = WALL) {
  return { wallMs: () => ms }
}

function inProcess(capacity) {
  return new QuotaClock({ capacity, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ wallMs: WALL }) })
}

/** Asserts the 503 problem of a store that did not answer. */
async function assertUnavailable(response) {
  assert.equal(response.status, 503)
  assert.equal(response.headers.get('content-type'), 'application/problem+json')
  const body = await response.json()
  assert.equal(body.status, 503)
  assert.equal(body.title, 'Service Unavailable')
  assert.match(body.detail, /rate limit store/)
  assert.match(response.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/, 'Retry-After: whole seconds, at least 1')
}

describe('a throttle entry on the MongoDB wire-compatible server', () => {
  let mongo
  let client
  let dbCount = 0
  const servers = []
  before(async () => {
    mongo = await startMongoServer()
    client = new MongoClient(mongo.uri, { serverSelectionTimeoutMS: 10_000 })
    await client.connect()
  })
  after(async () => {
    for (const server of servers) await server.close()
    await client?.close()
    await mongo?.stop()
  })
  function freshThrottle(options = {}) {
    return createThrottle({ db: client.db(`http_throttle_${process.pid}_${dbCount++}`), clock: wallClock(), ...options })
  }
  async function start(kind, middleware) {
    const server = await serve(kind, middleware)
    servers.push(server)
    return server
  }

  for (const kind of ['Express 5', 'Express 4', 'node:http']) {
    it(`${kind}: its windows are header items (month, day, minute) and its denial a 429`, async () => {
      const throttle = freshThrottle()
      const server = await start(kind, rateLimit({ limits: [{ throttle, limits: { requests_per_minute: 2, requests_per_day: 100 } }] }))
      const first = await server.get()
      assert.equal(first.status, 200)
      assert.equal(first.headers.get('ratelimit-policy'), '"day";q=100;w=86400, "minute";q=2;w=60')
      // 12:00:30: the minute ends in 30 s, the UTC day in 12 h - 30 s.
      assert.deepEqual(items(first, 'ratelimit'), { day: { r: 99, t: 43_170 }, minute: { r: 1, t: 30 } })
      assert.equal((await server.get()).status, 200)
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.equal(denied.headers.get('retry-after'), '30')
      const body = await denied.json()
      assert.deepEqual(body['violated-policies'], ['minute'])
      assert.equal(body.retryAfterMs, 30_000)
      assert.equal(body.retryAfterBasis, 'wall-period')
      assert.deepEqual(items(denied, 'ratelimit').minute, { r: 0, t: 30 })
    })
  }

  it('with in-process limits: the throttle is asked last, and its denial refunds them', async () => {
    const throttle = freshThrottle()
    const client1 = inProcess(10)
    const server = await start('Express 5', rateLimit({
      limits: [
        { throttle, limits: { requests_per_month: 1 }, name: 'tenant' },
        { limiter: client1, name: 'client' },
      ],
    }))
    const first = await server.get()
    assert.equal(first.status, 200)
    assert.deepEqual(Object.keys(items(first, 'ratelimit')), ['tenant-month', 'client-burst'], 'items follow the order of limits')
    const denied = await server.get()
    assert.equal(denied.status, 429)
    assert.deepEqual((await denied.json())['violated-policies'], ['tenant-month'])
    assert.equal(Math.round(client1.status().tokens), 9, 'the in-process token came back')
    assert.deepEqual(items(denied, 'ratelimit')['client-burst'], { r: 9, t: 1 }, 'and the headers say so')
  })

  it('an in-process denial never reaches the throttle', async () => {
    const throttle = freshThrottle()
    let checks = 0
    const counted = { check: (...args) => (checks++, throttle.check(...args)) }
    const server = await start('Express 5', rateLimit({ limits: [{ limiter: inProcess(1) }, { throttle: counted, limits: { requests_per_day: 10 }, name: 't' }] }))
    assert.equal((await server.get()).status, 200)
    const denied = await server.get()
    assert.equal(denied.status, 429)
    assert.equal(checks, 1)
    assert.deepEqual(Object.keys(items(denied, 'ratelimit')), ['burst'], 'a throttle that was not asked is not reported')
  })

  it('a bad key is the caller\'s error (next(err) / 500), not an unavailable store', async () => {
    const throttle = freshThrottle()
    const limit = rateLimit({ limits: [{ throttle, limits: { requests_per_day: 10 }, key: () => '' }] })
    const express = await start('Express 5', limit)
    const viaNext = await express.get()
    assert.equal(viaNext.status, 599)
    assert.equal((await viaNext.json()).code, 'ERR_INVALID_ARG')
    const plain = await start('node:http', limit)
    const without = await plain.get()
    assert.equal(without.status, 500)
    assert.equal((await without.json()).code, 'ERR_INVALID_ARG')
  })
})

describe('a throttle whose store stops answering', () => {
  let mongo
  let client
  const servers = []
  before(async () => {
    mongo = await startMongoServer()
    // The driver's defaults: without rateLimit's timeout, a stopped server makes each check wait 30 s.
    client = new MongoClient(mongo.uri)
    await client.connect()
  })
  after(async () => {
    for (const server of servers) await server.close()
    await client?.close(true)
    await mongo?.stop()
  })

  it('fails closed with a 503 problem within timeoutMs, and open with failOpen; one warning per outage', async () => {
    const throttle = createThrottle({ db: client.db(`http_stop_${process.pid}`) })
    const limits = { requests_per_minute: 100 }
    const shared = inProcess(10)
    const closed = await serve('Express 5', rateLimit({ limits: [{ limiter: shared }, { throttle, limits, name: 'db' }] }))
    const open = await serve('node:http', rateLimit({ limits: [{ throttle, limits, failOpen: true, timeoutMs: 200 }] }))
    const plain = await serve('node:http', rateLimit({ limits: [{ throttle, limits }] }))
    servers.push(closed, open, plain)

    assert.equal((await closed.get()).status, 200)
    assert.equal((await open.get()).status, 200)
    assert.equal(Math.round(shared.status().tokens), 9)

    await mongo.stop()
    const warnings = await warningsDuring(UNAVAILABLE, async () => {
      for (let i = 0; i < 2; i++) {
        const startedAt = performance.now()
        await assertUnavailable(await closed.get())
        const elapsed = performance.now() - startedAt
        // (Generous: it says the 503 did not wait for the stopped store, on a loaded machine too.)
        assert.ok(elapsed < 5_000, `a 503 took ${elapsed.toFixed(0)} ms (default timeoutMs is 300)`)
      }
      await assertUnavailable(await plain.get())
    })
    assert.equal(warnings.length, 2, 'one warning per middleware entry and outage, not per request')
    assert.match(warnings[0].message, /503/)
    assert.equal(Math.round(shared.status().tokens), 9, 'a 503 refunds the in-process limits')

    const openWarnings = await warningsDuring(UNAVAILABLE, async () => {
      const startedAt = performance.now()
      const passed = await open.get()
      assert.equal(passed.status, 200)
      assert.equal(await passed.text(), 'hello')
      assert.equal(passed.headers.get('ratelimit'), null, 'a throttle that did not answer is not reported')
      assert.ok(performance.now() - startedAt < 5_000)
    })
    assert.equal(openWarnings.length, 1)
    assert.match(openWarnings[0].message, /failOpen/)
  })
})

describe('a throttle on a store that hangs', () => {
  /** A db whose every call never settles. */
  function hangingDb() {
    return { collection: () => ({ findOneAndUpdate: () => new Promise(() => {}), deleteMany: () => new Promise(() => {}) }) }
  }

  it('answers 503 after timeoutMs, or passes with failOpen; nothing waits longer', async () => {
    const throttle = createThrottle({ db: hangingDb() })
    const closed = await serve('Express 5', rateLimit({ limits: [{ throttle, limits: { requests_per_day: 5 }, timeoutMs: 50 }] }))
    const open = await serve('Express 5', rateLimit({ limits: [{ throttle, limits: { requests_per_day: 5 }, timeoutMs: 50, failOpen: true }] }))
    try {
      const startedAt = performance.now()
      await assertUnavailable(await closed.get())
      const elapsed = performance.now() - startedAt
      assert.ok(elapsed >= 45 && elapsed < 5_000, `took ${elapsed.toFixed(0)} ms`)
      assert.equal((await open.get()).status, 200)
    } finally {
      await closed.close()
      await open.close()
    }
  })

  it('a store that answers again ends the outage: the next failure warns again', async () => {
    let hang = true
    const memory = memoryDb()
    const db = {
      collection(name) {
        const real = memory.collection(name)
        return {
          findOneAndUpdate: (...args) => (hang ? new Promise(() => {}) : real.findOneAndUpdate(...args)),
          deleteMany: (...args) => real.deleteMany(...args),
        }
      },
    }
    const throttle = createThrottle({ db })
    const server = await serve('node:http', rateLimit({ limits: [{ throttle, limits: { requests_per_day: 5 }, timeoutMs: 30 }] }))
    try {
      const warnings = await warningsDuring(UNAVAILABLE, async () => {
        await assertUnavailable(await server.get())
        await assertUnavailable(await server.get())
        hang = false
        assert.equal((await server.get()).status, 200)
        hang = true
        await assertUnavailable(await server.get())
      })
      assert.equal(warnings.length, 2, 'one per outage')
    } finally {
      await server.close()
    }
  })
})
