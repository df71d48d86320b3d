'use strict'
// The README's KeyedQuotaClock example runs as written (as an ES module, for its top-level
// await), and says what it prints.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')

function keyedExample() {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Many keys: `KeyedQuotaClock`'))
  return /```js\n([\s\S]*?)```/.exec(section)[1]
}

test('the README example of KeyedQuotaClock runs, refunds the failed call and saves a snapshot', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-readme-'))
  const code = keyedExample()
    .replace("require('node:fs')", "createRequire(import.meta.url)('node:fs')")
    .replace("require('quota-clock-source')", `createRequire(import.meta.url)(${JSON.stringify(ROOT)})`)
    .replace(/^limiter\.status\('kiwi'\).*$/m, "console.log(JSON.stringify(limiter.status('kiwi')))")
  const script = `import { createRequire } from 'node:module'\n${code}`
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
