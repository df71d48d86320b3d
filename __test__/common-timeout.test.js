'use strict'
// lib/common/timeout.js: the one way a call is bounded in time (rateLimit's throttle check, a
// shared limiter's store calls and give-backs, the command line's store deadline).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { withTimeout, timer, quietTimer, storeDeadline } = require('../lib/common/timeout.js')

const never = new Promise(() => {})
// quietTimer's and storeDeadline's timers are unref'd: a referenced interval keeps the test's loop up.
const keepAlive = () => {
  const handle = setInterval(() => {}, 1000)
  return () => clearInterval(handle)
}

test("withTimeout settles as the promise does when it settles first, and the deadline's timer is cancelled", async () => {
  let expired = false
  assert.equal(await withTimeout(Promise.resolve(7), 50, () => (expired = true)), 7)
  await assert.rejects(withTimeout(Promise.reject(new Error('boom')), 50, () => (expired = true)), /boom/)
  await new Promise((resolve) => setTimeout(resolve, 100))
  assert.equal(expired, false)
})

test("withTimeout answers onTimeout()'s value, or rejects with what it throws, and ignores a late outcome", async (t) => {
  t.after(keepAlive())
  for (const deadline of [timer, quietTimer, storeDeadline]) {
    assert.equal(await withTimeout(never, 5, () => 'late', deadline), 'late')
    await assert.rejects(
      withTimeout(never, 5, () => {
        throw new Error('timed out')
      }, deadline),
      /timed out/,
    )
    let settle
    const slow = new Promise((resolve) => (settle = resolve))
    const bounded = withTimeout(slow, 5, () => 'timeout', deadline)
    assert.equal(await bounded, 'timeout')
    settle('answer')
    assert.equal(await bounded, 'timeout')
  }
})

test('storeDeadline starts on the next turn: a synchronous stretch longer than the deadline does not use it up', async (t) => {
  t.after(keepAlive())
  let settle
  const answer = new Promise((resolve) => (settle = resolve))
  const bounded = withTimeout(answer, 20, () => 'timeout', storeDeadline)
  const until = Date.now() + 60
  while (Date.now() < until) {
    // busy: the process keeps the answer waiting, not the store
  }
  setImmediate(() => settle('answer'))
  assert.equal(await bounded, 'answer')
})

test('quietTimer keeps nothing alive; timer does', () => {
  const { spawnSync } = require('node:child_process')
  const path = require('node:path')
  const script = (name) => `const t = require(${JSON.stringify(path.join(__dirname, '..', 'lib', 'common', 'timeout.js'))}); const s = Date.now(); t.withTimeout(new Promise(() => {}), 1500, () => 0, t.${name}); process.on('exit', () => console.log(Date.now() - s))`
  const quiet = Number(spawnSync(process.execPath, ['-e', script('quietTimer')], { encoding: 'utf8' }).stdout)
  const plain = Number(spawnSync(process.execPath, ['-e', script('timer')], { encoding: 'utf8' }).stdout)
  assert.ok(quiet < 1500, `quietTimer kept the process ${quiet} ms`)
  assert.ok(plain >= 1400, `timer let the process exit after ${plain} ms`)
})
