'use strict'
// rateLimit's behavioural cases (helpers/http-cases.js, the same ones the Fastify plugin passes)
// on Express 5, Express 4 and plain node:http, on real sockets driven by fetch.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { QuotaClock, QuotaClockError, manualClock } = require('..')
const { createDecider } = require('../lib/http/decide.js')
const { defineCases } = require('./helpers/http-cases.js')

for (const kind of ['Express 5', 'Express 4', 'node:http']) defineCases(kind)

describe('what a callback throws, as the error of the request', () => {
  /** The error the framework adapter is handed for one request. */
  function failureOf(options) {
    let seen = 'nothing'
    const io = { setHeader() {}, sendProblem() {}, pass() {}, fail: (err) => (seen = err) }
    const pending = createDecider(options, io)({ ip: '192.0.2.1', headers: {} }, {}, () => {})
    return pending === undefined ? seen : pending.then(() => seen)
  }
  const limiter = () => new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ wallMs: Date.UTC(2024, 0, 1) }) })

  it('a non-Error is wrapped: QuotaClockError ERR_CALLBACK, the thrown value as cause, the message naming the callback and the entry', async () => {
    for (const thrown of [null, false, 0, '', undefined, 'text', { not: 'an error' }]) {
      const skipped = failureOf({ limiter: limiter(), skip: () => { throw thrown } })
      assert.ok(skipped instanceof QuotaClockError)
      assert.equal(skipped.code, 'ERR_CALLBACK')
      assert.equal(skipped.cause, thrown)
      assert.match(skipped.message, /skip\(req\) threw/)
      const costly = await failureOf({ limits: [{ limiter: limiter(), name: 'api', cost: () => Promise.reject(thrown) }] })
      assert.ok(costly instanceof QuotaClockError)
      assert.equal(costly.cause, thrown)
      assert.match(costly.message, /cost\(req\) of limits\[0\] "api" threw/)
    }
  })

  it('an Error (any realm, any subclass) is handed over as it is', () => {
    const own = new RangeError('mine')
    assert.equal(failureOf({ limiter: limiter(), skip: () => { throw own } }), own)
    const foreign = require('node:vm').runInNewContext('new Error("other realm")')
    assert.equal(failureOf({ limiter: limiter(), skip: () => { throw foreign } }), foreign)
  })

  it('synchronous callbacks and in-process limits are decided without a promise (the fast path)', () => {
    let passed = 0
    const io = { setHeader() {}, sendProblem() {}, pass: () => passed++, fail: (err) => assert.fail(err) }
    for (const options of [{ limiter: limiter() }, { limits: [{ limiter: limiter(), name: 'a' }, { limiter: limiter(), name: 'b' }], cost: () => 1 }]) {
      assert.equal(createDecider(options, io)({ ip: '192.0.2.1', headers: {} }, {}, () => {}), undefined)
    }
    assert.equal(passed, 2)
  })
})

describe('the RateLimit-Policy, RateLimit and Retry-After headers, built one way', () => {
  it('are named, and written, in one place: a function of lib/http/headers.js that every path calls', () => {
    const path = require('node:path')
    const fs = require('node:fs')
    const lib = path.join(__dirname, '..', 'lib')
    const files = [...fs.readdirSync(path.join(lib, 'http')).map((file) => path.join('http', file)), 'fastify.js'].filter((file) => file.endsWith('.js'))
    const named = []
    for (const file of files) {
      const source = fs.readFileSync(path.join(lib, file), 'utf8')
      for (const match of source.matchAll(/(['"])(RateLimit-Policy|RateLimit|Retry-After)\1/g)) named.push(`${file} ${match[2]}`)
    }
    assert.deepEqual(named.sort(), ['http/headers.js RateLimit', 'http/headers.js RateLimit-Policy', 'http/headers.js Retry-After'])
  })

  it('come in one order on every synchronous answer: RateLimit-Policy, RateLimit, then Retry-After on a denial', () => {
    const clock = manualClock({ wallMs: Date.UTC(2024, 0, 1) })
    const limiter = (capacity) => new QuotaClock({ capacity, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
    const quota = { limit: 5, period: { unit: 'day', timeZone: 'UTC' } }
    for (const options of [
      { limiter: limiter(2) },
      { limits: [{ limiter: limiter(2), name: 'a' }, { limiter: new QuotaClock({ suspendPolicy: 'ignore', clock, quota }), name: 'b' }] },
    ]) {
      const handle = createDecider(options, { setHeader: (res, name, value) => res.written.push([name, value]), sendProblem() {}, pass() {}, fail: (err) => assert.fail(err) })
      const answers = []
      for (let i = 0; i < 3; i++) {
        const res = { written: [] }
        handle({ ip: '192.0.2.1', headers: {} }, res, () => {})
        answers.push(res.written)
      }
      for (const written of answers.slice(0, 2)) assert.deepEqual(written.map(([name]) => name), ['RateLimit-Policy', 'RateLimit'])
      assert.deepEqual(answers[2].map(([name]) => name), ['RateLimit-Policy', 'RateLimit', 'Retry-After'])
      for (const [, value] of answers.flat()) assert.ok(typeof value === 'string' && value !== '', value)
    }
  })
})
