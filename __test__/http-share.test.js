'use strict'
// A shared KeyedQuotaClock as a rateLimit entry, on real servers (Express 5, Express 4,
// node:http, and the Fastify plugin on a socket and through inject): asked after the in-process
// limiters, its denials 429, a store that does not answer 503, and what a denied request's earlier
// limits took given back into the reservation; a shared bucket on two servers, whose RateLimit item
// reports floor(tokens + fleetTokens). The store is the in-process test store.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { testStore } = require('./helpers/test-store.js')
const { items } = require('./helpers/http-servers.js')
const { warningsDuring } = require('./helpers/warnings.js')
const { FRAMEWORKS, ERROR_STATUS, start, headerOf, problemTypeOf } = require('./helpers/http-frameworks.js')

const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const TODAY = '2024-01-15'

function sharedLimiter(t, { limit = 5, ...share } = {}) {
  return new KeyedQuotaClock({
    capacity: 100,
    refillPerSecond: 1,
    suspendPolicy: 'ignore',
    clock: manualClock({ wallMs: NOON }),
    quota: { limit, period: UTC_DAY },
    share: { store: t.store, name: 'api', timeoutMs: 50, ...share },
  })
}

for (const kind of Object.keys(FRAMEWORKS)) {
  describe(`a shared limiter entry (${kind})`, () => {
    it('admits exactly the shared limit, then answers 429 with the quota item; headers show the shared remaining', async () => {
      const t = testStore()
      const limiter = sharedLimiter(t)
      const server = await start(kind, { limiter, key: () => 'tenant' })
      try {
        const statuses = []
        for (let i = 0; i < 7; i++) {
          const response = await server.get()
          statuses.push(response.status)
          if (i === 0) assert.deepEqual(items(response, 'RateLimit').day, { r: 4, t: 43_200 })
          if (response.status === 429) {
            const body = await response.json()
            assert.deepEqual(body['violated-policies'], ['day'])
            assert.equal(body.retryAfterBasis, 'wall-period')
          } else await response.text()
        }
        assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429, 429])
        assert.equal(t.count('api', 'tenant', TODAY), 5)
      } finally {
        await server.close()
      }
    })

    it('a shared bucket (share.bucket) is one bucket for two servers; RateLimit r is floor(tokens + fleetTokens) of the server that answered', async () => {
      const t = testStore()
      const bucket = () =>
        new KeyedQuotaClock({
          capacity: 4,
          refillPerSecond: 0.001,
          suspendPolicy: 'ignore',
          clock: manualClock({ wallMs: NOON }),
          share: { store: t.store, name: 'api', bucket: true, leaseMs: 60_000, timeoutMs: 1_000 },
        })
      const limiters = [bucket(), bucket()]
      const first = await start(kind, { limiter: limiters[0], key: () => 'ip' })
      const second = await start(kind, { limiter: limiters[1], key: () => 'ip' })
      try {
        const statuses = []
        const remaining = []
        for (const server of [first, first, first, second, first, first, second]) {
          const response = await server.get()
          statuses.push(response.status)
          const r = Object.values(items(response, 'RateLimit'))[0].r
          remaining.push(r)
          const { tokens, fleetTokens } = limiters[server === first ? 0 : 1].status('ip')
          assert.equal(r, Math.floor(tokens + fleetTokens), JSON.stringify({ tokens, fleetTokens }))
          await response.text()
        }
        // One bucket of 4 for both servers: 4 admitted in all, then 429 on both. The first server's
        // first call takes one token (a first call takes only what it lacks), its next a quarter of
        // a fair share of the rest (under one token: what it lacks, one); the second server's first
        // call takes the last token.
        assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429, 429])
        // r: this server's slice plus the store's tokens as it last heard of them
        assert.deepEqual(remaining, [3, 2, 1, 0, 0, 0, 0])
      } finally {
        await Promise.all([first.close(), second.close()])
      }
    })

    it('is asked after the in-process limiters: a request they deny makes no store call', async () => {
      const t = testStore()
      const shared = sharedLimiter(t)
      const burst = new QuotaClock({ capacity: 1, refillPerSecond: 0.001, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }) })
      const server = await start(kind, { limits: [{ limiter: shared, name: 'shared', key: () => 'k' }, { limiter: burst, name: 'local' }] })
      try {
        assert.equal((await server.get()).status, 200)
        const calls = t.calls.reserve.length
        const denied = await server.get()
        assert.equal(denied.status, 429)
        assert.deepEqual((await denied.json())['violated-policies'], ['local-burst'])
        assert.equal(t.calls.reserve.length, calls)
        assert.equal(shared.status('k').quotaRemaining, 4)
      } finally {
        await server.close()
      }
    })

    it('a denial by a later shared limiter refunds the earlier limits, the shared ones into their reservation', async () => {
      const t = testStore()
      const first = sharedLimiter(t, { name: 'first', limit: 100, leaseUnits: 10 })
      const second = sharedLimiter(t, { name: 'second', limit: 1 })
      const local = new QuotaClock({ capacity: 10, refillPerSecond: 0.001, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }) })
      const server = await start(kind, { key: () => 'k', limits: [{ limiter: local, name: 'local' }, { limiter: first, name: 'a' }, { limiter: second, name: 'b' }] })
      try {
        assert.equal((await server.get()).status, 200)
        const denied = await server.get()
        assert.equal(denied.status, 429)
        assert.deepEqual((await denied.json())['violated-policies'], ['b-day'])
        assert.equal(local.status().tokens, 9)
        assert.equal(first.status('k').quotaRemaining, 99)
        assert.equal(t.count('first', 'k', TODAY), 10, 'the refund went into the reservation, not the store')
      } finally {
        await server.close()
      }
    })

    // A later limit's denial refunds the shared one, so its keys keep no quota use and are dropped
    // (maxKeys: 2) to make room for other clients' keys while their requests wait on the store.
    it('keys dropped (maxKeys: 2) while their requests wait on a store 30 ms away: 200, 429 or ERR_KEY_LIMIT, never an internal error or a 503', async () => {
      const t = testStore()
      t.control.delayMs = 30
      const perClient = new KeyedQuotaClock({
        capacity: 100,
        refillPerSecond: 1,
        suspendPolicy: 'ignore',
        maxKeys: 2,
        quota: { limit: 1_000, period: UTC_DAY },
        share: { store: t.store, name: 'per-client', leaseUnits: 2 },
      })
      const overall = sharedLimiter(t, { name: 'overall', limit: 5, timeoutMs: 300 })
      const server = await start(kind, {
        limits: [
          { limiter: perClient, name: 'client', key: (req) => headerOf(kind, req, 'x-client') },
          { limiter: overall, name: 'all', key: () => 'all' },
        ],
      })
      try {
        const outcomes = {}
        const requests = []
        for (let i = 0; i < 60; i++) {
          requests.push(server.get('/', { headers: { 'x-client': `client-${i % 6}` } }).then(async (response) => {
            const body = await response.text()
            const failed = response.status === ERROR_STATUS || (FRAMEWORKS[kind].withoutNext && response.status === 500)
            return failed ? JSON.parse(body).code : response.status
          }))
          if (i % 6 === 5) await new Promise((resolve) => setTimeout(resolve, 15))
        }
        for (const outcome of await Promise.all(requests)) outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
        for (const outcome of Object.keys(outcomes)) assert.ok(['200', '429', 'ERR_KEY_LIMIT'].includes(outcome), JSON.stringify(outcomes))
        assert.equal(outcomes[200], 5, JSON.stringify(outcomes))
      } finally {
        await server.close()
      }
    })

    it('a store outage: each 503 has Retry-After in whole seconds (at least 1); one warning per outage and limiter, again after the store answered', async () => {
      const t = testStore()
      const first = sharedLimiter(t, { name: 'first', limit: 100 })
      const second = sharedLimiter(t, { name: 'second', limit: 100 })
      const servers = [
        await start(kind, { limiter: first, key: (req) => headerOf(kind, req, 'x-client') }),
        await start(kind, { limiter: second, key: (req) => headerOf(kind, req, 'x-client') }),
      ]
      let client = 0
      const fresh = () => ({ headers: { 'x-client': `c${++client}` } }) // a new key: its call needs the store
      try {
        const warnings = await warningsDuring('QUOTA_CLOCK_STORE_UNAVAILABLE', async () => {
          t.control.mode = 'fail'
          for (let i = 0; i < 3; i++) {
            for (const server of servers) {
              const response = await server.get('/', fresh())
              assert.equal(response.status, 503)
              assert.match(response.headers.get('retry-after') ?? '', /^[1-9][0-9]*$/)
              await response.text()
            }
          }
          t.control.mode = 'ok'
          assert.equal((await servers[0].get('/', fresh())).status, 200) // the first limiter's store answered
          t.control.mode = 'fail'
          for (const server of servers) assert.equal((await server.get('/', fresh())).status, 503)
        })
        assert.deepEqual(warnings.map((warning) => warning.message.match(/"(first|second)"/)?.[1]), ['first', 'second', 'first'])
        assert.match(warnings[0].message, /unavailable/)
      } finally {
        t.control.mode = 'ok'
        for (const server of servers) await server.close()
      }
    })

    it('a store that does not answer within timeoutMs answers 503 with a problem body, and refunds the in-process limits', async () => {
      const t = testStore()
      const keep = setInterval(() => {}, 1_000)
      const shared = sharedLimiter(t)
      const local = new QuotaClock({ capacity: 10, refillPerSecond: 0.001, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }) })
      const server = await start(kind, { key: () => 'k', limits: [{ limiter: local, name: 'local' }, { limiter: shared, name: 'shared' }] })
      try {
        t.control.mode = 'hang'
        const response = await server.get()
        assert.equal(response.status, 503)
        assert.equal(response.headers.get('content-type'), problemTypeOf(kind))
        const body = await response.json()
        assert.equal(body.status, 503)
        assert.match(body.detail, /shared quota store/)
        assert.equal(local.status().tokens, 10)
      } finally {
        clearInterval(keep)
        t.release()
        await server.close()
      }
    })
  })
}
