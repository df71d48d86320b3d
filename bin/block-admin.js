'use strict'
// What the `block`, `unblock`, `blocked` and `keys` commands (bin/block.js, bin/unblock.js,
// bin/blocked.js, bin/keys.js) share: the operator's blocks of a shared limiter (quotaAdmin's
// block, unblock, blocked, keys, quota-clock-source/shared) on Redis (--redis) or MongoDB
// (--mongo), run as bin/quota-admin.js runs usage, grant and reset (its `run`): the same
// connection, deadline and exit; a bad argument exits 2, a store that cannot be reached 1.

const { PROGRAM, usage: bad } = require('./command-line.js')
const { STORE_OPTIONS, DEADLINE_MS, run, storeFlagsHelp } = require('./quota-admin.js')

const PERIOD_FLAGS = ['period', 'unit', 'zone', 'anchor-day', 'anchor-month', 'anchor-time']
// A block has no period: the period flags are not its options (parsing refuses them).
const BLOCK_OPTIONS = Object.fromEntries(Object.entries(STORE_OPTIONS).filter(([flag]) => !PERIOD_FLAGS.includes(flag)))
const UNITS_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }
const MAX_BLOCK_MS = 365 * UNITS_MS.d

/** `--for`: milliseconds, or a number with a unit (30s, 5m, 1h, 1d), up to 365 days. */
function durationValue(text) {
  const read = /^(\d+)(ms|s|m|h|d)?$/.exec(text ?? '')
  const ms = read === null ? NaN : Number(read[1]) * UNITS_MS[read[2] ?? 'ms']
  if (!(Number.isSafeInteger(ms) && ms >= 1 && ms <= MAX_BLOCK_MS)) {
    throw bad(`--for must be a duration such as 30s, 5m, 1h, 1d or a number of ms, from 1 ms to 365 days; received '${text}'`)
  }
  return ms
}

/** A duration as a person reads it: 1h 30m, 45s, 250 ms. */
function durationText(ms) {
  if (ms < 1000) return `${ms} ms`
  const parts = []
  let left = Math.ceil(ms / 1000)
  for (const [unit, size] of [['d', 86_400], ['h', 3_600], ['m', 60], ['s', 1]]) {
    if (left >= size) {
      parts.push(`${Math.floor(left / size)}${unit}`)
      left %= size
    }
  }
  return parts.join(' ')
}

// The line an unblock starts with.
const UNBLOCKED = 'unblocked: '

/**
 * One line, e.g.
 *   blocked: 203.0.113.7 (limiter "login"): blocked for 59m 58s more, level 2
 *   unblocked: 203.0.113.7 (limiter "login"): lifted with 59m 57s left, level 0
 */
function describeBlock(block, done) {
  const head = `${done}${block.key} (limiter "${block.name}")`
  // (unblock answers what was left of the block it lifted.)
  if (done === UNBLOCKED) return block.blockedForMs === 0 ? `${head}: was not blocked, level 0` : `${head}: lifted with ${durationText(block.blockedForMs)} left, level 0`
  if (block.blockedForMs === 0) return `${head}: not blocked, level ${block.level}`
  return `${head}: blocked for ${durationText(block.blockedForMs)} more, level ${block.level}`
}

const blockHelp = `${storeFlagsHelp('the limiter')}
Which key:
  --name <name>           the limiter's name (share.name of the limiters)
  --key <key>             the key (client address, API key, ...)

Output:
  --json                  print { name, key, blockedForMs, level }
  -h, --help              print this help

A bad argument exits 2; a store that cannot be reached within ${DEADLINE_MS / 1000} s exits 1.
Run it from the application's folder, so that its Redis or MongoDB client is found.`

/**
 * A block command for bin/quota-clock-source.js's table: `operate(admin, key, prepared)` resolves to
 * the block printed, its line started by `done`; `extra`'s options, usage, help and example added.
 */
const blockCommand = (name, summary, what, extra, operate, done) => ({
  summary,
  options: { ...BLOCK_OPTIONS, ...extra.options },
  positionals: [],
  help: `Usage: ${PROGRAM} ${name} (--redis <url> | --mongo <url>) --name <name> --key <key>${extra.usage} [--json]

${what}

${extra.help}${blockHelp}

Example:
  ${PROGRAM} ${name} --redis redis://localhost:6379 --name login --key 203.0.113.7${extra.example}
`,
  run: (values) => run(values, Object.assign((admin, key, _period, prepared) => operate(admin, key, prepared), { prepare: operate.prepare }), () => done, { describe: describeBlock, periodless: true }),
})

module.exports = { blockCommand, durationValue, durationText, describeBlock, BLOCK_OPTIONS, UNBLOCKED }
