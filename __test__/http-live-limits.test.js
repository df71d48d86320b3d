'use strict'
// The HTTP headers report the limits in force from the next request after setLimits or
// refreshPolicy, on a plain node:http server.

const test = require('node:test')
const assert = require('node:assert/strict')
const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')
const { serve, items } = require('./helpers/http-servers.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const MONTH_UTC = { unit: 'month', timeZone: 'UTC' }

test('QuotaClock#setLimits: the next response carries the new limits', async (t) => {
  const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), quota: { limit: 10, period: MONTH_UTC } })
  const server = await serve('node:http', rateLimit({ limiter }))
  t.after(() => server.close())
  const first = await server.get()
  assert.deepEqual(items(first, 'ratelimit-policy').burst, { q: 5, w: 10 })
  assert.equal(items(first, 'ratelimit-policy').month.q, 10)
  limiter.setLimits({ capacity: 50, refillPerSecond: 5, quota: { limit: 100, period: MONTH_UTC } })
  const second = await server.get()
  assert.deepEqual(items(second, 'ratelimit-policy').burst, { q: 50, w: 10 })
  assert.equal(items(second, 'ratelimit-policy').month.q, 100)
  assert.deepEqual(items(second, 'ratelimit').month.r, 100 - 2, 'the use carried')
  assert.equal(items(second, 'ratelimit').burst.r, 50 - 5 + 4 - 1 + 0, 'what the bucket lacked stays lacking')
})

test('KeyedQuotaClock#refreshPolicy: a key\'s next response carries its new plan, downgrades included', async (t) => {
  const plans = new Map([['acme', { quota: { limit: 100, period: MONTH_UTC } }]])
  const limiter = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), policy: (key) => plans.get(key) })
  const server = await serve('node:http', rateLimit({ limiter, key: (req) => req.headers['x-client'] }))
  t.after(() => server.close())
  const acme = { headers: { 'x-client': 'acme' } }
  assert.equal(items(await server.get('/', acme), 'ratelimit-policy').month.q, 100)
  plans.set('acme', { capacity: 3, quota: { limit: 20, period: MONTH_UTC } })
  limiter.refreshPolicy('acme')
  const after = await server.get('/', acme)
  assert.deepEqual(items(after, 'ratelimit-policy').burst, { q: 3, w: 6 })
  assert.equal(items(after, 'ratelimit-policy').month.q, 20)
  assert.equal(items(after, 'ratelimit').month.r, 18)
})
