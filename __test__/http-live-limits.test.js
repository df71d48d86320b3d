'use strict'
// The HTTP headers report the limits in force from the next request after setLimits,
// refreshPolicy, a policyTtlMs refresh or a zone's refresh made by another limiter, on a plain
// node:http server.

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

test("policyTtlMs: a key's response after its policy was asked again carries the new plan, a downgrade included", async (t) => {
  const plans = new Map([['acme', { capacity: 50, quota: { limit: 100, period: MONTH_UTC } }]])
  const clock = manualClock({ wallMs: NOON })
  const limiter = new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, policyTtlMs: 1000, policy: (key) => plans.get(key) })
  const server = await serve('node:http', rateLimit({ limiter, key: (req) => req.headers['x-client'] }))
  t.after(() => server.close())
  const acme = { headers: { 'x-client': 'acme' } }
  assert.equal(items(await server.get('/', acme), 'ratelimit-policy').burst.q, 50)
  plans.set('acme', { capacity: 20, quota: { limit: 50, period: MONTH_UTC } })
  clock.advance(2000) // past policyTtlMs: the key's next call asks policy again
  const after = await server.get('/', acme)
  assert.deepEqual(items(after, 'ratelimit-policy').burst, { q: 20, w: 20 })
  assert.equal(items(after, 'ratelimit-policy').month.q, 50)
  assert.equal(items(after, 'ratelimit').burst.t, 1, 'the reset from the new capacity')
})

test("a zone: a key refreshed by another limiter of the zone answers with its new plan here", async (t) => {
  const fs = require('node:fs')
  const os = require('node:os')
  const path = require('node:path')
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'qcs-live-'))
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
  const plans = new Map([['acme', { capacity: 500, quota: { limit: 100, period: MONTH_UTC } }]])
  const open = () => new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', maxKeys: 64, zone: { path: path.join(dir, 'zone') }, policy: (key) => plans.get(key) })
  const a = open()
  const b = open()
  t.after(() => Promise.all([a.close(), b.close()]))
  const server = await serve('node:http', rateLimit({ limiter: b, key: (req) => req.headers['x-client'] }))
  t.after(() => server.close())
  const acme = { headers: { 'x-client': 'acme' } }
  assert.equal(items(await server.get('/', acme), 'ratelimit-policy').burst.q, 500)
  plans.set('acme', { capacity: 200, quota: { limit: 50, period: MONTH_UTC } })
  a.refreshPolicy('acme')
  const after = await server.get('/', acme)
  assert.equal(items(after, 'ratelimit-policy').burst.q, 200)
  assert.equal(items(after, 'ratelimit-policy').month.q, 50)
})
