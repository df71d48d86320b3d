'use strict'

// `npm run test:platforms` runs a list of suites on arm64, musl and Windows; nothing else runs that
// script, so a suite renamed or removed must fail here, in `npm test`, at once.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const exitCodeBefore = process.exitCode
const { SUITES, NOT_UNDER, TARGETS } = require('../.ci/platforms.js')

test('requiring the platforms script runs nothing: it sets no exit code', () => {
  assert.equal(process.exitCode, exitCodeBefore)
})

test('every suite the platforms script runs is a test file of __test__/', () => {
  assert.ok(SUITES.length > 0, 'the platforms script names no suite')
  const missing = SUITES.filter((file) => !fs.existsSync(path.join(ROOT, file)))
  assert.deepEqual(missing, [], `the platforms script names suites that do not exist: ${missing.join(', ')}`)
  for (const file of SUITES) assert.match(file, /^__test__\/[a-z0-9-]+\.test\.js$/)
  assert.equal(new Set(SUITES).size, SUITES.length, 'a suite is named twice')
})

test('every suite a runner leaves out is one of the suites, under a runner some target uses', () => {
  const runners = new Set(TARGETS.map((target) => target.runner).filter(Boolean))
  for (const [runner, excluded] of Object.entries(NOT_UNDER)) {
    assert.ok(runners.has(runner), `NOT_UNDER names ${runner}, which no target runs under`)
    for (const [file, why] of Object.entries(excluded)) {
      assert.ok(SUITES.includes(file), `NOT_UNDER.${runner} leaves out ${file}, which is not one of the suites`)
      assert.ok(why.length > 0, `NOT_UNDER.${runner} gives no reason for ${file}`)
    }
  }
})
