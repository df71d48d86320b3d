'use strict'

// `quota-clock-source block|unblock|blocked|keys` (docs/blocking.md) and `grant --create`, run as
// child processes against a real redis-server and the MongoDB wire server: block writes a
// fleet-wide block for --for (30s, 5m, 1h, 1d or ms), blocked reads it, unblock lifts it, keys
// lists a name's keys (or only the blocked ones); grant on a record the store does not have exits
// 2 naming --create, and with --create makes it and says so. A bad argument exits 2 and a store
// that cannot be reached exits 1, each with one line on stderr.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { quotaAdmin } = require('../lib/shared.js')
const { storeOperations } = require('../lib/share/protocol.js')
const { useStoreServers } = require('./helpers/shared-fleet.js')
const { cli, cliStores, freshName } = require('./helpers/cli.js')

const UNREACHABLE_WITHIN_MS = 15_000

describe('quota-clock-source block, unblock, blocked, keys and grant --create', () => {
  const servers = useStoreServers('cli_blocks')
  const { kinds } = cliStores(servers)

  for (const [kind, { flag, store }] of Object.entries(kinds)) {
    test(`block for --for, blocked, keys --blocked, unblock (text and --json) (${kind})`, { timeout: 120_000 }, async () => {
      const name = freshName('cli')
      const key = '203.0.113.9'
      const admin = quotaAdmin(await store(), { name })
      const blocked = await cli(['block', ...flag(), '--name', name, '--key', key, '--for', '1h'])
      assert.equal(blocked.status, 0, blocked.stderr)
      assert.match(blocked.stdout, new RegExp(`^blocked: 203\\.0\\.113\\.9 \\(limiter "${name}"\\): blocked for (59m \\d+s|1h) more, level 0\\n$`))
      const seen = await admin.blocked(key)
      assert.ok(seen.blockedForMs > 3_590_000 && seen.blockedForMs <= 3_600_000, String(seen.blockedForMs))
      const json = await cli(['blocked', ...flag(), '--name', name, '--key', key, '--json'])
      assert.equal(json.status, 0, json.stderr)
      const answer = JSON.parse(json.stdout)
      assert.deepEqual(Object.keys(answer), ['name', 'key', 'blockedForMs', 'level'])
      assert.deepEqual([answer.name, answer.key, answer.level], [name, key, 0])
      const listed = await cli(['keys', ...flag(), '--name', name, '--blocked'])
      assert.equal(listed.status, 0, listed.stderr)
      assert.match(listed.stdout, /^203\.0\.113\.9 {2}blocked for (59m \d+s|1h)\n$/)
      const listedJson = JSON.parse((await cli(['keys', ...flag(), '--name', name, '--json'])).stdout)
      assert.deepEqual(listedJson.map((entry) => entry.key), [key])
      const none = await cli(['keys', ...flag(), '--name', `${name}-typo`])
      assert.deepEqual([none.status, none.stdout], [0, 'no keys\n'])
      const lifted = await cli(['unblock', ...flag(), '--name', name, '--key', key])
      assert.equal(lifted.status, 0, lifted.stderr)
      assert.match(lifted.stdout, new RegExp(`^unblocked: 203\\.0\\.113\\.9 \\(limiter "${name}"\\): lifted with (59m \\d+s|1h) left, level 0\\n$`))
      assert.equal((await admin.blocked(key)).blockedForMs, 0)
      const again = await cli(['unblock', ...flag(), '--name', name, '--key', key])
      assert.equal(again.stdout, `unblocked: 203.0.113.9 (limiter "${name}"): was not blocked, level 0\n`)
      const after = await cli(['blocked', ...flag(), '--name', name, '--key', key])
      assert.equal(after.stdout, `203.0.113.9 (limiter "${name}"): not blocked, level 0\n`)
      for (const [text, ms] of [['30s', 30_000], ['5m', 300_000], ['1d', 86_400_000], ['1500', 1500]]) {
        const result = await cli(['block', ...flag(), '--name', name, '--key', `k${ms}`, '--for', text, '--json'])
        assert.equal(result.status, 0, result.stderr)
        const { blockedForMs } = JSON.parse(result.stdout)
        assert.ok(blockedForMs > ms - 1000 && blockedForMs <= ms, `${text}: ${blockedForMs}`)
      }
    })

    test(`grant on a record the store does not have exits 2 naming --create; with --create it makes it and says so (${kind})`, { timeout: 120_000 }, async () => {
      const name = freshName('grant')
      const record = ['--name', name, '--key', 'acme', '--period', '2026-12', '--units', '500']
      const refused = await cli(['grant', ...flag(), ...record])
      assert.equal(refused.status, 2, refused.stderr)
      assert.equal(refused.stderr.trim().split('\n').length, 1)
      assert.match(refused.stderr, new RegExp(`no record of key 'acme' in 2026-12 for quota "${name}".*--create`))
      const usage = await quotaAdmin(await store(), { name }).usage('acme', '2026-12')
      assert.equal(usage.limit, null, 'nothing was written')
      assert.equal(usage.expiresAt, null, 'nothing was written')
      const made = await cli(['grant', ...flag(), ...record, '--create'])
      assert.equal(made.status, 0, made.stderr)
      assert.match(made.stdout, /^granted 500 \(new record, --create\): acme in 2026-12/)
      const again = await cli(['grant', ...flag(), ...record, '--json'])
      assert.equal(again.status, 0, again.stderr)
      const json = JSON.parse(again.stdout)
      assert.deepEqual([json.extra, json.created], [1000, false])
      // A record a limiter made takes a grant without --create.
      const other = freshName('grant')
      await storeOperations(await store()).reserve({ name: other, key: 'acme', periodId: '2026-12', limit: 10, leaseUnits: 1, lacking: 0, charge: 0, expiresAtMs: Date.now() + 3_600_000 })
      const existing = await cli(['grant', ...flag(), '--name', other, '--key', 'acme', '--period', '2026-12', '--units', '5', '--json'])
      assert.equal(existing.status, 0, existing.stderr)
      assert.equal(JSON.parse(existing.stdout).created, false)
    })
  }

  test('a bad argument exits 2 with one line on stderr naming it, before any store is asked', async () => {
    const store = ['--redis', 'redis://127.0.0.1:1']
    for (const [args, pattern] of [
      [['block', ...store, '--name', 'n', '--key', 'k'], /--for is required/],
      [['block', ...store, '--name', 'n', '--key', 'k', '--for', '5x'], /--for must be a duration/],
      [['block', ...store, '--name', 'n', '--key', 'k', '--for', '366d'], /--for must be a duration .*365 days/],
      [['block', ...store, '--name', 'n', '--key', 'k', '--for', '0'], /--for must be a duration/],
      [['unblock', ...store, '--name', 'n'], /--key is required/],
      [['blocked', ...store, '--key', 'k'], /--name is required/],
      [['blocked', ...store, '--name', 'n', '--key', 'k', '--period', '2026-12'], /--period/],
      [['keys', ...store, '--name', 'n', '--limit', '10001'], /--limit must be an integer from 1 to 10000/],
      [['keys', '--name', 'n'], /--redis <url> or --mongo <url> is required/],
    ]) {
      const result = await cli(args)
      assert.equal(result.status, 2, `${args.join(' ')}: ${result.stderr}`)
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr)
      assert.match(result.stderr, pattern)
    }
  })

  test('--mongo with no database in its path says on stderr which database it uses', async () => {
    const url = new URL(servers.mongo.uri)
    url.pathname = '/'
    const result = await cli(['blocked', '--mongo', url.href, '--name', freshName('nodb'), '--key', 'k'])
    assert.equal(result.status, 0, result.stderr)
    assert.match(result.stderr, /--mongo names no database \(mongodb:\/\/host:port\/<database>\): using the driver's default, "test"/)
    const named = await cli(['blocked', ...kinds.mongo.flag(), '--name', freshName('nodb'), '--key', 'k'])
    assert.deepEqual([named.status, named.stderr], [0, ''], 'a database named: nothing said')
  })

  test('a store that cannot be reached exits 1 with one line, within the deadline', async () => {
    for (const command of [['block', '--for', '1h', '--key', 'k'], ['unblock', '--key', 'k'], ['blocked', '--key', 'k'], ['keys']]) {
      const result = await cli([...command, '--redis', 'redis://127.0.0.1:1', '--name', 'n'])
      assert.equal(result.status, 1, result.stderr)
      assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr)
      assert.match(result.stderr, /cannot reach Redis at redis:\/\/127\.0\.0\.1:1\/? within 5 s/)
      assert.ok(result.ms < UNREACHABLE_WITHIN_MS, `exited after ${result.ms} ms`)
    }
  })
})
