'use strict'
// The types of limits that change while running, as a TypeScript user meets them:
// live-limits-usage.ts compiles under --strict, wrong-limits.ts fails for the one reason it was
// written for.

const test = require('node:test')
const assert = require('node:assert/strict')
const { checkTypeFiles } = require('./helpers/tsc.js')

const errors = (output) => output.split(/\r?\n/).filter((line) => /error TS\d+:/.test(line))

test('refreshPolicy, policyTtlMs and setLimits compile as documented', () => {
  const { status, output } = checkTypeFiles(['live-limits-usage.ts'])
  assert.equal(status, 0, output)
  assert.deepEqual(errors(output), [])
})

test('a misspelled field of setLimits fails: capasity', () => {
  const { status, output } = checkTypeFiles(['wrong-limits.ts'])
  assert.notEqual(status, 0, output)
  const lines = errors(output)
  assert.equal(lines.length, 1, output)
  assert.match(lines[0], /wrong-limits\.ts/)
  assert.match(lines[0], /'capasity'/)
  assert.match(lines[0], /TS2353|TS2561/)
})
