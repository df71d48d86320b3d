'use strict'
// An unknown name gets one suggestion rule wherever it is refused: a limiter's options (and a key
// policy's), the HTTP middleware's options and the command-line tool's commands, options and
// values. The nearest known name by edit distance (letter case ignored, a swapped pair one edit),
// when near enough for the name's length; else the one name it begins; else none.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { QuotaClock, KeyedQuotaClock, manualClock } = require('..')
const { rateLimit } = require('../lib/http.js')

const BIN = path.join(__dirname, '..', 'bin', 'quota-clock-source.js')
const BASE = { capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' }

/** The message a limiter's options are refused with. */
function limiterRefusal(options) {
  try {
    new QuotaClock(options)
  } catch (error) {
    assert.equal(error.code, 'ERR_INVALID_OPTION')
    assert.ok(error instanceof TypeError)
    return error.message
  }
  assert.fail('the options were accepted')
}

function middlewareRefusal(options) {
  try {
    rateLimit(options)
  } catch (error) {
    assert.equal(error.code, 'ERR_INVALID_OPTION')
    return error.message
  }
  assert.fail('the options were accepted')
}

function cliRefusal(args) {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000 })
  assert.equal(result.status, 2, result.stderr)
  return result.stderr
}

const suggestion = (message) => message.match(/\(did you mean '([^']+)'\?\)/)?.[1] ?? null

test('a limiter option misspelt by a letter or a swapped pair names the option it is nearest to', () => {
  assert.match(limiterRefusal({ ...BASE, capcity: 5 }), /unknown option 'capcity' \(did you mean 'capacity'\?\)/)
  assert.match(limiterRefusal({ ...BASE, refillPerSceond: 1 }), /\(did you mean 'refillPerSecond'\?\)/)
  assert.match(limiterRefusal({ ...BASE, suspendpolicy: 'ignore' }), /\(did you mean 'suspendPolicy'\?\)/)
  assert.match(limiterRefusal({ ...BASE, initial: 1 }), /\(did you mean 'initialTokens'\?\)/, 'the one option it begins')
})

test('a name near no option gets no suggestion, only the list of options', () => {
  const message = limiterRefusal({ ...BASE, burst: 5 })
  assert.equal(suggestion(message), null, message)
  assert.match(message, /expected one of 'capacity', 'refillPerSecond'/)
})

test("a key policy's misspelt option is refused with the same suggestion", () => {
  const limiter = new KeyedQuotaClock({ ...BASE, clock: manualClock({ monotonicMs: 0, wallMs: Date.UTC(2024, 0, 1) }), policy: () => ({ capcity: 3 }) })
  assert.throws(() => limiter.tryConsume('a'), { code: 'ERR_INVALID_OPTION', message: /unknown option 'policy\("a"\)\.capcity' \(did you mean 'capacity'\?\)/ })
})

test('the middleware, the limiter options and the command line suggest by the same rule', () => {
  const limiter = new KeyedQuotaClock(BASE)
  // Each typo is as far from its name in the three places: the same rule gives the same answer.
  assert.equal(suggestion(middlewareRefusal({ limiter, onLimted: () => {} })), 'onLimited')
  assert.equal(suggestion(limiterRefusal({ ...BASE, onAnomly: () => {} })), 'onAnomaly')
  assert.equal(suggestion(cliRefusal(['periods', '--zone', 'UTC', '--unti', 'day'])), '--unit')
  // Nearest wins over first-listed: 'limitz' is one edit from 'limits', two from 'limiter'.
  assert.equal(suggestion(middlewareRefusal({ limiter, limitz: [] })), 'limits')
  // Too far for a short name: no guess.
  assert.equal(suggestion(middlewareRefusal({ limiter, zq: 1 })), null)
})

test("express-rate-limit's own option names get their hint before any near name", () => {
  const limiter = new KeyedQuotaClock(BASE)
  const message = middlewareRefusal({ limiter, limit: 5 })
  assert.match(message, /unknown option 'limit' \(the limit lives in the limiter/)
  assert.equal(suggestion(message), null)
})
