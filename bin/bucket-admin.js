'use strict'
// What the `bucket` and `fill` commands (bin/bucket.js, bin/fill.js) share: the operator's view
// of a shared bucket (quotaAdmin's bucket and fill, quota-clock-source/shared) on Redis (--redis)
// or MongoDB (--mongo), run as bin/quota-admin.js runs usage, grant and reset (its `run`): the
// same connection, deadline and exit; a bad argument exits 2, a store that cannot be reached 1.

const { PROGRAM } = require('./command-line.js')
const { STORE_OPTIONS, DEADLINE_MS, run, storeFlagsHelp } = require('./quota-admin.js')

const PERIOD_FLAGS = ['period', 'unit', 'zone', 'anchor-day', 'anchor-month', 'anchor-time']
// A bucket has no period: the period flags are not its options (parsing refuses them).
const BUCKET_OPTIONS = Object.fromEntries(Object.entries(STORE_OPTIONS).filter(([flag]) => !PERIOD_FLAGS.includes(flag)))

/** Tokens as a person reads them: at most two decimals, never rounded up past what there is. */
function tokensText(tokens) {
  return String(Math.floor(tokens * 100) / 100)
}

/**
 * One line, e.g.
 *   203.0.113.7 (bucket "api"): 3.5 tokens of capacity 10 in the store, 4 out in slices, refill 2/s; expires 2027-01-01T08:00:00Z
 */
function describeBucket(bucket, done) {
  const head = `${done}${bucket.key} (bucket "${bucket.name}")`
  if (bucket.capacity === null) return `${head}: no record (capacity none, tokens 0, out 0)`
  const expires = bucket.expiresAt === null ? '' : `; expires ${new Date(bucket.expiresAt).toISOString().replace('.000Z', 'Z')}`
  return `${head}: ${tokensText(bucket.tokens)} tokens of capacity ${bucket.capacity} in the store, ${bucket.out} out in slices, refill ${bucket.refillPerSecond}/s${expires}`
}

const bucketHelp = `${storeFlagsHelp('the bucket')}
Which bucket:
  --name <name>           the bucket's name (share.name of the limiters)
  --key <key>             the key (client address, API key, ...)

Output:
  --json                  print the BucketUsage { name, key, capacity, refillPerSecond, tokens, out, expiresAt }
  -h, --help              print this help

A bad argument exits 2; a store that cannot be reached within ${DEADLINE_MS / 1000} s exits 1.
Run it from the application's folder, so that its Redis or MongoDB client is found.`

/**
 * A bucket command for bin/quota-clock-source.js's table: `operate(admin, key)` resolves to the
 * BucketUsage printed, its line started by `done`.
 */
const bucketCommand = (name, summary, what, operate, done) => ({
  summary,
  options: BUCKET_OPTIONS,
  positionals: [],
  help: `Usage: ${PROGRAM} ${name} (--redis <url> | --mongo <url>) --name <name> --key <key> [--json]

${what}

${bucketHelp}

Example:
  ${PROGRAM} ${name} --redis redis://localhost:6379 --name api --key 203.0.113.7
`,
  run: (values) => run(values, operate, () => done, { describe: describeBucket, periodless: true }),
})

module.exports = { bucketCommand, describeBucket }
