'use strict'
// The behavioural cases of rateLimit that every framework adapter passes: the Express/Connect and
// node:http middleware (__test__/http-cases.test.js) and the Fastify plugin (__test__/http-fastify.test.js).
// Limiters run on manual clocks, so every header value is known exactly. (Not a test file.)

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')

const { KeyedQuotaClock, QuotaClock, manualClock, createThrottle, memoryDb } = require('../..')
const { FRAMEWORKS, ERROR_STATUS, start, textOnLimited, headerOf, problemTypeOf } = require('./http-frameworks.js')
const { items } = require('./http-servers.js')

const NOON = Date.UTC(2024, 0, 15, 12) // 16.5 days before February
const TO_FEBRUARY_S = (Date.UTC(2024, 1, 1) - NOON) / 1000
const JANUARY_S = 31 * 86_400
const MONTH_UTC = { unit: 'month', timeZone: 'UTC' }
const PROBLEM_TYPE = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const FALSY = [null, false, 0, '', undefined]

function limiterOn(options = {}) {
  return new QuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), ...options })
}

function keyedOn(options = {}) {
  return new KeyedQuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), ...options })
}

/** A request to `server`, resolved once its response is read and refundIf (when the request took from `limiter`) has been asked. */
async function refundedAfter(limiter, server) {
  const response = await server.get()
  await response.text()
  // refundIf runs on the response's finish, which the server sees as the client reads it.
  await new Promise((resolve) => setImmediate(resolve))
  return response
}

/** Defines the cases for one framework of ./http-frameworks.js. */
function defineCases(kind) {
  const framework = FRAMEWORKS[kind]
  // What the cases' callbacks read of a request: its URL, a header (Hono's Context has neither as Node's).
  const urlOf = framework.urlOf ?? ((req) => req.url)
  const byClient = (req) => headerOf(kind, req, 'x-client')

  async function problem(response) {
    assert.equal(response.headers.get('content-type'), problemTypeOf(kind))
    return response.json()
  }
  describe(`rateLimit's behaviour on ${kind}`, () => {
    const servers = []
    async function serve(options, settings) {
      const server = await start(kind, options, settings)
      servers.push(server)
      return server
    }
    after(async () => {
      for (const server of servers) await server.close()
    })

    /** The request reached the error path (next(err) / done(err)), or without next a 500 problem. */
    async function assertFailed(response, code, messagePattern) {
      if (framework.withoutNext) {
        assert.equal(response.status, 500)
        const body = await problem(response)
        assert.equal(body.title, 'Internal Server Error')
        assert.equal(body.code, code)
        return
      }
      assert.equal(response.status, ERROR_STATUS)
      const body = await response.json()
      assert.equal(body.nextErr, true)
      assert.equal(body.code, code, body.message)
      if (messagePattern) assert.match(body.message, messagePattern)
    }

    it('an allowed request passes with RateLimit-Policy and RateLimit, one item per limit', async () => {
      const server = await serve({ limiter: limiterOn({ quota: { limit: 100, period: MONTH_UTC } }) })
      const response = await server.get()
      assert.equal(response.status, 200)
      assert.equal(await response.text(), 'hello')
      assert.equal(response.headers.get('ratelimit-policy'), '"burst";q=5;w=10, "month";q=100;w=2678400')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 4, t: 2 }, month: { r: 99, t: TO_FEBRUARY_S } })
      assert.equal(response.headers.get('retry-after'), null)
    })

    it('a bucket denial is a 429 with Retry-After, the headers and the RFC 9457 problem body; nothing consumed', async () => {
      const limiter = limiterOn({ capacity: 1, quota: { limit: 100, period: MONTH_UTC } })
      const server = await serve({ limiter })
      assert.equal((await server.get()).status, 200)
      const response = await server.get()
      assert.equal(response.status, 429)
      assert.equal(response.headers.get('retry-after'), '2')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 0, t: 2 }, month: { r: 99, t: TO_FEBRUARY_S } })
      assert.deepEqual(items(response, 'ratelimit-policy'), { burst: { q: 1, w: 2 }, month: { q: 100, w: JANUARY_S } })
      assert.deepEqual(await problem(response), {
        type: PROBLEM_TYPE,
        title: 'Too Many Requests',
        status: 429,
        detail: 'The "burst" rate limit policy is exhausted; retry after 2 seconds.',
        'violated-policies': ['burst'],
        retryAfterMs: 2000,
        retryAfterBasis: 'monotonic-refill',
      })
      assert.equal(limiter.status().quotaUsed, 1, 'the denied request took nothing')
      assert.equal(server.state.hits, 1)
    })

    it('a quota denial names the quota unit and waits for the period to end', async () => {
      const server = await serve({ limiter: limiterOn({ quota: { limit: 1, period: MONTH_UTC } }), name: 'api' })
      await server.get()
      const response = await server.get()
      assert.equal(response.status, 429)
      assert.equal(response.headers.get('retry-after'), String(TO_FEBRUARY_S))
      const body = await problem(response)
      assert.deepEqual(body['violated-policies'], ['api-month'])
      assert.equal(body.retryAfterBasis, 'wall-period')
    })

    it("a quota denial's detail says the wait as a person reads it, and when the quota resets in its period's time zone", async () => {
      const cases = [
        [{ limiter: limiterOn({ quota: { limit: 1, period: MONTH_UTC } }) }, '"month"', 'in 16 days 12 h (at 2024-02-01 00:00 UTC)'],
        [{ limiter: limiterOn({ quota: { limit: 1, period: { unit: 'month', timeZone: 'America/Los_Angeles' } } }), headers: false }, '"month"', 'in 16 days 20 h (at 2024-02-01 00:00 America/Los_Angeles)'],
        [{ limiter: keyedOn({ quota: { limit: 1, period: { unit: 'day', timeZone: 'Asia/Kolkata', anchorTime: '06:30' } } }), key: () => 'k' }, '"day"', 'in 13 h (at 2024-01-16 06:30 Asia/Kolkata)'],
        [{ limits: [{ limiter: limiterOn(), name: 'local' }, { limiter: limiterOn({ quota: { limit: 1, period: { unit: 'week', timeZone: 'Europe/Berlin' } } }), name: 'api' }] }, '"api-week"', 'in 6 days 11 h (at 2024-01-22 00:00 Europe/Berlin)'],
      ]
      for (const [options, item, wait] of cases) {
        const server = await serve(options)
        await (await server.get()).text()
        const response = await server.get()
        assert.equal(response.status, 429)
        const body = await problem(response)
        assert.equal(body.retryAfterBasis, 'wall-period')
        assert.equal(body.detail, `The ${item} rate limit policy is exhausted; retry ${wait}.`)
      }
    })

    it('headers: false sends no RateLimit headers; a denial still has Retry-After and the body', async () => {
      const server = await serve({ limiter: limiterOn({ capacity: 1 }), headers: false })
      assert.equal((await server.get()).headers.get('ratelimit'), null)
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.equal(denied.headers.get('ratelimit-policy'), null)
      assert.equal(denied.headers.get('retry-after'), '2')
    })

    it('skip, sync or async: true passes with nothing taken and no headers; `async () => false` does not skip', async () => {
      const limiter = limiterOn({ capacity: 1 })
      const server = await serve({ limiter, skip: async (req) => urlOf(req) === '/?health' })
      for (let i = 0; i < 3; i++) {
        const response = await server.get('/?health')
        assert.equal(response.status, 200)
        assert.equal(response.headers.get('ratelimit'), null)
      }
      assert.equal(limiter.status().tokens, 1)
      assert.equal((await server.get()).status, 200)
      assert.equal((await server.get()).status, 429, 'a promise of false is not a skip')
      const falseLimiter = limiterOn({ capacity: 1 })
      const never = await serve({ limiter: falseLimiter, skip: async () => false })
      assert.equal((await never.get()).status, 200)
      assert.equal((await never.get()).status, 429)
    })

    it('cost and key may answer with promises (awaited): the request takes what they resolve to', async () => {
      const limiter = keyedOn({ quota: { limit: 100, period: MONTH_UTC } })
      const server = await serve({ limiter, key: async (req) => byClient(req), cost: async () => 3 })
      const response = await server.get('/', { headers: { 'X-Client': 'a' } })
      assert.equal(response.status, 200)
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 2, t: 6 }, month: { r: 97, t: TO_FEBRUARY_S } })
      assert.equal(limiter.status('a').quotaUsed, 3)
      assert.equal((await server.get('/', { headers: { 'X-Client': 'a' } })).status, 429)
      assert.equal((await server.get('/', { headers: { 'X-Client': 'b' } })).status, 200)
    })

    it('several limits with async callbacks: all-or-nothing still holds', async () => {
      const wide = keyedOn({ capacity: 100, quota: { limit: 1000, period: MONTH_UTC } })
      const narrow = keyedOn({ capacity: 1 })
      const server = await serve({
        key: async (req) => byClient(req),
        limits: [{ limiter: wide, name: 'site' }, { limiter: narrow, name: 'client', cost: async () => 1 }],
      })
      const headers = { 'X-Client': 'c' }
      assert.equal((await server.get('/', { headers })).status, 200)
      const denied = await server.get('/', { headers })
      assert.equal(denied.status, 429)
      assert.deepEqual((await problem(denied))['violated-policies'], ['client-burst'])
      assert.equal(wide.status('c').quotaUsed, 1, 'the earlier limit got its unit back')
      assert.deepEqual(items(denied, 'ratelimit')['site-month'], { r: 999, t: TO_FEBRUARY_S })
    })

    it('several limits: a later denial refunds the earlier ones; the later ones are reported from status', async () => {
      const wide = limiterOn({ capacity: 100, quota: { limit: 1000, period: MONTH_UTC } })
      const narrow = limiterOn({ capacity: 1 })
      const untouched = limiterOn({ capacity: 50 })
      const server = await serve({ limits: [{ limiter: wide, name: 'site' }, { limiter: narrow, name: 'client' }, { limiter: untouched, name: 'later' }] })
      const first = await server.get()
      assert.deepEqual(items(first, 'ratelimit'), {
        'site-burst': { r: 99, t: 2 },
        'site-month': { r: 999, t: TO_FEBRUARY_S },
        'client-burst': { r: 0, t: 2 },
        'later-burst': { r: 49, t: 2 },
      })
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.equal(wide.status().quotaUsed, 1)
      assert.equal(untouched.status().tokens, 49)
      assert.deepEqual(Object.keys(items(denied, 'ratelimit')), ['site-burst', 'site-month', 'client-burst', 'later-burst'])
      assert.deepEqual(items(denied, 'ratelimit')['site-month'], { r: 999, t: TO_FEBRUARY_S })
    })

    it('a KeyedQuotaClock keyed by default on the client address', async () => {
      const limiter = keyedOn({ capacity: 1 })
      const server = await serve({ limiter })
      assert.equal((await server.get()).status, 200)
      assert.equal((await server.get()).status, 429)
      assert.equal(limiter.status('127.0.0.1').tokens, 0)
    })

    it('onLimited replaces the 429; it gets the decision and the violated items, with the headers set', async () => {
      const seen = []
      const server = await serve({ limiter: limiterOn({ capacity: 1 }), onLimited: textOnLimited(kind, 429, 'slow down', (info) => seen.push(info)) })
      await server.get()
      const response = await server.get()
      assert.equal(response.status, 429)
      assert.equal(await response.text(), 'slow down')
      assert.equal(response.headers.get('retry-after'), '2')
      assert.deepEqual(items(response, 'ratelimit'), { burst: { r: 0, t: 2 } })
      assert.deepEqual(seen.map((info) => info.violated), [['burst']])
      assert.equal(seen[0].decision.retryAfterMs, 2000)
    })

    it('an error from the limiter (a monotonic regression) goes to the error path', async () => {
      const clock = manualClock({ wallMs: NOON })
      const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
      const server = await serve({ limiter })
      clock.set({ monotonicMs: -1 })
      await assertFailed(await server.get(), 'ERR_MONOTONIC_REGRESSION')
      assert.equal(server.state.hits, 0)
    })

    it("a user's own Error from a callback reaches the error path as it is", async () => {
      const boom = () => {
        throw Object.assign(new Error('boom'), { code: 'E_BOOM' })
      }
      for (const options of [{ skip: boom }, { key: boom }, { cost: boom }]) {
        const server = await serve({ limiter: keyedOn(), ...options })
        await assertFailed(await server.get(), 'E_BOOM', /boom/)
      }
    })

    for (const callback of ['key', 'skip', 'cost', 'onLimited']) {
      it(`${callback} throwing or rejecting with null, false, 0, '' or undefined is ERR_CALLBACK: the route never runs, nothing is taken`, async () => {
        let thrown
        let asynchronous = false
        const fail = () => {
          if (asynchronous) return Promise.reject(thrown)
          throw thrown
        }
        const limiter = keyedOn({ capacity: callback === 'onLimited' ? 1 : 5, quota: { limit: 100, period: MONTH_UTC } })
        const single = await serve({ limiter, name: 'api', [callback]: fail })
        const other = keyedOn({ capacity: 100 })
        const several = await serve({ limits: [{ limiter: other, name: 'first' }, { limiter, name: 'second' }], [callback]: fail })
        if (callback === 'onLimited') {
          await single.get()
          await several.get()
        }
        const hitsBefore = single.state.hits + several.state.hits
        for (asynchronous of [false, true]) {
          for (thrown of FALSY) {
            for (const server of [single, several]) {
              const response = await server.get()
              await assertFailed(response, 'ERR_CALLBACK', new RegExp(`${callback}`))
            }
          }
        }
        assert.equal(single.state.hits + several.state.hits, hitsBefore, 'the route never ran')
        if (callback !== 'onLimited') {
          assert.equal(limiter.size, 0, 'nothing was taken')
          assert.equal(other.size, 0, 'nothing was taken from the other limit either')
        }
      })
    }

    it('a key that is not a valid key (undefined, a number, empty, too long) is ERR_INVALID_ARG naming the entry', async () => {
      let answer
      const limiter = keyedOn()
      const single = await serve({ limiter, key: () => answer })
      const several = await serve({ limits: [{ limiter: limiterOn(), name: 'site' }, { limiter, name: 'tenant', key: async () => answer }] })
      for (answer of [undefined, 42, '', 'k'.repeat(257)]) {
        await assertFailed(await single.get(), 'ERR_INVALID_ARG', /key\(req\) of limiter must return a string/)
        await assertFailed(await several.get(), 'ERR_INVALID_ARG', /key\(req\) of limits\[1\] "tenant" must return a string/)
      }
      assert.equal(limiter.size, 0)
      assert.equal(single.state.hits + several.state.hits, 0)
    })

    it('a cost that is not a number (a forgotten return) is ERR_INVALID_ARG naming the entry, not a cost of 1', async () => {
      const limiter = limiterOn()
      const server = await serve({ limiter, cost: () => undefined })
      await assertFailed(await server.get(), 'ERR_INVALID_ARG', /cost\(req\) of limiter/)
      assert.equal(limiter.status().tokens, 5)
    })

    it('a client address that is not an IP (a 300-character X-Forwarded-For, not-an-ip) still gets a bounded key, never a 500', async () => {
      const limiter = keyedOn({ capacity: 2 })
      const server = await serve({ limiter }, { trustProxy: true })
      for (const forwarded of ['x'.repeat(300), 'not-an-ip', `2001:db8::${'f'.repeat(300)}`, '1.2.3']) {
        const response = await server.get('/', { headers: { 'X-Forwarded-For': forwarded } })
        assert.equal(response.status, 200, forwarded)
      }
      const again = await server.get('/', { headers: { 'X-Forwarded-For': 'not-an-ip' } })
      assert.equal(again.status, 200)
      assert.equal((await server.get('/', { headers: { 'X-Forwarded-For': 'not-an-ip' } })).status, 429, 'one address, one key')
      assert.equal(limiter.size, 4)
    })

    it('a throttle entry: its windows are header items, its denial a 429, and a nonsense store answer a 503 (never an allowance)', async () => {
      const throttle = createThrottle({ db: memoryDb(), clock: { wallMs: () => Date.parse('2024-05-01T12:00:30Z') } })
      const server = await serve({ limits: [{ limiter: limiterOn(), name: 'local' }, { throttle, limits: { requests_per_minute: 1 } }] })
      const first = await server.get()
      assert.equal(first.status, 200)
      assert.deepEqual(items(first, 'ratelimit').minute, { r: 0, t: 30 })
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.deepEqual((await problem(denied))['violated-policies'], ['minute'])
      const broken = createThrottle({ db: { collection: () => ({ findOneAndUpdate: async () => ({ n: NaN }), deleteMany: async () => ({}) }) } })
      for (const failOpen of [false, true]) {
        const local = limiterOn()
        const nonsense = await serve({ limits: [{ limiter: local, name: 'local' }, { throttle: broken, limits: { requests_per_day: 10 }, failOpen }] })
        const response = await nonsense.get()
        assert.equal(response.status, 503)
        assert.equal((await problem(response)).status, 503)
        assert.equal(local.status().tokens, 5, 'the local limit got its token back')
        assert.equal(nonsense.state.hits, 0)
      }
    })

    it("mode: 'shadow' at the top level: a denial lets the request on, calls onShadowLimited with onLimited's info, and writes no RateLimit items", async () => {
      const limiter = limiterOn({ capacity: 1 })
      const shadowed = []
      const server = await serve({ limiter, mode: 'shadow', onShadowLimited: (req, info) => shadowed.push(info) })
      for (let i = 0; i < 3; i++) {
        const response = await server.get()
        assert.equal(response.status, 200)
        assert.equal(await response.text(), 'hello')
        assert.equal(response.headers.get('ratelimit'), null)
        assert.equal(response.headers.get('ratelimit-policy'), null)
        assert.equal(response.headers.get('retry-after'), null)
      }
      assert.equal(server.state.hits, 3)
      assert.deepEqual(shadowed.map((info) => info.violated), [['burst'], ['burst']])
      assert.equal(shadowed[0].decision.allowed, false)
      assert.equal(shadowed[0].decision.retryAfterMs, 2000)
      assert.deepEqual(limiter.stats().denied, 2, "the limiter's stats count what it would have denied")
      assert.equal(limiter.status().tokens, 0, 'what it admitted it consumed; a denial consumed nothing')
    })

    it("an entry's mode wins over the top-level one; a shadow entry beside an enforced one adds no items, and an enforced denial refunds what the shadow entry took", async () => {
      const shadowLimiter = limiterOn({ capacity: 5 })
      const enforced = limiterOn({ capacity: 1 })
      const shadowed = []
      const server = await serve({
        mode: 'shadow',
        onShadowLimited: (req, info) => shadowed.push(info),
        limits: [{ limiter: shadowLimiter, name: 'new' }, { limiter: enforced, name: 'old', mode: 'enforce' }],
      })
      const first = await server.get()
      assert.equal(first.status, 200)
      assert.deepEqual(items(first, 'ratelimit'), { 'old-burst': { r: 0, t: 2 } })
      assert.deepEqual(items(first, 'ratelimit-policy'), { 'old-burst': { q: 1, w: 2 } })
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.deepEqual((await problem(denied))['violated-policies'], ['old-burst'])
      assert.deepEqual(Object.keys(items(denied, 'ratelimit')), ['old-burst'])
      assert.equal(shadowLimiter.status().tokens, 4, 'all-or-nothing: the shadow entry got back what the denied request took')
      assert.deepEqual(shadowed, [])

      const narrowShadow = limiterOn({ capacity: 1 })
      const wide = limiterOn({ capacity: 10 })
      const watched = await serve({ onShadowLimited: (req, info) => shadowed.push(info), limits: [{ limiter: narrowShadow, name: 'new', mode: 'shadow' }, { limiter: wide, name: 'site' }] })
      assert.equal((await watched.get()).status, 200)
      const passed = await watched.get()
      assert.equal(passed.status, 200, 'the shadow denial does not deny')
      assert.deepEqual(Object.keys(items(passed, 'ratelimit')), ['site-burst'])
      assert.deepEqual(shadowed.map((info) => info.violated), [['new-burst']])
      assert.equal(wide.status().tokens, 8, 'the enforced entry took both requests')
    })

    it("mode must be 'enforce' or 'shadow': anything else is ERR_INVALID_OPTION naming where", async () => {
      for (const [options, pattern] of [
        [{ limiter: limiterOn(), mode: 'dry-run' }, /mode must be 'enforce' or 'shadow'/],
        [{ limits: [{ limiter: limiterOn(), mode: true }] }, /limits\[0\]\.mode must be 'enforce' or 'shadow'/],
        [{ limiter: limiterOn(), onShadowLimited: 'log' }, /onShadowLimited must be a function/],
        [{ limiter: limiterOn(), refundIf: true }, /refundIf must be a function/],
      ]) {
        await assert.rejects(start(kind, options), (err) => err.code === 'ERR_INVALID_OPTION' && pattern.test(err.message))
      }
    })

    it('the decision is on the request for the handler: allowed, and each limit with its name, mode, key, cost and decision', async () => {
      const keyedLimiter = keyedOn({ quota: { limit: 100, period: MONTH_UTC } })
      const narrow = limiterOn({ capacity: 1 })
      narrow.tryConsume()
      const server = await serve({ key: byClient, cost: () => 2, limits: [{ limiter: keyedLimiter, name: 'tenant' }, { limiter: narrow, name: 'new', mode: 'shadow', cost: () => 1 }] })
      assert.equal((await server.get('/', { headers: { 'X-Client': 'k' } })).status, 200)
      const { result } = server.state
      assert.equal(result.allowed, true)
      assert.deepEqual(
        result.limits.map(({ name, mode, key, cost, decision }) => ({ name, mode, key, cost, allowed: decision.allowed, tokens: decision.tokens })),
        [
          { name: 'tenant', mode: 'enforce', key: 'k', cost: 2, allowed: true, tokens: 3 },
          { name: 'new', mode: 'shadow', key: undefined, cost: 1, allowed: false, tokens: 0 },
        ],
      )
      assert.equal(result.limits[0].decision.quotaRemaining, 98)
    })

    it('two rateLimits on one route append their RateLimit and RateLimit-Policy items: one list per response, each item once', async () => {
      const global = limiterOn({ capacity: 10 })
      const route = limiterOn({ capacity: 2, quota: { limit: 100, period: MONTH_UTC } })
      const server = await serve([{ limiter: global, name: 'global' }, { limiter: route, name: 'route' }])
      const response = await server.get()
      assert.equal(response.status, 200)
      assert.deepEqual(items(response, 'ratelimit'), { 'global-burst': { r: 9, t: 2 }, 'route-burst': { r: 1, t: 2 }, 'route-month': { r: 99, t: TO_FEBRUARY_S } })
      assert.deepEqual(items(response, 'ratelimit-policy'), { 'global-burst': { q: 10, w: 20 }, 'route-burst': { q: 2, w: 4 }, 'route-month': { q: 100, w: JANUARY_S } })
      await server.get()
      const denied = await server.get()
      assert.equal(denied.status, 429)
      assert.deepEqual(Object.keys(items(denied, 'ratelimit')), ['global-burst', 'route-burst', 'route-month'])
      // The same item name from both: written once, the later rateLimit's in the earlier one's place.
      const twice = await serve([{ limiter: limiterOn({ capacity: 10 }) }, { limiter: limiterOn({ capacity: 3 }) }])
      const once = await twice.get()
      assert.deepEqual(items(once, 'ratelimit'), { burst: { r: 2, t: 2 } })
      assert.deepEqual(items(once, 'ratelimit-policy'), { burst: { q: 3, w: 6 } })
    })

    it('refundIf(req, res), called once the response is finished: true gives back what the request took in every entry, false keeps it', async () => {
      let refund = true
      const calls = []
      const first = keyedOn({ capacity: 1, quota: { limit: 10, period: MONTH_UTC } })
      const second = limiterOn({ capacity: 1 })
      const server = await serve({
        limits: [{ limiter: first, name: 'a' }, { limiter: second, name: 'b', mode: 'shadow' }],
        refundIf: (req, res) => {
          calls.push(res !== undefined && res !== null)
          return refund
        },
      })
      let refunded
      for (let i = 0; i < 3; i++) {
        refunded = await refundedAfter(first, server)
        assert.equal(refunded.status, 200)
      }
      assert.equal(first.status('127.0.0.1').quotaUsed, 0, 'every request was given back')
      assert.equal(second.status().tokens, 1, 'the shadow entry too')
      assert.deepEqual(calls, [true, true, true])
      refund = false
      assert.equal((await refundedAfter(first, server)).status, 200)
      assert.equal((await server.get()).status, 429, 'a request refundIf keeps counts')
      assert.equal(first.status('127.0.0.1').quotaUsed, 1)
    })

    it('a limiter that is not one this package made (a Proxy, Object.create of the prototype) is refused up front: ERR_INVALID_OPTION', async () => {
      for (const limiter of [new Proxy(keyedOn(), {}), Object.create(KeyedQuotaClock.prototype), new Proxy(limiterOn(), {}), Object.create(QuotaClock.prototype)]) {
        for (const options of [{ limiter }, { limits: [{ limiter }] }]) {
          await assert.rejects(start(kind, options), (err) => {
            assert.ok(err instanceof TypeError, String(err))
            assert.equal(err.code, 'ERR_INVALID_OPTION')
            assert.match(err.message, /Proxy|Object\.create/)
            return true
          })
        }
      }
    })
  })
}

module.exports = { defineCases }
