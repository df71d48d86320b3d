'use strict'
// What the `bucket` and `fill` commands (bin/bucket.js, bin/fill.js) share: the operator's view
// of a shared bucket (quotaAdmin's bucket and fill, quota-clock-source/shared) on Redis (--redis)
// or MongoDB (--mongo), connected as bin/quota-admin.js connects for usage, grant and reset, and
// held to the same deadline: a bad argument exits 2, a store that cannot be reached exits 1.

const { quotaAdmin } = require('../lib/shared.js')
const { withTimeout, quietTimer } = require('../lib/cli.js')
const { PROGRAM, print } = require('./command-line.js')
const { STORE_OPTIONS, DEADLINE_MS, MAX_NAME_LENGTH, MAX_KEY_UNITS, failure, shown, text, storeUrl, connectRedis, connectMongo } = require('./quota-admin.js')

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

/** Checks the arguments, connects, runs `operate(admin, key)`, prints its BucketUsage. */
async function run(values, operate, done) {
  const name = text(values, 'name', MAX_NAME_LENGTH)
  const key = text(values, 'key', MAX_KEY_UNITS)
  const { flag, url } = storeUrl(values)
  const where = `${flag === 'redis' ? 'Redis' : 'MongoDB'} at ${shown(url)}`
  const unreachable = (cause) => failure('ERR_STORE_UNAVAILABLE', `cannot reach ${where} within ${DEADLINE_MS / 1000} s: ${cause}`)
  const closers = []
  try {
    const result = await withTimeout(
      (async () => {
        const store = await (flag === 'redis' ? connectRedis(url, values.prefix, closers) : connectMongo(url, values.collection, closers))
        return operate(quotaAdmin(store, { name }), key)
      })(),
      DEADLINE_MS,
      () => {
        throw unreachable('no answer')
      },
      quietTimer, // (the timer keeps nothing alive)
    )
    print(values.json ? JSON.stringify(result, null, 2) : describeBucket(result, done))
    return 0
  } catch (error) {
    if (error && (error.code === 'ERR_MISSING_PEER_DEPENDENCY' || /^cannot reach /.test(error.message))) throw error
    if (error && error.code === 'ERR_STORE_RESPONSE') throw error
    throw unreachable(String(error?.cause?.message ?? error?.message ?? error).split(/\r?\n/)[0])
  } finally {
    await Promise.all(closers.map((close) => close()))
  }
}

const bucketHelp = `Where the bucket lives (one of):
  --redis <url>           redis:// or rediss:// URL; the client is the application's ioredis (else redis)
  --mongo <url>           mongodb:// URL, the database named in its path; the client is the application's mongodb
  --prefix <prefix>       Redis: the store's prefix, if not the default 'qcs:'
  --collection <name>     MongoDB: the collection, if not the default 'quota_shares'

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
  run: (values) => run(values, operate, done),
})

module.exports = { bucketCommand, describeBucket }
