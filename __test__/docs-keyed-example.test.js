'use strict'
// The KeyedQuotaClock example of docs/keyed.md (an ES module, for its top-level await) runs as
// written and prints what its comments say.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { pathToFileURL } = require('node:url')

const ROOT = path.join(__dirname, '..')

function keyedExample() {
  const page = fs.readFileSync(path.join(ROOT, 'docs', 'keyed.md'), 'utf8')
  return /```mjs\n([\s\S]*?)```/.exec(page)[1]
}

test('the KeyedQuotaClock example runs, refunds the failed call and saves a snapshot', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-readme-'))
  const example = keyedExample()
  assert.match(example, /^console\.log\(limiter\.status\('kiwi'\)\)/m, 'the example prints the status of kiwi')
  const script = example
    .replace("from 'quota-clock-source'", `from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'index.mjs')).href)}`)
    .replace(/^console\.log\(limiter\.status\('kiwi'\)\).*$/m, "console.log(JSON.stringify(limiter.status('kiwi')))")
  const file = path.join(dir, 'example.mjs')
  fs.writeFileSync(file, script)
  const child = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', timeout: 30_000 })
  assert.equal(child.status, 0, child.stderr)
  const status = JSON.parse(child.stdout.trim().split('\n').pop())
  // The clock is the system's: a few ms of refill pass while the example runs.
  assert.deepEqual([Math.floor(status.tokens), status.quotaUsed, status.quotaRemaining, status.capacity, status.quotaLimit, status.period.timeZone], [9, 1, 999, 10, 1000, 'Pacific/Auckland'])
  assert.ok(fs.statSync(path.join(dir, 'quota.bin')).size > 0)
  // Run again: the snapshot is restored, kiwi's month keeps its use.
  const again = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', timeout: 30_000 })
  assert.equal(again.status, 0, again.stderr)
  const later = JSON.parse(again.stdout.trim().split('\n').pop())
  assert.equal(later.quotaUsed, later.period.id === status.period.id ? 2 : 1, 'the month kept its use (unless it just ended)')
  fs.rmSync(dir, { recursive: true, force: true })
})
