'use strict'
// The tests that count live native limiters need the probes that only a `--features probes`
// build exports (`npm run build:probes`, which `npm test` runs first). Under `npm test` they
// always run, so a build without probes fails them; elsewhere (the release workflow tests the
// published binaries, which have no probes) they are skipped, and the runner says so.
const path = require('node:path')

const native = require(path.join(__dirname, '..', '..', 'binding.js'))
const hasProbes = typeof native.liveLimiters === 'function' && typeof native.liveRegistries === 'function'
const underNpmTest = process.env.npm_lifecycle_event === 'test'

/** `false` (run) or the reason the test is skipped, for `test(name, { skip }, fn)`. */
const skipWithoutProbes = hasProbes || underNpmTest ? false : 'this binary has no probes (a release build): run `npm test`'

module.exports = { skipWithoutProbes }
