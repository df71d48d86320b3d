'use strict'

// `quota-clock-source usage|grant|reset` (docs/operating-quotas.md) run as a child process against a real
// redis-server and the MongoDB wire server, while three limiters share the quota in this process:
// the printed QuotaUsage is the store's; a grant is seen by the exhausted limiters within a
// second; a reset starts the key over; a bad argument exits 2 and a store that cannot be reached
// exits 1, each with one line on stderr, within a few seconds.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { periodFor } = require('quota-clock-source')
const { quotaAdmin } = require('quota-clock-source/shared')
const { startRedisServer } = require('./helpers/redis-server.js')
const { MONTH, useStoreServers, limiterOn, drain } = require('./helpers/shared-fleet.js')
const { cli, cliStores, freshName } = require('./helpers/cli.js')

// The command exits within 5 s of its start whatever the store and its client do (docs/cli.md); the
// rest is the time to spawn node.
const UNREACHABLE_WITHIN_MS = 5_500

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** A file for `node --require` that makes require() of `names` fail as in an app without them. */
function hiding(dir, names) {
  const file = path.join(dir, `hide-${names.join('-')}.js`)
  fs.writeFileSync(
    file,
    `const Module = require('node:module')
const resolve = Module._resolveFilename
Module._resolveFilename = function (request, ...rest) {
  if (${JSON.stringify(names)}.includes(request)) throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: 'MODULE_NOT_FOUND' })
  return resolve.call(this, request, ...rest)
}
`,
  )
  return file
}

describe('quota-clock-source usage, grant and reset', () => {
  const servers = useStoreServers('cli_admin')
  const redis = {
    get url() {
      return servers.redis.url
    },
  }

  const { kinds, mongoUrl } = cliStores(servers)

  for (const [kind, { flag, store }] of Object.entries(kinds)) {
    test(`usage prints the store's QuotaUsage (text and --json), grant is seen within a second, reset starts over (${kind})`, { timeout: 120_000 }, async () => {
      const name = freshName('cli')
      const limiters = []
      for (let i = 0; i < 3; i++) limiters.push(limiterOn(await store(), name, { limit: 40, leaseUnits: 4 }))
      const admin = quotaAdmin(await store(), { name })
      const period = periodFor(MONTH, Date.now())
      const record = ['--name', name, '--key', 'acme']

      const drained = await Promise.all(limiters.map((limiter) => drain(limiter, 'acme')))
      assert.equal(drained.reduce((a, b) => a + b, 0), 40)
      // Closed, every limiter has told the store it holds nothing (they stay usable).
      await Promise.all(limiters.map((limiter) => limiter.close()))

      const json = await cli(['usage', ...flag(), ...record, '--period', period.id, '--json'])
      assert.equal(json.status, 0, json.stderr)
      assert.deepEqual(JSON.parse(json.stdout), await admin.usage('acme', period.id))
      assert.deepEqual(JSON.parse(json.stdout), { name, key: 'acme', periodId: period.id, limit: 40, extra: 0, used: 40, held: 0, expiresAt: JSON.parse(json.stdout).expiresAt })

      // The period spec names the period open now; the text is one line.
      const text = await cli(['usage', ...flag(), ...record, '--unit', 'month', '--zone', 'UTC'])
      assert.equal(text.status, 0, text.stderr)
      assert.equal(text.stderr, '')
      assert.equal(text.stdout.trim().split('\n').length, 1)
      assert.equal(
        text.stdout,
        `acme in ${period.id} (quota "${name}"): used 40 of limit 40 + extra 0 (held 0 by instances, 40 admitted), 0 left; expires ${new Date(period.endMs).toISOString().replace('.000Z', 'Z')}\n`,
      )

      const granted = await cli(['grant', ...flag(), ...record, '--period', period.id, '--units', '15', '--json'])
      assert.equal(granted.status, 0, granted.stderr)
      assert.equal(JSON.parse(granted.stdout).extra, 15)
      const started = Date.now()
      for (const limiter of limiters) {
        while (!(await limiter.consume('acme')).allowed) {
          assert.ok(Date.now() - started < 1_000 + 1_000, 'the grant is seen within a second')
          await sleep(20)
        }
      }
      const rest = await Promise.all(limiters.map((limiter) => drain(limiter, 'acme')))
      assert.equal(rest.reduce((a, b) => a + b, 0) + 3, 15)

      await Promise.all(limiters.map((limiter) => limiter.close()))
      const reset = await cli(['reset', ...flag(), ...record, '--period', period.id])
      assert.equal(reset.status, 0, reset.stderr)
      assert.match(reset.stdout, /^reset: acme in .*: used 0 of limit 40 \+ extra 0 \(held 0 by instances, 0 admitted\), 40 left; expires /)
      assert.equal(await drain(limiters[0], 'acme'), 40, 'the whole limit again')
      await limiters[0].close()
    })
  }

  test('a record nobody has used yet: usage says so; --json has zeros and limit null', async () => {
    const record = ['--name', freshName('none'), '--key', 'nobody', '--period', '2026-02']
    const text = await cli(['usage', '--redis', redis.url, ...record])
    assert.equal(text.status, 0, text.stderr)
    assert.match(text.stdout, /^nobody in 2026-02 \(quota ".*"\): no record yet \(limit none, extra 0, used 0, held 0\)\n$/)
    const json = await cli(['usage', '--mongo', mongoUrl(), ...record, '--json'])
    assert.equal(json.status, 0, json.stderr)
    assert.deepEqual({ ...JSON.parse(json.stdout), name: undefined }, { name: undefined, key: 'nobody', periodId: '2026-02', limit: null, extra: 0, used: 0, held: 0, expiresAt: null })
  })

  test('a bad argument exits 2 with one line on stderr naming it, before any store is asked', async () => {
    const store = ['--redis', 'redis://127.0.0.1:1']
    const record = ['--name', 'api', '--key', 'acme']
    const cases = [
      [['usage', ...record, '--period', '2026-12'], /--redis <url> or --mongo <url> is required/],
      [['usage', ...store, '--redis', 'redis://x', '--mongo', 'mongodb://x', ...record, '--period', '2026-12'], /--redis or --mongo, not both/],
      [['usage', '--redis', 'http://x', ...record, '--period', '2026-12'], /--redis must be a redis: or rediss: URL/],
      [['usage', '--redis', 'not a url', ...record, '--period', '2026-12'], /--redis must be a URL/],
      [['usage', ...store, '--key', 'acme', '--period', '2026-12'], /--name is required/],
      [['usage', ...store, '--name', 'api', '--period', '2026-12'], /--key is required/],
      [['usage', ...store, '--name', 'x'.repeat(129), '--key', 'acme', '--period', '2026-12'], /--name must be 1 to 128 characters/],
      [['usage', ...store, ...record], /--period <id> or --unit <unit> --zone <IANA> is required/],
      [['usage', ...store, ...record, '--period', '2026-13'], /--period must be a period id/],
      [['usage', ...store, ...record, '--period', '2026-02-30'], /--period must be a period id/],
      [['usage', ...store, ...record, '--period', '2026-12', '--unit', 'month'], /--period or the period spec/],
      [['usage', ...store, ...record, '--unit', 'month'], /--zone is required/],
      [['usage', ...store, ...record, '--unit', 'month', '--zone', 'Europe/Pariss'], /--zone .*did you mean 'Europe\/Paris'/],
      [['usage', ...store, ...record, '--unit', 'hour', '--zone', 'UTC'], /--unit 'hour' is refused/],
      [['grant', ...store, ...record, '--period', '2026-12'], /--units is required/],
      [['grant', ...store, ...record, '--period', '2026-12', '--units', '0'], /--units must be an integer from 1/],
      [['grant', ...store, ...record, '--period', '2026-12', '--units', '-5'], /--units must be a positive integer/],
      [['grant', ...store, ...record, '--period', '2026-12', '--units', '1.5'], /--units must be an integer/],
      [['usage', ...store, ...record, '--period', '2026-12', '--units', '5'], /unknown option '--units'/],
      [['usage', ...store, ...record, '--period', '2026-12', '--nmae', 'x'], /unknown option '--nmae' \(did you mean '--name'\?\)/],
      [['reset', ...store, ...record, '--period', '2026-12', '--collection', 'x'], /--collection applies to --mongo only/],
    ]
    const results = await Promise.all(cases.map(([args]) => cli(args)))
    results.forEach((result, at) => {
      const [args, message] = cases[at]
      assert.equal(result.status, 2, `${args.join(' ')}: ${result.stderr}`)
      assert.equal(result.stdout, '')
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr)
      assert.match(result.stderr, message, args.join(' '))
    })
  })

  test('a store that cannot be reached, hung or refusing, exits 1 within 5 s of the start, with one line naming it, on either Redis client', async () => {
    const hung = await startRedisServer()
    hung.pause() // answers nothing: the connection opens, no reply comes
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-cli-hung-'))
    const nodeRedis = { nodeArgs: ['--require', hiding(dir, ['ioredis', 'iovalkey'])] }
    try {
      const refused = /cannot reach Redis at redis:\/\/127\.0\.0\.1:1 within 5 s: .*ECONNREFUSED/
      const stopped = /cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+ within 5 s/
      const cases = [
        [['--redis', 'redis://127.0.0.1:1'], refused],
        [['--redis', 'redis://127.0.0.1:1'], refused, nodeRedis],
        [['--redis', `redis://:secret@127.0.0.1:${hung.port}`], stopped],
        [['--redis', `redis://:secret@127.0.0.1:${hung.port}`], stopped, nodeRedis],
        [['--mongo', 'mongodb://127.0.0.1:1/app'], /cannot reach MongoDB at mongodb:\/\/127\.0\.0\.1:1\/app within 5 s/],
      ]
      const results = await Promise.all(cases.map(([store, , options]) => cli(['grant', ...store, '--name', 'api', '--key', 'acme', '--period', '2026-12', '--units', '5', '--create'], options)))
      results.forEach((result, at) => {
        const what = `case ${at}: ${result.stderr}`
        assert.equal(result.status, 1, what)
        assert.equal(result.stdout, '')
        assert.equal(result.stderr.trim().split('\n').length, 1, what)
        assert.match(result.stderr, cases[at][1])
        assert.doesNotMatch(result.stderr, /secret/)
        assert.ok(result.ms < UNREACHABLE_WITHIN_MS, `case ${at}: exited after ${result.ms} ms`)
      })
    } finally {
      hung.resume()
      await hung.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('a store that answers with an error (Redis out of memory) is named with what it answered, not as unreachable: exit 1 at once', async () => {
    const full = await startRedisServer()
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-cli-oom-'))
    try {
      const Redis = require('ioredis')
      const admin = new Redis({ host: full.host, port: full.port })
      await admin.config('SET', 'maxmemory', '1')
      admin.disconnect()
      const args = ['grant', '--redis', full.url, '--name', 'api', '--key', 'acme', '--period', '2026-12', '--units', '5', '--create']
      for (const options of [{}, { nodeArgs: ['--require', hiding(dir, ['ioredis', 'iovalkey'])] }]) {
        const result = await cli(args, options)
        assert.equal(result.status, 1, result.stderr)
        assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr)
        assert.match(result.stderr, /Redis at redis:\/\/127\.0\.0\.1:\d+\/? answered: OOM command not allowed/)
        assert.doesNotMatch(result.stderr, /cannot reach/)
        assert.ok(result.ms < UNREACHABLE_WITHIN_MS, `${result.ms} ms`)
      }
    } finally {
      await full.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  for (const [kind, { flag }] of Object.entries(kinds)) {
    test(`grant refuses --units that would take limit + extra past Number.MAX_SAFE_INTEGER: exit 2, one line, nothing written (${kind})`, async () => {
      const record = ['--name', freshName('huge'), '--key', 'acme', '--period', '2026-12']
      const most = await cli(['grant', ...flag(), ...record, '--units', String(2 ** 52), '--create', '--json'])
      assert.equal(most.status, 0, most.stderr)
      assert.equal(JSON.parse(most.stdout).extra, 2 ** 52)
      const refused = await cli(['grant', ...flag(), ...record, '--units', String(2 ** 52)])
      assert.equal(refused.status, 2, refused.stderr)
      assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr)
      assert.match(refused.stderr, /--units must be at most 4503599627370495 .*MAX_SAFE_INTEGER/)
      const after = await cli(['usage', ...flag(), ...record, '--json'])
      assert.equal(after.status, 0, after.stderr)
      assert.equal(JSON.parse(after.stdout).extra, 2 ** 52)
    })
  }

  test('a client the application does not have is named, with a coded error and exit 1', async () => {
    // The application has no Redis or MongoDB client: resolving them fails as in an app without them.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-cli-peer-'))
    const hide = hiding(dir, ['ioredis', 'iovalkey', 'redis', 'mongodb'])
    try {
      const record = ['--name', 'api', '--key', 'acme', '--period', '2026-12']
      const redisResult = await cli(['usage', '--redis', redis.url, ...record], { nodeArgs: ['--require', hide], cwd: dir })
      assert.equal(redisResult.status, 1, redisResult.stderr)
      assert.match(redisResult.stderr, /--redis needs ioredis or redis, an optional peer dependency \(iovalkey works too\) .*npm install ioredis.*\(ERR_MISSING_PEER_DEPENDENCY\)/)
      const mongoResult = await cli(['usage', '--mongo', mongoUrl(), ...record], { nodeArgs: ['--require', hide], cwd: dir })
      assert.equal(mongoResult.status, 1, mongoResult.stderr)
      assert.match(mongoResult.stderr, /--mongo needs mongodb, an optional peer dependency .*\(ERR_MISSING_PEER_DEPENDENCY\)/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the node-redis client is used when the application has redis and not ioredis', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-cli-node-redis-'))
    const hide = hiding(dir, ['ioredis', 'iovalkey'])
    try {
      const name = freshName('node-redis')
      const result = await cli(['grant', '--redis', redis.url, '--name', name, '--key', 'acme', '--period', '2026-12', '--units', '9', '--create', '--json'], { nodeArgs: ['--require', hide] })
      assert.equal(result.status, 0, result.stderr)
      assert.equal(JSON.parse(result.stdout).extra, 9)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
