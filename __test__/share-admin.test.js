'use strict'

// quotaAdmin (docs/operating-quotas.md) against a real redis-server (ioredis and node-redis) and the MongoDB wire
// server, with several limiters on their own clients sharing one quota: usage, grant and reset
// answer the QuotaUsage of the record; `used - held` is what the limiters admitted; a grant is
// seen within a second by a key denied as exhausted; reset keeps what the instances reserved and have not admitted;
// none touches another key, name or period. And the local denial of an exhausted key: a flood
// costs about one store call a second per limiter.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { periodFor } = require('quota-clock-source')
const { QuotaClockError } = require('quota-clock-source')
const { redisStore, quotaAdmin } = require('quota-clock-source/shared')
const { MONTH, useStoreServers, limiterOn, drain } = require('./helpers/shared-fleet.js')

const DAY_MS = 86_400_000
// Generous on a loaded 2-core machine: a grant must be seen within a second, plus round trips.
const SLACK_MS = 600

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const openMonth = () => periodFor(MONTH, Date.now())

describe('quotaAdmin on real stores with several limiters', () => {
  const servers = useStoreServers('shared_admin')
  const kinds = ['ioredis', 'node-redis', 'mongo']

  /** `count` limiters sharing `name`, each on a store of its own, and an admin on another. */
  async function fleet(kind, { count = 3, name = freshName(kind), ...options }) {
    const stores = await Promise.all(Array.from({ length: count + 1 }, () => servers.makeStore(kind)))
    const limiters = stores.slice(1).map((store) => limiterOn(store, name, options))
    return { name, store: stores[0], limiters, admin: quotaAdmin(stores[0], { name }) }
  }

  for (const kind of kinds) {
    describe(kind, () => {
      test('usage of a record that does not exist is zeros and limit null', async () => {
        const { name, admin } = await fleet(kind, { count: 0, limit: 100 })
        assert.deepEqual(await admin.usage('nobody', '2024-03'), {
          name,
          key: 'nobody',
          periodId: '2024-03',
          limit: null,
          extra: 0,
          used: 0,
          held: 0,
          expiresAt: null,
        })
      })

      test('used - held is what the limiters admitted; held is 0 once every limiter closed', async () => {
        const { name, limiters, admin } = await fleet(kind, { limit: 1_000, leaseUnits: 25 })
        const period = openMonth()
        const admitted = [37, 11, 50]
        await Promise.all(limiters.map((limiter, at) => drain(limiter, 'acme', admitted[at])))
        const during = await admin.usage('acme', period.id)
        assert.equal(during.name, name)
        assert.equal(during.limit, 1_000)
        assert.equal(during.extra, 0)
        // held is as of each limiter's last store call: what they admitted from their leases since
        // is still counted in it, so used - held is at most what they admitted, and exact once idle.
        assert.ok(during.used - during.held <= 98 && during.used - during.held >= 98 - 3 * 25, JSON.stringify(during))
        assert.ok(during.held > 0 && during.held <= 3 * 25, `held ${during.held}: at most a lease per limiter`)
        assert.equal(during.expiresAt, period.endMs, "expires at the period's end")
        await Promise.all(limiters.map((limiter) => limiter.close()))
        const closed = await admin.usage('acme', period.id)
        assert.deepEqual({ used: closed.used, held: closed.held }, { used: 98, held: 0 })
      })

      test('held is 0 once every limiter has been idle on the key for idleMs, a key they used up and were denied on included', async () => {
        const idleMs = 300
        const { limiters, admin } = await fleet(kind, { limit: 10, leaseUnits: 4, idleMs })
        const period = openMonth()
        // Each drain ends on a denial: the store said the key is used up, and the limiter holds nothing unadmitted.
        let admitted = 0
        for (const limiter of limiters) admitted += await drain(limiter, 'acme')
        assert.equal(admitted, 10)
        const deadline = Date.now() + idleMs + 5_000
        let usage = await admin.usage('acme', period.id)
        while (usage.held !== 0 && Date.now() < deadline) {
          await sleep(50)
          usage = await admin.usage('acme', period.id)
        }
        assert.deepEqual({ used: usage.used, held: usage.held }, { used: 10, held: 0 }, 'idle limiters told the store they hold nothing')
        await Promise.all(limiters.map((limiter) => limiter.close()))
      })

      test('grant raises the allowance fleet-wide for that period; a key denied as exhausted is admitted within a second', async () => {
        const { limiters, admin } = await fleet(kind, { limit: 60, leaseUnits: 5 })
        const period = openMonth()
        const first = await Promise.all(limiters.map((limiter) => drain(limiter, 'acme')))
        assert.equal(first.reduce((a, b) => a + b, 0), 60)
        // Denied as exhausted: the next calls are decided here.
        for (const limiter of limiters) assert.equal((await limiter.consume('acme')).allowed, false)
        const granted = await admin.grant('acme', period.id, 25)
        assert.equal(granted.extra, 25)
        assert.equal(granted.limit, 60)
        const started = performance.now()
        const seen = await Promise.all(
          limiters.map(async (limiter) => {
            while (!(await limiter.consume('acme')).allowed) await sleep(20)
            return performance.now() - started
          }),
        )
        assert.ok(Math.max(...seen) <= 1_000 + SLACK_MS, `grant seen after ${seen.map(Math.round).join(', ')} ms`)
        const rest = await Promise.all(limiters.map((limiter) => drain(limiter, 'acme')))
        assert.equal(rest.reduce((a, b) => a + b, 0) + limiters.length, 25, 'exactly the granted units more')
        await Promise.all(limiters.map((limiter) => limiter.close()))
        const after = await admin.usage('acme', period.id)
        assert.deepEqual({ used: after.used, held: after.held, extra: after.extra }, { used: 85, held: 0, extra: 25 })
      })

      test('a grant for a period nobody reserved in yet creates the record, kept 400 days until a reservation sets its end', async () => {
        const { name, limiters, admin } = await fleet(kind, { count: 1, limit: 10, leaseUnits: 5 })
        const period = openMonth()
        const before = Date.now()
        const made = await admin.grant('newco', period.id, 7)
        assert.deepEqual({ ...made, expiresAt: undefined }, { name, key: 'newco', periodId: period.id, limit: null, extra: 7, used: 0, held: 0, expiresAt: undefined })
        assert.ok(made.expiresAt >= before + 400 * DAY_MS - 2_000 && made.expiresAt <= Date.now() + 400 * DAY_MS + 2_000, `${made.expiresAt}`)
        assert.equal(await drain(limiters[0], 'newco'), 17, 'limit + extra')
        const reserved = await admin.usage('newco', period.id)
        assert.equal(reserved.limit, 10)
        assert.equal(reserved.expiresAt, period.endMs, "the reservation set the period's end")
        await limiters[0].close()
      })

      test('reset sets used to what the limiters hold and extra to 0: they admit the limit again, and their leases stay theirs', async () => {
        const { limiters, admin } = await fleet(kind, { limit: 90, leaseUnits: 6 })
        const period = openMonth()
        await admin.grant('acme', period.id, 10)
        const first = await Promise.all(limiters.map((limiter) => drain(limiter, 'acme', 30)))
        assert.equal(first.reduce((a, b) => a + b, 0), 90)
        const before = await admin.usage('acme', period.id)
        assert.ok(before.used > before.held && before.extra === 10, JSON.stringify(before))
        const reset = await admin.reset('acme', period.id)
        assert.ok(reset.held > 0, 'the limiters hold leases')
        assert.deepEqual({ used: reset.used, extra: reset.extra, limit: reset.limit }, { used: reset.held, extra: 0, limit: 90 })
        // The leases stay theirs: what they admit after the reset is the limit, less what they had
        // admitted from those leases since their last store call (held is as of that call).
        const second = (await Promise.all(limiters.map((limiter) => drain(limiter, 'acme')))).reduce((a, b) => a + b, 0)
        assert.ok(second <= 90 && second > 90 - 3 * 6, `admitted after the reset: ${second}`)
        await Promise.all(limiters.map((limiter) => limiter.close()))
        const closed = await admin.usage('acme', period.id)
        assert.deepEqual({ used: closed.used, held: closed.held }, { used: 90, held: 0 })
      })

      test('grant and reset never touch another key, name or period', async () => {
        const { name, store, limiters, admin } = await fleet(kind, { count: 1, limit: 50, leaseUnits: 5 })
        const other = limiterOn(store, `${name}-other`, { limit: 50, leaseUnits: 5 })
        const period = openMonth()
        await drain(limiters[0], 'acme', 20)
        await drain(limiters[0], 'acme2', 20)
        await drain(other, 'acme', 20)
        await admin.grant('acme', '2020-01', 5)
        const neighbours = async () => [
          await admin.usage('acme2', period.id),
          await quotaAdmin(store, { name: `${name}-other` }).usage('acme', period.id),
          await admin.usage('acme', '2020-01'),
        ]
        const seen = await neighbours()
        await admin.grant('acme', period.id, 100)
        await admin.reset('acme', period.id)
        await admin.grant('acme', period.id, 3)
        assert.deepEqual(await neighbours(), seen)
        assert.equal((await admin.usage('acme', period.id)).extra, 3)
        await Promise.all([limiters[0].close(), other.close()])
      })

      test('a flood on an exhausted key costs about one store call a second per limiter', async () => {
        const { limiters } = await fleet(kind, { count: 1, limit: 20, leaseUnits: 5 })
        const [limiter] = limiters
        assert.equal(await drain(limiter, 'acme'), 20)
        const calls = limiter.stats().store.calls
        const started = performance.now()
        let denied = 0
        while (performance.now() - started < 1_500) {
          const decision = await limiter.consume('acme')
          assert.equal(decision.allowed, false)
          assert.equal(decision.retryAfterBasis, 'wall-period')
          denied++
        }
        const seconds = (performance.now() - started) / 1_000
        const made = limiter.stats().store.calls - calls
        assert.ok(denied > 100, `${denied} denials`)
        assert.ok(made <= Math.ceil(seconds) + 1, `${made} store calls for ${denied} denials in ${seconds.toFixed(2)} s`)
        await limiter.close()
      })
    })
  }
})

describe('quotaAdmin arguments', () => {
  // A client shaped like ioredis that never gets a call: the checks come first.
  const store = redisStore({ isCluster: false, call: async () => assert.fail('no store call for a bad argument') })
  const admin = quotaAdmin(store, { name: 'api' })

  test('quotaAdmin refuses anything but a store and { name } of 1 to 128 characters', () => {
    const cases = [
      [() => quotaAdmin({}, { name: 'api' }), TypeError, /store/],
      [() => quotaAdmin(undefined, { name: 'api' }), TypeError, /store/],
      [() => quotaAdmin(store), TypeError, /options/],
      [() => quotaAdmin(store, {}), TypeError, /options\.name/],
      [() => quotaAdmin(store, { name: 7 }), TypeError, /options\.name/],
      [() => quotaAdmin(store, { name: '' }), RangeError, /options\.name/],
      [() => quotaAdmin(store, { name: 'x'.repeat(129) }), RangeError, /options\.name/],
      [() => quotaAdmin(store, { name: 'api', nmae: 1 }), TypeError, /nmae/],
      [() => quotaAdmin(store, { name: 'api', timeoutMs: '500' }), TypeError, /options\.timeoutMs/],
      [() => quotaAdmin(store, { name: 'api', timeoutMs: 0 }), RangeError, /options\.timeoutMs/],
      [() => quotaAdmin(store, { name: 'api', timeoutMs: 1.5 }), RangeError, /options\.timeoutMs/],
      [() => quotaAdmin(store, { name: 'api', timeoutMs: -1 }), RangeError, /options\.timeoutMs/],
      [() => quotaAdmin(store, { name: 'api', timeoutMs: NaN }), RangeError, /options\.timeoutMs/],
      [() => quotaAdmin(store, { name: 'api', timeoutMs: 2 ** 31 }), RangeError, /options\.timeoutMs/],
    ]
    for (const [call, ErrorClass, names] of cases) {
      assert.throws(call, (error) => error instanceof ErrorClass && error.code === 'ERR_INVALID_ARG' && names.test(error.message), String(call))
    }
  })

  test('usage, grant and reset refuse a bad key, period id or units with ERR_INVALID_ARG naming it, and call no store', async () => {
    const cases = [
      [() => admin.usage(1, '2024-03'), TypeError, /^key/],
      [() => admin.usage('', '2024-03'), RangeError, /^key/],
      [() => admin.usage('x'.repeat(257), '2024-03'), RangeError, /^key/],
      [() => admin.usage('acme'), TypeError, /^periodId/],
      [() => admin.usage('acme', 'March'), RangeError, /^periodId/],
      [() => admin.reset('acme', '2024-13'), RangeError, /^periodId/],
      [() => admin.usage('acme', '2023-02-29'), RangeError, /^periodId/], // (no such day: 2023 is not a leap year)
      [() => admin.usage('acme', '2024-04-31'), RangeError, /^periodId/],
      [() => admin.grant(7, '2024-03'), TypeError, /^key/], // (the arguments are checked in their order)
      [() => admin.grant('acme', 'March'), RangeError, /^periodId/],
      [() => admin.grant('acme', '2024-03'), TypeError, /^units/],
      [() => admin.grant('acme', '2024-03', 0), RangeError, /^units/],
      [() => admin.grant('acme', '2024-03', 1.5), RangeError, /^units/],
      [() => admin.grant('acme', '2024-03', -3), RangeError, /^units/],
      [() => admin.grant('acme', '2024-03', 2 ** 53), RangeError, /^units/],
      [() => admin.grant('acme', '2024-03', '5'), TypeError, /^units/],
    ]
    for (const [call, ErrorClass, names] of cases) {
      await assert.rejects(call(), (error) => error instanceof ErrorClass && error.code === 'ERR_INVALID_ARG' && names.test(error.message), String(call))
    }
  })

  test('a store that does not answer within timeoutMs (default 5,000) is ERR_STORE_UNAVAILABLE; a grant says it may still land', async () => {
    const hung = redisStore({ isCluster: false, call: () => new Promise(() => {}) })
    const quick = quotaAdmin(hung, { name: 'api', timeoutMs: 50 })
    for (const [operation, call] of [['usage', () => quick.usage('acme', '2024-03')], ['grant', () => quick.grant('acme', '2024-03', 5)], ['reset', () => quick.reset('acme', '2024-03')]]) {
      const started = Date.now()
      await assert.rejects(call(), (error) => error instanceof QuotaClockError && error.code === 'ERR_STORE_UNAVAILABLE' && /"api"/.test(error.message) && /50 ms/.test(error.message) && (operation !== 'grant' || /may still have landed.*usage/.test(error.message)))
      assert.ok(Date.now() - started < 2_000, operation)
    }
    // The default: 5 s.
    const started = Date.now()
    await assert.rejects(quotaAdmin(hung, { name: 'api' }).usage('acme', '2024-03'), (error) => error.code === 'ERR_STORE_UNAVAILABLE' && /5000 ms/.test(error.message))
    const waited = Date.now() - started
    assert.ok(waited >= 4_900 && waited < 7_000, `${waited} ms`)
  })

  test('a store that fails is ERR_STORE_UNAVAILABLE, with its error as the cause', async () => {
    const down = new Error('connection refused')
    const failing = quotaAdmin(redisStore({ isCluster: false, call: async () => Promise.reject(down) }), { name: 'api' })
    for (const call of [() => failing.usage('acme', '2024-03'), () => failing.grant('acme', '2024-03', 5), () => failing.reset('acme', '2024-03')]) {
      await assert.rejects(call(), (error) => error.code === 'ERR_STORE_UNAVAILABLE' && error.cause === down && /"api"/.test(error.message))
    }
  })
})
