'use strict'
// A request denied by a block: a 429 whose violated-policies names the entry's block item
// (<name>-block with a name) and whose Retry-After is the block's time left; the RateLimit header as
// for any denial. Express 5 and 4, node:http, Fastify, and every framework of the one decision core.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')
const Fastify = require('fastify')

const { KeyedQuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')
const { serve, items } = require('./helpers/http-servers.js')
const { testStore } = require('./helpers/test-store.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const limiterOn = (options = {}) => new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), ...options })

for (const kind of ['Express 5', 'Express 4', 'node:http']) {
  describe(`${kind}: a blocked key`, () => {
    it('is a 429 naming the block item, Retry-After the block\'s time left, RateLimit as usual', async () => {
      const limiter = limiterOn()
      const server = await serve(kind, rateLimit({ limiter, key: () => 'k' }))
      try {
        limiter.block('k', 90_500)
        const res = await server.get()
        assert.equal(res.status, 429)
        assert.equal(res.headers.get('retry-after'), '91')
        assert.deepEqual(items(res, 'RateLimit'), { burst: { r: 5, t: 0 } })
        const body = await res.json()
        assert.deepEqual(body['violated-policies'], ['block'])
        assert.equal(body.retryAfterBasis, 'block')
        assert.equal(body.retryAfterMs, 90_500)
        assert.match(body.detail, /blocked by the "block" rate limit policy.*retry in 1 min 31 s\./)
        limiter.unblock('k')
        assert.equal((await server.get()).status, 200)
      } finally {
        await server.close()
      }
    })

    it('names <name>-block among several entries, the earlier entries refunded', async () => {
      const first = limiterOn()
      const second = limiterOn()
      const server = await serve(kind, rateLimit({ key: () => 'k', limits: [{ limiter: first, name: 'ip' }, { limiter: second, name: 'login' }] }))
      try {
        second.block('k', 10_000)
        const res = await server.get()
        assert.equal(res.status, 429)
        assert.equal(res.headers.get('retry-after'), '10')
        assert.deepEqual((await res.json())['violated-policies'], ['login-block'])
        assert.equal(first.status('k').tokens, 5, 'the first entry refunded')
      } finally {
        await server.close()
      }
    })

    it('an automatic block: the denial that starts it is already the block\'s 429', async () => {
      const limiter = limiterOn({ capacity: 1, block: { after: 2, withinMs: 60_000, forMs: 60_000 } })
      const server = await serve(kind, rateLimit({ limiter, key: () => 'k' }))
      try {
        assert.equal((await server.get()).status, 200)
        assert.deepEqual((await (await server.get()).json())['violated-policies'], ['burst'])
        const res = await server.get()
        assert.equal(res.headers.get('retry-after'), '60')
        assert.deepEqual((await res.json())['violated-policies'], ['block'])
      } finally {
        await server.close()
      }
    })

    it('a shared limiter\'s block: a 429 naming the block item, no store call', async () => {
      const t = testStore()
      const limiter = limiterOn({ quota: { limit: 100, period: { unit: 'day', timeZone: 'UTC' } }, share: { store: t.store, name: 'api' } })
      const server = await serve(kind, rateLimit({ limiter, key: () => 'k', name: 'api' }))
      try {
        limiter.block('k', 5_000)
        const res = await server.get()
        assert.equal(res.status, 429)
        assert.equal(res.headers.get('retry-after'), '5')
        assert.deepEqual((await res.json())['violated-policies'], ['api-block'])
        assert.equal(t.calls.reserve.length, 0, 'no reservation for the blocked key')
      } finally {
        await server.close()
        await limiter.close()
      }
    })
  })
}

describe('Fastify: a blocked key', () => {
  it('is a 429 naming the block item, Retry-After the block\'s time left', async () => {
    const limiter = limiterOn()
    const app = Fastify()
    await app.register(require('../lib/fastify.js'), { limiter, key: () => 'k', name: 'login' })
    app.get('/', async () => 'hello')
    try {
      limiter.block('k', 30_000)
      const res = await app.inject({ method: 'GET', url: '/' })
      assert.equal(res.statusCode, 429)
      assert.equal(res.headers['retry-after'], '30')
      assert.deepEqual(res.json()['violated-policies'], ['login-block'])
    } finally {
      await app.close()
    }
  })
})

// Every framework of the one decision core (Express, node:http, Fastify, Koa, Hono, NestJS on both platforms).
const { FRAMEWORKS, start } = require('./helpers/http-frameworks.js')

for (const kind of Object.keys(FRAMEWORKS)) {
  describe(`a blocked key through ${kind}`, () => {
    it('is a 429 naming <name>-block, Retry-After the block\'s time left', async () => {
      const limiter = limiterOn()
      const server = await start(kind, { limiter, key: () => 'k', name: 'login' })
      try {
        limiter.block('k', 12_000)
        const res = await server.get()
        assert.equal(res.status, 429)
        assert.equal(res.headers.get('retry-after'), '12')
        const body = await res.json()
        assert.deepEqual(body['violated-policies'], ['login-block'])
        assert.equal(body.retryAfterBasis, 'block')
        limiter.unblock('k')
        const again = await server.get()
        assert.equal(again.status, 200)
        await again.text()
      } finally {
        await server.close()
      }
    })
  })
}

describe('a zone: a key blocked in another process of the host', () => {
  it('is a 429 here at once, naming the block item, Retry-After the block\'s time left, RateLimit as usual', { skip: process.platform !== 'linux' && 'zones are Linux only' }, async () => {
    const { zonePath, runWorker } = require('./helpers/zone.js')
    const options = { capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', zone: { path: zonePath('http-blocks') } }
    const limiter = new KeyedQuotaClock(options)
    const server = await serve('Express 5', rateLimit({ limiter, name: 'api', key: () => 'k' }))
    try {
      assert.equal((await server.get()).status, 200)
      runWorker(options, 'run', "limiter.block('k', 60000)")
      const res = await server.get()
      assert.equal(res.status, 429)
      const retryAfter = Number(res.headers.get('retry-after'))
      assert.ok(retryAfter > 50 && retryAfter <= 60, String(retryAfter))
      assert.equal(items(res, 'RateLimit')['api-burst'].r, 4, 'the tokens the key has: the block took none')
      assert.deepEqual((await res.json())['violated-policies'], ['api-block'])
      assert.equal(limiter.stats().blocked, 1)
    } finally {
      await server.close()
      await limiter.close()
    }
  })
})

describe('a fleet-wide block on a real Redis (Express)', () => {
  const Redis = require('ioredis')
  const { startRedisServer } = require('./helpers/redis-server.js')
  const { redisStore, quotaAdmin } = require('../lib/shared.js')
  const { before, after } = require('node:test')
  let redis
  let client
  before(async () => {
    redis = await startRedisServer()
    client = new Redis({ host: redis.host, port: redis.port })
  })
  after(async () => {
    await client?.quit()
    await redis?.stop()
  })

  for (const shape of ['a shared quota', 'a fleet bucket']) it(`an operator's block is the instance's 429 from its first store call for the key: the block item, Retry-After its time left (${shape})`, async () => {
    const store = redisStore(client)
    const name = `http-blocks-${process.pid}-${shape === 'a shared quota' ? 'quota' : 'bucket'}`
    await quotaAdmin(store, { name }).block('k', 90_000)
    const limits =
      shape === 'a shared quota'
        ? { quota: { limit: 100, period: { unit: 'day', timeZone: 'UTC' } }, share: { store, name, timeoutMs: 10_000 } }
        : { share: { store, name, bucket: true, timeoutMs: 10_000 } }
    const limiter = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', ...limits })
    const server = await serve('Express 5', rateLimit({ limiter, key: (req) => req.get('x-key') ?? 'k', name: 'api' }))
    try {
      const res = await server.get()
      assert.equal(res.status, 429)
      const retryAfter = Number(res.headers.get('retry-after'))
      assert.ok(retryAfter > 80 && retryAfter <= 90, `Retry-After ${retryAfter}`)
      const body = await res.json()
      assert.deepEqual(body['violated-policies'], ['api-block'])
      assert.equal(body.retryAfterBasis, 'block')
      // Another key of the same name is not blocked.
      assert.equal((await server.get('/', { headers: { 'x-key': 'other' } })).status, 200)
    } finally {
      await server.close()
      await limiter.close()
    }
  })
})
