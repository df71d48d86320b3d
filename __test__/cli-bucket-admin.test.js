'use strict'

// `quota-clock-source bucket|fill` (docs/operating-quotas.md, "A shared bucket") run as a child
// process against a real redis-server and the MongoDB wire server: bucket prints the store's
// BucketUsage (a line of text, or JSON); fill puts a saturated bucket back to capacity - out, so
// the key takes again; a bad argument exits 2 and a store that cannot be reached exits 1, each
// with one line on stderr.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { storeOperations } = require('../lib/share/protocol.js')
const { useStoreServers } = require('./helpers/shared-fleet.js')
const { cli, cliStores, freshName } = require('./helpers/cli.js')

// The command gives the store 5 s; the rest is a loaded machine starting node.
const UNREACHABLE_WITHIN_MS = 15_000

function takeOf(name, key, fields) {
  return { name, key, capacity: 10, refillPerSecond: 0.001, instance: 'A', leaseMs: 10_000, want: 0, more: 0, held: 0, give: 0, charge: 0, fleetMs: -1, recordId: 0, ...fields }
}

describe('quota-clock-source bucket and fill', () => {
  const servers = useStoreServers('cli_bucket')
  const { kinds } = cliStores(servers)

  for (const [kind, { flag, store }] of Object.entries(kinds)) {
    test(`bucket prints the store's bucket (text and --json); fill unblocks a saturated key (${kind})`, { timeout: 120_000 }, async () => {
      const ops = storeOperations(await store())
      const name = freshName('cli')
      const key = '203.0.113.7'
      const a = await ops.bucketTake(takeOf(name, key, { want: 4 }))
      const saturated = await ops.bucketTake(takeOf(name, key, { want: 1, held: 4, charge: 20, fleetMs: a.fleetMs, recordId: a.recordId }))
      assert.equal(saturated.granted, 0)
      const text = await cli(['bucket', ...flag(), '--name', name, '--key', key])
      assert.equal(text.status, 0, text.stderr)
      assert.match(text.stdout, new RegExp(`^203\\.0\\.113\\.7 \\(bucket "${name}"\\): -1[34](\\.\\d+)? tokens of capacity 10 in the store, 4 out in slices, refill 0\\.001/s; expires \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\n$`))
      const json = await cli(['bucket', ...flag(), '--name', name, '--key', key, '--json'])
      assert.equal(json.status, 0, json.stderr)
      const usage = JSON.parse(json.stdout)
      assert.deepEqual(Object.keys(usage), ['name', 'key', 'capacity', 'refillPerSecond', 'tokens', 'out', 'expiresAt'])
      assert.deepEqual([usage.name, usage.key, usage.capacity, usage.refillPerSecond, usage.out], [name, key, 10, 0.001, 4])
      assert.ok(usage.tokens < -13.9 && usage.tokens > -14.1, String(usage.tokens))
      const filled = await cli(['fill', ...flag(), '--name', name, '--key', key])
      assert.equal(filled.status, 0, filled.stderr)
      assert.match(filled.stdout, new RegExp(`^filled: 203\\.0\\.113\\.7 \\(bucket "${name}"\\): 6 tokens of capacity 10 in the store, 4 out in slices`))
      const again = await ops.bucketTake(takeOf(name, key, { instance: 'B', want: 6, fleetMs: a.fleetMs, recordId: a.recordId }))
      assert.equal(again.granted, 6)
      const none = await cli(['fill', ...flag(), '--name', name, '--key', 'nobody', '--json'])
      assert.equal(none.status, 0, none.stderr)
      assert.deepEqual(JSON.parse(none.stdout), { name, key: 'nobody', capacity: null, refillPerSecond: null, tokens: 0, out: 0, expiresAt: null })
      const noneText = await cli(['bucket', ...flag(), '--name', name, '--key', 'nobody'])
      assert.equal(noneText.stdout, `nobody (bucket "${name}"): no record (capacity none, tokens 0, out 0)\n`)
    })
  }

  test('a bad argument exits 2 with one line on stderr naming it, before any store is asked', async () => {
    const where = ['--redis', 'redis://127.0.0.1:1']
    const cases = [
      [['bucket', ...where, '--key', 'k'], /--name is required/],
      [['fill', ...where, '--name', 'api'], /--key is required/],
      [['bucket', '--name', 'api', '--key', 'k'], /--redis <url> or --mongo <url> is required/],
      [['fill', ...where, '--mongo', 'mongodb://127.0.0.1:1/x', '--name', 'api', '--key', 'k'], /--redis or --mongo, not both/],
      [['bucket', ...where, '--name', 'api', '--key', 'k', '--period', '2024-03'], /unknown option '--period'/],
      [['fill', ...where, '--name', 'api', '--key', 'k', '--units', '5'], /unknown option '--units'/],
      [['bucket', '--redis', 'http://x', '--name', 'api', '--key', 'k'], /--redis must be a redis: or rediss: URL/],
      [['bucket', ...where, '--name', '', '--key', 'k'], /--name must be 1 to 128 characters/],
    ]
    for (const [args, message] of cases) {
      const { status, stdout, stderr } = await cli(args)
      assert.equal(status, 2, `${args.join(' ')}: ${stderr}`)
      assert.equal(stdout, '')
      assert.equal(stderr.split('\n').filter(Boolean).length, 1, stderr)
      assert.match(stderr, message)
      assert.match(stderr, new RegExp(`^quota-clock-source ${args[0]}: `))
    }
  })

  test('a store that cannot be reached exits 1 within a few seconds, with one line naming it', async () => {
    for (const args of [
      ['bucket', '--redis', 'redis://127.0.0.1:1', '--name', 'api', '--key', 'k'],
      ['fill', '--mongo', 'mongodb://127.0.0.1:1/app', '--name', 'api', '--key', 'k'],
    ]) {
      const { status, stdout, stderr, ms } = await cli(args)
      assert.equal(status, 1, stderr)
      assert.equal(stdout, '')
      assert.match(stderr, /^quota-clock-source (bucket|fill): cannot reach (Redis|MongoDB) at .*\(ERR_STORE_UNAVAILABLE\)\n$/)
      assert.ok(ms < UNREACHABLE_WITHIN_MS, `${ms} ms`)
    }
  })

  test('--help names every option and an example', async () => {
    for (const command of ['bucket', 'fill']) {
      const { status, stdout } = await cli([command, '--help'])
      assert.equal(status, 0)
      for (const option of ['--redis', '--mongo', '--prefix', '--collection', '--name', '--key', '--json']) assert.ok(stdout.includes(option), `${command} --help: ${option}`)
      assert.match(stdout, new RegExp(`quota-clock-source ${command} --redis redis://localhost:6379 --name api --key 203\\.0\\.113\\.7`))
    }
  })
})
