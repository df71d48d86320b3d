'use strict'
// examples/snapshot.js: a KeyedQuotaClock snapshotted to a file on an interval and at SIGTERM,
// written atomically, restored at start. Run in child processes; one is killed with SIGKILL at
// random moments while it writes, and the file must stay a valid snapshot every time.

const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { KeyedQuotaClock } = require('..')

const EXAMPLE = path.join(__dirname, '..', 'examples', 'snapshot.js')
// The example's plans, so a limiter here sees its keys as the example does.
const plans = {
  free: { capacity: 10, refillPerSecond: 1, quota: { limit: 1_000, period: { unit: 'month', timeZone: 'UTC' } } },
  pro: { capacity: 100, refillPerSecond: 20, quota: { limit: 100_000, period: { unit: 'month', timeZone: 'America/New_York' } } },
}
const policy = (tenant) => (Number(tenant.split('-')[1]) % 10 === 0 ? plans.pro : plans.free)
const options = { capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', policy }

/** Starts the example; resolves once `pattern` has appeared on its stdout. */
function start(file, intervalMs, env = {}) {
  const child = spawn(process.execPath, [EXAMPLE, file, String(intervalMs)], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  child.output = ''
  child.stdout.on('data', (chunk) => (child.output += chunk))
  child.stderr.on('data', (chunk) => (child.output += chunk))
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  return child
}

async function waitFor(child, pattern, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  while (!pattern.test(child.output)) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${pattern}; output:\n${child.output}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

function tmpdir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-snapshot-'))
}

test('the example snapshots at SIGTERM and the next start restores every key and its quota use', async () => {
  const dir = tmpdir()
  const file = path.join(dir, 'quota.bin')
  const first = start(file, 100, { SIMULATED_TENANTS: '50' })
  await waitFor(first, /snapshot \(interval\)/)
  first.kill('SIGTERM')
  assert.deepEqual(await first.exited, { code: 0, signal: null }, first.output)
  assert.match(first.output, /snapshot \(SIGTERM\): (\d+) keys/)
  const saved = Number(/snapshot \(SIGTERM\): (\d+) keys/.exec(first.output)[1])
  const restored = new KeyedQuotaClock({ ...options, restore: fs.readFileSync(file) })
  assert.equal(restored.size, saved)
  const used = Array.from({ length: 50 }, (_, i) => restored.status(`tenant-${i}`).quotaUsed ?? 0)
  assert.ok(used.some((n) => n > 0), 'quota use was saved')

  const second = start(file, 100_000, { SIMULATED_TENANTS: '50' })
  await waitFor(second, /holding \d+ keys restored/)
  assert.match(second.output, new RegExp(`holding ${saved} keys restored`))
  second.kill('SIGTERM')
  assert.equal((await second.exited).code, 0)
  fs.rmSync(dir, { recursive: true, force: true })
})

test('kill -9 at random moments between and during writes leaves the last snapshot file valid', async (t) => {
  const dir = tmpdir()
  const file = path.join(dir, 'quota.bin')
  let sizes = []
  for (let round = 0; round < 6; round++) {
    const child = start(file, 2, { SIMULATED_TENANTS: '200000' })
    await waitFor(child, /snapshot \(interval\)/)
    await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 300))
    child.kill('SIGKILL')
    assert.equal((await child.exited).signal, 'SIGKILL')
    const bytes = fs.readFileSync(file)
    const restored = new KeyedQuotaClock({ ...options, restore: bytes }) // throws if the file is not whole
    sizes.push(restored.size)
    assert.doesNotMatch(child.output, /cannot restore/, child.output)
  }
  // A temporary file left behind is a write the kill interrupted (informational: timing decides).
  t.diagnostic(`writes interrupted: ${fs.readdirSync(dir).filter((name) => name.endsWith('.tmp')).length} of 6 kills`)
  assert.ok(sizes.every((size) => size > 0), `sizes ${sizes}`)
  assert.ok(sizes[sizes.length - 1] >= sizes[0], `keys carried over from run to run: ${sizes}`)
  fs.rmSync(dir, { recursive: true, force: true })
})
