'use strict'
// The HTTP middleware on real servers: rateLimit as Express 5 and Express 4 middleware and as a plain
// node:http handler step (no next), on 127.0.0.1, driven by fetch. Limiters run on manual clocks,
// so every header value is known exactly.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')

const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')
const { serializeList } = require('structured-headers')
const { SERVERS, serve, items } = require('./helpers/http-servers.js')

const NOON = Date.UTC(2024, 0, 15, 12) // 16.5 days before February
const TO_FEBRUARY_MS = Date.UTC(2024, 1, 1) - NOON
const JANUARY_S = 31 * 86_400
const MONTH_UTC = { unit: 'month', timeZone: 'UTC' }
const PROBLEM_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded'

function keyedOn(options = {}) {
  const clock = manualClock({ wallMs: NOON })
  const limiter = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock, ...options })
  return { clock, limiter }
}

const byClientHeader = (req) => req.headers['x-client']

function limiterOn(options = {}) {
  const clock = manualClock({ wallMs: NOON })
  const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock, ...options })
  return { clock, limiter }
}

async function problem(response) {
  assert.equal(response.headers.get('content-type'), 'application/problem+json')
  return response.json()
}

for (const kind of Object.keys(SERVERS)) {
  describe(`rateLimit on ${kind}`, () => {
    const servers = []
    async function start(middleware) {
      const server = await serve(kind, middleware)
      servers.push(server)
      return server
    }
    after(async () => {
      for (const server of servers) await server.close()
    })

    it('an allowed request passes with RateLimit-Policy and RateLimit: a structured list, one item per limit', async () => {
      const { limiter } = limiterOn({ quota: { limit: 100, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter }))
      const response = await server.get()
      assert.equal(response.status, 200)
      assert.equal(await response.text(), 'hello')
      assert.equal(response.headers.get('ratelimit-policy'), '"burst";q=5;w=10, "month";q=100;w=2678400')
      assert.deepEqual(items(response, 'ratelimit-policy'), { burst: { q: 5, w: 10 }, month: { q: 100, w: JANUARY_S } })
      // 4 tokens left, full again in (5 - 4) / 0.5 = 2 s; 99 left in the month, which ends in 16.5 days.
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 4, t: 2 }, month: { r: 99, t: TO_FEBRUARY_MS / 1000 } })
      assert.equal(response.headers.get('retry-after'), null)
    })

    it('a limiter without a quota has only the burst item; w is ceil(capacity / refillPerSecond)', async () => {
      const { limiter } = limiterOn({ capacity: 10, refillPerSecond: 3 })
      const server = await start(rateLimit({ limiter }))
      const response = await server.get()
      assert.equal(response.headers.get('ratelimit-policy'), '"burst";q=10;w=4')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 9, t: 1 } })
    })

    it('a request the bucket denies: 429, Retry-After, headers, and the RFC 9457 problem body; nothing consumed', async () => {
      const { limiter } = limiterOn({ capacity: 1, quota: { limit: 100, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter }))
      assert.equal((await server.get()).status, 200)
      const response = await server.get()
      assert.equal(response.status, 429)
      assert.equal(response.headers.get('retry-after'), '2')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 0, t: 2 }, month: { r: 99, t: TO_FEBRUARY_MS / 1000 } })
      assert.deepEqual(items(response, 'ratelimit-policy'), { burst: { q: 1, w: 2 }, month: { q: 100, w: JANUARY_S } })
      const body = await problem(response)
      assert.deepEqual(Object.keys(body).sort(), ['detail', 'retryAfterBasis', 'retryAfterMs', 'status', 'title', 'type', 'violated-policies'])
      assert.equal(body.type, PROBLEM_TYPE)
      assert.equal(body.title, 'Too Many Requests')
      assert.equal(body.status, 429)
      assert.deepEqual(body['violated-policies'], ['burst'])
      assert.equal(body.retryAfterMs, 2000)
      assert.equal(body.retryAfterBasis, 'monotonic-refill')
      assert.match(body.detail, /2 seconds/)
      assert.equal(limiter.status().quotaUsed, 1, 'the denied request took nothing')
    })

    it('a request the quota denies names the quota unit and waits for the period to end', async () => {
      const { limiter } = limiterOn({ quota: { limit: 1, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter }))
      await server.get()
      const response = await server.get()
      assert.equal(response.status, 429)
      assert.equal(response.headers.get('retry-after'), String(TO_FEBRUARY_MS / 1000))
      const body = await problem(response)
      assert.deepEqual(body['violated-policies'], ['month'])
      assert.equal(body.retryAfterMs, TO_FEBRUARY_MS)
      assert.equal(body.retryAfterBasis, 'wall-period')
      assert.deepEqual(items(response, 'ratelimit').month, { r: 0, t: TO_FEBRUARY_MS / 1000 })
    })

    it('when the bucket and the quota both deny, both are violated policies', async () => {
      const { limiter } = limiterOn({ capacity: 1, quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC' } } })
      const server = await start(rateLimit({ limiter, name: 'api' }))
      await server.get()
      const response = await server.get()
      const body = await problem(response)
      assert.deepEqual(body['violated-policies'], ['api-burst', 'api-day'])
      assert.equal(body.retryAfterBasis, 'wall-period')
      assert.deepEqual(Object.keys(items(response, 'ratelimit-policy')), ['api-burst', 'api-day'])
    })

    it("name prefixes every item '<name>-'", async () => {
      const { limiter } = limiterOn({ quota: { limit: 100, period: { unit: 'week', timeZone: 'UTC' } } })
      const server = await start(rateLimit({ limiter, name: 'tenant' }))
      const response = await server.get()
      assert.deepEqual(items(response, 'ratelimit-policy'), { 'tenant-burst': { q: 5, w: 10 }, 'tenant-week': { q: 100, w: 7 * 86_400 } })
    })

    it('headers: false sends no RateLimit headers; a denial still has Retry-After and the body', async () => {
      const { limiter } = limiterOn({ capacity: 1 })
      const server = await start(rateLimit({ limiter, headers: false }))
      const allowed = await server.get()
      assert.equal(allowed.headers.get('ratelimit'), null)
      assert.equal(allowed.headers.get('ratelimit-policy'), null)
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.equal(denied.headers.get('ratelimit'), null)
      assert.equal(denied.headers.get('retry-after'), '2')
      assert.deepEqual((await problem(denied))['violated-policies'], ['burst'])
    })

    it('skip: a skipped request passes, takes nothing and gets no headers', async () => {
      const { limiter } = limiterOn({ capacity: 1 })
      const server = await start(rateLimit({ limiter, skip: (req) => req.url === '/?health' }))
      for (let i = 0; i < 3; i++) {
        const response = await server.get('/?health')
        assert.equal(response.status, 200)
        assert.equal(response.headers.get('ratelimit'), null)
      }
      assert.equal(limiter.status().tokens, 1)
      assert.equal((await server.get()).status, 200)
      assert.equal((await server.get()).status, 429)
    })

    it('cost: a request takes cost(req) tokens and quota units', async () => {
      const { limiter } = limiterOn({ quota: { limit: 100, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter, cost: (req) => (req.url === '/?big' ? 3 : 1) }))
      const response = await server.get('/?big')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 2, t: 6 }, month: { r: 97, t: TO_FEBRUARY_MS / 1000 } })
      const denied = await server.get('/?big')
      assert.equal(denied.status, 429)
      assert.equal((await problem(denied)).retryAfterMs, 2000) // one token short at 0.5/s
      assert.equal((await server.get()).status, 200)
    })

    it('onLimited replaces the 429 response; it gets the decision and the violated items, with the headers set', async () => {
      const { limiter } = limiterOn({ capacity: 1 })
      const seen = []
      const onLimited = (req, res, info) => {
        seen.push(info)
        res.statusCode = 429
        res.setHeader('Content-Type', 'text/plain')
        res.end('slow down')
      }
      const server = await start(rateLimit({ limiter, onLimited }))
      await server.get()
      const response = await server.get()
      assert.equal(response.status, 429)
      assert.equal(await response.text(), 'slow down')
      assert.equal(response.headers.get('retry-after'), '2')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 0, t: 2 } })
      assert.equal(seen.length, 1)
      assert.deepEqual(seen[0].violated, ['burst'])
      assert.equal(seen[0].decision.allowed, false)
      assert.equal(seen[0].decision.retryAfterMs, 2000)
    })

    // What a failure looks like: Express passes it to the error handler (599 here); without next, 500.
    async function assertFailed(response, code) {
      if (kind === 'node:http') {
        assert.equal(response.status, 500)
        const body = await problem(response)
        assert.equal(body.status, 500)
        assert.equal(body.title, 'Internal Server Error')
        assert.equal(body.code, code)
      } else {
        assert.equal(response.status, 599)
        const body = await response.json()
        assert.equal(body.nextErr, true)
        assert.equal(body.code, code)
      }
    }

    it('an error from the limiter (a monotonic regression) goes to next(err), or a 500 problem without next', async () => {
      const { limiter, clock } = limiterOn()
      const server = await start(rateLimit({ limiter }))
      clock.set({ monotonicMs: -1 })
      await assertFailed(await server.get(), 'ERR_MONOTONIC_REGRESSION')
    })

    it('a bad cost is the limiter\'s RangeError ERR_INVALID_ARG, through next(err) or a 500; nothing is consumed', async () => {
      const { limiter } = limiterOn({ quota: { limit: 10, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter, cost: () => 0 }))
      await assertFailed(await server.get(), 'ERR_INVALID_ARG')
      assert.equal(limiter.status().quotaUsed, 0)
    })

    it('a throwing onLimited, or one whose promise rejects, is an error like any other', async () => {
      const boom = Object.assign(new Error('boom'), { code: 'E_BOOM' })
      const { limiter } = limiterOn({ capacity: 1 })
      const server = await start(rateLimit({ limiter, onLimited: () => { throw boom } }))
      await server.get()
      await assertFailed(await server.get(), 'E_BOOM')
      const other = limiterOn({ capacity: 1 })
      const asyncServer = await start(rateLimit({ limiter: other.limiter, onLimited: async () => { throw boom } }))
      await asyncServer.get()
      await assertFailed(await asyncServer.get(), 'E_BOOM')
    })

    it('a throwing skip, key or cost is an error like any other, and nothing is consumed', async () => {
      const boom = () => {
        throw Object.assign(new Error('boom'), { code: 'E_BOOM' })
      }
      const { limiter } = keyedOn({ quota: { limit: 10, period: MONTH_UTC } })
      for (const options of [{ skip: boom }, { key: boom }, { cost: boom }]) {
        const server = await start(rateLimit({ limiter, ...options }))
        await assertFailed(await server.get(), 'E_BOOM')
        const several = await start(rateLimit({ limits: [{ limiter: limiterOn().limiter, name: 'a' }, { limiter }], ...options }))
        await assertFailed(await several.get(), 'E_BOOM')
      }
      assert.equal(limiter.size, 0)
    })

    it('several limits: a later denial refunds the earlier ones, so a denied request consumes nothing anywhere', async () => {
      const wide = limiterOn({ capacity: 100, quota: { limit: 1000, period: MONTH_UTC } })
      const narrow = limiterOn({ capacity: 1 })
      const server = await start(rateLimit({ limits: [{ limiter: wide.limiter, name: 'site' }, { limiter: narrow.limiter, name: 'client' }] }))
      const first = await server.get()
      assert.equal(first.status, 200)
      assert.deepEqual(items(first, 'ratelimit'), {
        'site-burst': { r: 99, t: 2 },
        'site-month': { r: 999, t: TO_FEBRUARY_MS / 1000 },
        'client-burst': { r: 0, t: 2 },
      })
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.deepEqual((await problem(denied))['violated-policies'], ['client-burst'])
      const site = wide.limiter.status()
      assert.equal(site.tokens, 99, 'the site bucket got its token back')
      assert.equal(site.quotaUsed, 1, 'the site quota got its unit back')
      // The headers report the refunded state of the earlier limit.
      assert.deepEqual(items(denied, 'ratelimit')['site-month'], { r: 999, t: TO_FEBRUARY_MS / 1000 })
      assert.deepEqual(Object.keys(items(denied, 'ratelimit-policy')), ['site-burst', 'site-month', 'client-burst'])
    })

    it('several limits: checking stops at the first denial; the later ones are reported from status, untouched', async () => {
      const narrow = limiterOn({ capacity: 1 })
      const wide = limiterOn({ capacity: 100, quota: { limit: 1000, period: MONTH_UTC } })
      const server = await start(rateLimit({ limits: [{ limiter: narrow.limiter, name: 'client' }, { limiter: wide.limiter }] }))
      await server.get()
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.equal(wide.limiter.status().quotaUsed, 1, 'the later limit was not asked')
      assert.deepEqual(items(denied, 'ratelimit'), {
        'client-burst': { r: 0, t: 2 },
        burst: { r: 99, t: 2 },
        month: { r: 999, t: TO_FEBRUARY_MS / 1000 },
      })
    })

    it('a KeyedQuotaClock keeps a bucket per key: the default key is the client address', async () => {
      const { limiter } = keyedOn({ capacity: 1 })
      const server = await start(rateLimit({ limiter }))
      assert.equal((await server.get()).status, 200)
      assert.equal((await server.get()).status, 429)
      assert.equal(limiter.status('127.0.0.1').tokens, 0, "the key was the client's address")
      assert.equal(limiter.size, 1)
    })

    it('a KeyedQuotaClock with key: one bucket per key, and each key\'s own limits (policy) in its headers', async () => {
      const policy = (key) => (key === 'pro' ? { capacity: 50, quota: { limit: 10_000, period: { unit: 'day', timeZone: 'UTC' } } } : undefined)
      const { limiter } = keyedOn({ capacity: 2, policy, quota: { limit: 100, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter, key: byClientHeader }))
      const free = await server.get('/', { headers: { 'X-Client': 'free' } })
      assert.deepEqual(items(free, 'ratelimit-policy'), { burst: { q: 2, w: 4 }, month: { q: 100, w: JANUARY_S } })
      assert.deepEqual(items(free, 'ratelimit'), { burst: { r: 1, t: 2 }, month: { r: 99, t: TO_FEBRUARY_MS / 1000 } })
      const pro = await server.get('/', { headers: { 'X-Client': 'pro' } })
      assert.deepEqual(items(pro, 'ratelimit-policy'), { burst: { q: 50, w: 100 }, day: { q: 10_000, w: 86_400 } })
      assert.deepEqual(items(pro, 'ratelimit'), { burst: { r: 49, t: 2 }, day: { r: 9_999, t: 12 * 3600 } })
      await server.get('/', { headers: { 'X-Client': 'free' } })
      assert.equal((await server.get('/', { headers: { 'X-Client': 'free' } })).status, 429)
      assert.equal((await server.get('/', { headers: { 'X-Client': 'pro' } })).status, 200, 'another key is not limited')
    })

    it("a bad key (empty) is the limiter's TypeError/RangeError ERR_INVALID_ARG, through next(err) or a 500", async () => {
      const { limiter } = keyedOn()
      const server = await start(rateLimit({ limiter, key: () => '' }))
      await assertFailed(await server.get(), 'ERR_INVALID_ARG')
      const notString = await start(rateLimit({ limiter, key: () => 42 }))
      await assertFailed(await notString.get(), 'ERR_INVALID_ARG')
    })

    it('ERR_KEY_LIMIT (every held key has quota use) goes to next(err), or a 500', async () => {
      const { limiter } = keyedOn({ maxKeys: 1, quota: { limit: 10, period: MONTH_UTC } })
      const server = await start(rateLimit({ limiter, key: byClientHeader }))
      assert.equal((await server.get('/', { headers: { 'X-Client': 'a' } })).status, 200)
      await assertFailed(await server.get('/', { headers: { 'X-Client': 'b' } }), 'ERR_KEY_LIMIT')
    })

    it('several keyed limits: top-level key and cost are every entry\'s default; a denial refunds the others by key', async () => {
      const perClient = keyedOn({ capacity: 10 })
      const perTenant = keyedOn({ capacity: 100, quota: { limit: 3, period: MONTH_UTC } })
      const server = await start(
        rateLimit({
          key: byClientHeader,
          cost: () => 1,
          limits: [
            { limiter: perClient.limiter, name: 'client' },
            { limiter: perTenant.limiter, name: 'tenant', key: (req) => req.headers['x-tenant'], cost: () => 2 },
          ],
        }),
      )
      const headers = { 'X-Client': 'c1', 'X-Tenant': 't1' }
      const first = await server.get('/', { headers })
      assert.deepEqual(items(first, 'ratelimit'), {
        'client-burst': { r: 9, t: 2 },
        'tenant-burst': { r: 98, t: 4 },
        'tenant-month': { r: 1, t: TO_FEBRUARY_MS / 1000 },
      })
      const denied = await server.get('/', { headers })
      assert.equal(denied.status, 429)
      assert.deepEqual((await problem(denied))['violated-policies'], ['tenant-month'])
      assert.equal(perClient.limiter.status('c1').tokens, 9, "the client's token came back")
      assert.equal(perTenant.limiter.status('t1').quotaUsed, 2)
      assert.deepEqual(items(denied, 'ratelimit')['client-burst'], { r: 9, t: 2 })
    })

    it('several limits: an error in a later limit refunds the earlier ones', async () => {
      const wide = limiterOn({ capacity: 100 })
      const broken = limiterOn()
      broken.clock.set({ monotonicMs: -1 })
      const server = await start(rateLimit({ limits: [{ limiter: wide.limiter, name: 'a' }, { limiter: broken.limiter, name: 'b' }] }))
      await assertFailed(await server.get(), 'ERR_MONOTONIC_REGRESSION')
      assert.equal(wide.limiter.status().tokens, 100)
    })
  })
}

describe('rateLimit options are checked when rateLimit is called (ERR_INVALID_OPTION)', () => {
  const { limiter } = limiterOn()

  function refuses(options, ErrorClass, pattern) {
    assert.throws(
      () => rateLimit(options),
      (err) => {
        assert.ok(err instanceof ErrorClass, `expected ${ErrorClass.name}, got ${err.name}: ${err.message}`)
        assert.equal(err.code, 'ERR_INVALID_OPTION')
        assert.match(err.message, pattern)
        return true
      },
    )
  }

  it('options must be an object naming limiter or limits', () => {
    refuses(undefined, TypeError, /options must be an object/)
    refuses({}, TypeError, /limiter or limits is required/)
    refuses({ limiter, limits: [{ limiter }] }, TypeError, /not both/)
    refuses({ limiter: {} }, TypeError, /limiter must be a .*QuotaClock/)
    refuses({ limits: [] }, RangeError, /at least one entry/)
    refuses({ limits: {} }, TypeError, /limits must be an array/)
    refuses({ limits: [null] }, TypeError, /limits\[0\] must be an object/)
  })

  it("express-rate-limit's options are refused with what to use instead", () => {
    refuses({ limiter, keyGenerator: (req) => req.ip }, TypeError, /unknown option 'keyGenerator'.*key: \(req\) => string/)
    refuses({ limiter, windowMs: 60_000 }, TypeError, /unknown option 'windowMs'.*KeyedQuotaClock/)
    refuses({ limiter, standardHeaders: 'draft-8' }, TypeError, /unknown option 'standardHeaders'.*headers: 'draft-11'/)
    refuses({ limiter, handler: () => {} }, TypeError, /unknown option 'handler'.*onLimited/)
  })

  it('a misspelled option names the key and the one it resembles', () => {
    refuses({ limiter, onlimited: () => {} }, TypeError, /unknown option 'onlimited' \(did you mean 'onLimited'\?\)/)
    refuses({ limits: [{ limiter, nmae: 'x' }] }, TypeError, /unknown option 'limits\[0\]\.nmae' \(did you mean 'name'\?\)/)
  })

  it('a key whose value is undefined counts as absent', () => {
    assert.equal(typeof rateLimit({ limiter, keyGenerator: undefined, name: undefined }), 'function')
  })

  it('functions must be functions; headers is draft-11 or false', () => {
    refuses({ limiter, skip: true }, TypeError, /skip must be a function/)
    refuses({ limiter, cost: 2 }, TypeError, /cost must be a function/)
    refuses({ limiter, onLimited: 'x' }, TypeError, /onLimited must be a function/)
    refuses({ limiter, headers: 'draft-8' }, RangeError, /headers must be 'draft-11' or false, received "draft-8"/)
    refuses({ limiter, headers: true }, TypeError, /headers must be 'draft-11' or false, received true/)
  })

  it('a QuotaClock takes no key: it is one limit for every request', () => {
    refuses({ limiter, key: (req) => req.ip }, TypeError, /KeyedQuotaClock/)
    refuses({ limits: [{ limiter, key: (req) => req.ip }] }, TypeError, /limits\[0\]\.key is for a KeyedQuotaClock/)
  })

  it('entry names are unique (an unnamed entry counts once) and fit in a header', () => {
    const other = limiterOn().limiter
    refuses({ limits: [{ limiter, name: 'a' }, { limiter: other, name: 'a' }] }, RangeError, /names must be unique: limits\[0\] and limits\[1\]/)
    refuses({ limits: [{ limiter }, { limiter: other }] }, RangeError, /names must be unique/)
    refuses({ limiter, name: 'café' }, RangeError, /printable ASCII/)
    refuses({ limiter, name: '' }, RangeError, /non-empty/)
    refuses({ limiter, name: 7 }, TypeError, /name must be a string/)
    assert.equal(typeof rateLimit({ limits: [{ limiter, name: 'a' }, { limiter: other }] }), 'function')
  })

  it('a throttle entry is checked too', () => {
    const throttle = { check: async () => ({ allowed: true }) }
    refuses({ limits: [{ throttle, limits: {} }] }, RangeError, /at least one of requests_per_month/)
    refuses({ limits: [{ throttle, limits: { requests_per_hour: 5 } }] }, TypeError, /unknown option 'limits\[0\]\.limits\.requests_per_hour'/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: -1 } }] }, RangeError, /requests_per_day must be a non-negative safe integer/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: '5' } }] }, TypeError, /requests_per_day must be a non-negative safe integer/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: 5 }, timeoutMs: 0 }] }, RangeError, /timeoutMs must be a number of milliseconds > 0/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: 5 }, timeoutMs: Infinity }] }, RangeError, /timeoutMs/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: 5 }, timeoutMs: '300' }] }, TypeError, /timeoutMs must be a number/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: 5 }, failOpen: 'yes' }] }, TypeError, /failOpen must be a boolean/)
    refuses({ limits: [{ throttle, limits: { requests_per_day: 5 }, cost: () => 1 }] }, TypeError, /unknown option 'limits\[0\]\.cost'/)
    refuses({ limits: [{ throttle: {}, limits: { requests_per_day: 5 } }] }, TypeError, /throttle must be a throttle from createThrottle/)
    refuses({ limits: [{ throttle, limiter, limits: { requests_per_day: 5 } }] }, TypeError, /both limiter and throttle/)
  })
})

describe('rateLimit as a node:http handler step', () => {
  let server
  before(async () => {
    const { limiter } = limiterOn({ capacity: 1 })
    const limit = rateLimit({ limiter })
    server = await serve(undefined, undefined, {
      app: (req, res) => {
        // Without next, an allowed request just returns; a limited one has been answered.
        assert.equal(limit(req, res), undefined)
        if (res.writableEnded) return
        res.end('served')
      },
    })
  })
  after(() => server.close())

  it('returns undefined for in-process limits; the response tells whether it was answered', async () => {
    const allowed = await server.get()
    assert.equal(await allowed.text(), 'served')
    const denied = await server.get()
    assert.equal(denied.status, 429)
  })
})

describe('header serialization matches RFC 9651 (checked with the structured-headers library)', () => {
  function headersOf(middleware) {
    const headers = {}
    middleware({ ip: '192.0.2.1', headers: {} }, { statusCode: 200, headersSent: false, setHeader: (name, value) => (headers[name] = value), end() {} }, () => {})
    return headers
  }

  it('every printable ASCII character in a name is quoted and escaped as the library serializes it', () => {
    const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join('')
    for (const name of [printable, '"', '\\', 'a"b\\c', ' x ']) {
      const { limiter } = limiterOn({ quota: { limit: 10, period: MONTH_UTC } })
      const headers = headersOf(rateLimit({ limiter, name }))
      const expected = serializeList([
        [`${name}-burst`, new Map([['q', 5], ['w', 10]])],
        [`${name}-month`, new Map([['q', 10], ['w', JANUARY_S]])],
      ])
      assert.equal(headers['RateLimit-Policy'], expected, JSON.stringify(name))
    }
  })

  it("a quota's t is read from the limiter's own clock: a plain JS clock object too, keyed or not", () => {
    let wall = Date.UTC(2030, 5, 30, 23, 59, 50) // 10 s before July, far from Date.now()
    let mono = 0
    const clock = { monotonicMs: () => mono, wallMs: () => wall }
    const quota = { limit: 5, period: { unit: 'month', timeZone: 'UTC' } }
    const single = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota })
    const keyed = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota })
    for (const limiter of [single, keyed]) {
      assert.equal(headersOf(rateLimit({ limiter })).RateLimit, '"burst";r=4;t=1, "month";r=4;t=10')
    }
    // The period ends: the next request reads the new one (July: 31 days) from status.
    wall += 15_000
    mono += 15_000
    for (const limiter of [single, keyed]) {
      const middleware = rateLimit({ limiter })
      const headers = headersOf(middleware)
      assert.equal(headers['RateLimit-Policy'], `"burst";q=5;w=5, "month";q=5;w=${31 * 86_400}`)
      assert.equal(headers.RateLimit, `"burst";r=4;t=1, "month";r=4;t=${31 * 86_400 - 5}`)
    }
  })

  it("a key that comes back under other limits from policy shows them at once", () => {
    let capacity = 2
    const { limiter } = keyedOn({ policy: () => ({ capacity }) })
    const middleware = rateLimit({ limiter })
    assert.equal(headersOf(middleware)['RateLimit-Policy'], '"burst";q=2;w=4')
    limiter.delete('192.0.2.1')
    capacity = 8
    const headers = headersOf(middleware)
    assert.equal(headers['RateLimit-Policy'], '"burst";q=8;w=16')
    assert.equal(headers.RateLimit, '"burst";r=7;t=2')
  })

  it('one middleware follows its limiter into the next period', () => {
    const clock = manualClock({ wallMs: Date.UTC(2024, 0, 31, 23, 59, 59) })
    const limiter = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 5, period: MONTH_UTC } })
    const middleware = rateLimit({ limiter })
    assert.equal(headersOf(middleware)['RateLimit-Policy'], `"burst";q=5;w=5, "month";q=5;w=${JANUARY_S}`)
    clock.advance(2_000)
    const headers = headersOf(middleware)
    assert.equal(headers['RateLimit-Policy'], `"burst";q=5;w=5, "month";q=5;w=${29 * 86_400}`, 'February 2024')
    assert.equal(headers.RateLimit, `"burst";r=4;t=1, "month";r=4;t=${29 * 86_400 - 1}`)
  })

  it('integers beyond the sf-integer range are written as its largest value', () => {
    const { limiter } = limiterOn({ quota: { limit: Number.MAX_SAFE_INTEGER, period: MONTH_UTC } })
    const headers = headersOf(rateLimit({ limiter }))
    assert.equal(headers['RateLimit-Policy'], serializeList([
      ['burst', new Map([['q', 5], ['w', 10]])],
      ['month', new Map([['q', 999_999_999_999_999], ['w', JANUARY_S]])],
    ]))
    assert.equal(headers.RateLimit, serializeList([
      ['burst', new Map([['r', 4], ['t', 2]])],
      ['month', new Map([['r', 999_999_999_999_999], ['t', TO_FEBRUARY_MS / 1000]])],
    ]))
  })
})

describe('the quota-clock-source/http subpath', () => {
  it('require and import give the same functions, sharing the limiter classes of the main entry', async () => {
    const cjs = require('quota-clock-source/http')
    const esm = await import('quota-clock-source/http')
    assert.equal(cjs.rateLimit, rateLimit)
    assert.equal(esm.rateLimit, rateLimit)
    assert.equal(esm.clientKey, cjs.clientKey)
    assert.equal(esm.default, cjs)
    const { KeyedQuotaClock: FromImport } = await import('quota-clock-source')
    const limiter = new FromImport({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })
    assert.equal(typeof esm.rateLimit({ limiter }), 'function', 'a limiter made through import is accepted')
  })
})
