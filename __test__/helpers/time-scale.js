'use strict'
// How much slower than native this process runs: `npm run test:platforms` sets
// QUOTA_CLOCK_TEST_TIME_SCALE when a suite runs under an emulator (qemu), and the few tests that
// bound a duration (a child's exit, an O(1) scan) multiply their bound by it. 1 everywhere else.
const scale = Number(process.env.QUOTA_CLOCK_TEST_TIME_SCALE)
const TIME_SCALE = Number.isFinite(scale) && scale >= 1 ? scale : 1

module.exports = { TIME_SCALE }
