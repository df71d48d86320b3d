'use strict'
// A `policy` that returns a promise (an async function, a thenable) is refused like an invalid
// KeyPolicy, naming the key, and its rejection is handled: run in a child process, where an
// unhandled rejection would end the process with an error.

const test = require('node:test')
const assert = require('node:assert/strict')
const { runScript } = require('./helpers/child.js')

test('an async policy is refused for the key, the key is not held, and its rejection never goes unhandled', () => {
  const { result, stderr } = runScript(`
    const { KeyedQuotaClock } = require(ROOT)
    const plans = new Map([['tenant-pro', { capacity: 100, refillPerSecond: 10 }]])
    const events = []
    process.on('unhandledRejection', (reason) => events.push('unhandled: ' + String(reason && reason.message)))
    const answers = []
    const attempt = (label, body) => {
      try {
        body()
        answers.push({ label, ok: true })
      } catch (error) {
        answers.push({ label, name: error.constructor.name, code: error.code, message: error.message })
      }
    }
    const base = { capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' }
    const resolving = new KeyedQuotaClock({ ...base, policy: async (key) => plans.get(key) })
    attempt('resolving tryConsume', () => resolving.tryConsume('tenant-pro'))
    attempt('resolving status', () => resolving.status('tenant-pro'))
    const rejecting = new KeyedQuotaClock({ ...base, policy: async (key) => { throw new Error('no plan for ' + key) } })
    attempt('rejecting tryConsume', () => rejecting.tryConsume('tenant-x'))
    attempt('rejecting again', () => rejecting.tryConsume('tenant-y'))
    const thenable = new KeyedQuotaClock({ ...base, policy: () => ({ then(resolve, reject) { reject(new Error('thenable refused')) } }) })
    attempt('thenable tryConsume', () => thenable.tryConsume('tenant-z'))
    const source = new KeyedQuotaClock(base)
    source.tryConsume('tenant-pro')
    attempt('restore', () => new KeyedQuotaClock({ ...base, policy: async () => undefined, restore: source.snapshot() }))
    setTimeout(() => {
      console.log(JSON.stringify({ answers, events, sizes: [resolving.size, rejecting.size, thenable.size] }))
    }, 50)
  `)
  assert.equal(stderr, '')
  assert.deepEqual(result.events, [], 'no unhandled rejection')
  assert.deepEqual(result.sizes, [0, 0, 0], 'no key was held')
  const keys = { 'resolving tryConsume': 'tenant-pro', 'resolving status': 'tenant-pro', 'rejecting tryConsume': 'tenant-x', 'rejecting again': 'tenant-y', 'thenable tryConsume': 'tenant-z', restore: 'tenant-pro' }
  assert.equal(result.answers.length, 6)
  for (const answer of result.answers) {
    assert.equal(answer.name, 'TypeError', JSON.stringify(answer))
    assert.equal(answer.code, 'ERR_INVALID_OPTION')
    assert.ok(answer.message.includes(`policy(${JSON.stringify(keys[answer.label])})`), answer.message)
    assert.match(answer.message, /synchronously/)
    assert.match(answer.message, /Map/)
  }
})
