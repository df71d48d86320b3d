'use strict'
// thousands of seeded, awkward option objects (throwing getters, Proxies, revoked
// Proxies, symbols, inherited and non-enumerable options, values of every type): each one
// constructs, or throws a TypeError/RangeError with an option-error code; never anything else. See
// helpers/option-fuzz.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { fuzz } = require('./helpers/option-fuzz.js')
const { runScript } = require('./helpers/child.js')

function assertClean(tally, count) {
  const shown = tally.bad.slice(0, 10).map((b) => `- seed ${b.seed} case ${b.index} (${b.what}): ${b.text}`)
  assert.equal(tally.bad.length, 0, `calls that broke the contract:\n${shown.join('\n')}`)
  // The fuzzer reaches both outcomes, and every option-error code.
  assert.ok(tally.constructed > count / 20, `some option objects construct (${tally.constructed})`)
  assert.ok(tally.refused > count / 4, `most are refused (${tally.refused})`)
  for (const code of ['ERR_INVALID_OPTION', 'ERR_SUB_DAY_PERIOD', 'ERR_UNKNOWN_TIME_ZONE']) assert.ok(tally.codes[code] > 0, `${code} was reached: ${JSON.stringify(tally.codes)}`)
}

for (const seed of [1, 2, 3]) {
  test(`option fuzzer, seed ${seed}: 2,000 awkward option objects construct or throw TypeError/RangeError with an option-error code`, () => {
    assertClean(fuzz(2_000, seed), 2_000)
  })
}

test('option fuzzer with Object.prototype polluted (child process): the same, and nothing inherited is an option', () => {
  const script = path.join(__dirname, 'helpers', 'option-fuzz.js')
  const { result } = runScript(`process.argv.splice(1, Infinity, ${JSON.stringify(script)}, '2000', '7', '--pollute'); require(${JSON.stringify(script)}).main()`)
  assertClean(result, 2_000)
})
