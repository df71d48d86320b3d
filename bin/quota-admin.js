'use strict'
// What the `usage`, `grant` and `reset` commands (bin/usage.js, bin/grant.js, bin/reset.js) share:
// the operator's view of a shared quota (quotaAdmin of quota-clock-source/shared) on Redis
// (--redis) or MongoDB (--mongo). The client a store needs is
// the application's, as the optional peer dependency it is: ioredis, else redis, for --redis;
// mongodb for --mongo; looked up from the working directory first, then from this package.
// The store must answer within DEADLINE_MS of the command's start, connection included, or the
// command exits 1; it exits by then whatever the client library keeps running (a client that
// reconnects, a socket to a hung server). A store that answers with an error is not unreachable:
// the line says what it answered.

const path = require('node:path')
const { performance } = require('node:perf_hooks')
const { createRequire } = require('node:module')
const { redisStore, mongoStore, quotaAdmin } = require('../lib/shared.js')
const { isPeriodId, withTimeout, quietTimer, MAX_NAME_LENGTH, MAX_KEY_UNITS } = require('../lib/cli/index.js')
const { PROGRAM, UsageError, usage: bad, print, periodSpec, periodAt } = require('./command-line.js')

const DEADLINE_MS = 5_000
// Counted from the process's start (performance.now()): the store gets until STORE_BY_MS, the
// process ends by EXIT_BY_MS, so the line is printed and the exit made within DEADLINE_MS.
const STORE_BY_MS = 4_600
const EXIT_BY_MS = 4_800
const CONNECT_TIMEOUT_MS = 3_000

const STORE_OPTIONS = {
  redis: { type: 'string' },
  mongo: { type: 'string' },
  prefix: { type: 'string' },
  collection: { type: 'string' },
  name: { type: 'string' },
  key: { type: 'string' },
  period: { type: 'string' },
  unit: { type: 'string' },
  zone: { type: 'string' },
  'anchor-day': { type: 'string' },
  'anchor-month': { type: 'string' },
  'anchor-time': { type: 'string' },
}

/** A coded error (exit 1, the code printed after the message). */
function failure(code, message, cause) {
  const error = new Error(message, cause === undefined ? undefined : { cause })
  error.code = code
  return error
}

/**
 * A package the application installed (`name`), or undefined: resolved from the working
 * directory, then from this package's own folder.
 */
function applicationPackage(name) {
  for (const from of [path.join(process.cwd(), 'package.json'), __filename]) {
    try {
      return createRequire(from)(name)
    } catch (error) {
      if (!(error && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(`'${name}'`))) throw error
    }
  }
  return undefined
}

function missingPeer(flag, names, alike) {
  const list = names.join(' or ')
  const also = alike === undefined ? '' : ` (${alike} works too)`
  return failure(
    'ERR_MISSING_PEER_DEPENDENCY',
    `${flag} needs ${list}, an optional peer dependency${also} not found from ${process.cwd()}: run \`npm install ${names[0]}\` in the application, and run this command from its folder`,
  )
}

/** The URL as printed: its password hidden. */
function shown(url) {
  if (url.password === '') return url.href
  const copy = new URL(url.href)
  copy.password = '***'
  return copy.href
}

/** Closes a client, whatever state it is in. */
async function quietly(close) {
  try {
    await close()
  } catch {
    // already closed, or never connected
  }
}

/**
 * Connects to Redis with the application's ioredis, else its redis; resolves to its store.
 * `closers` gets the client's close at once (a connection that hangs is closed at the deadline).
 */
async function connectRedis(url, prefix, closers) {
  // iovalkey, Valkey's fork of ioredis, has its API: either makes the same client.
  const Redis = applicationPackage('ioredis') ?? applicationPackage('iovalkey')
  if (Redis !== undefined) {
    const client = new Redis(url.href, { lazyConnect: true, connectTimeout: CONNECT_TIMEOUT_MS, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null })
    // The connection's own error (ECONNREFUSED, ...) says more than connect()'s "Connection is closed".
    let lastError
    client.on('error', (error) => (lastError = error))
    closers.push(() => quietly(() => client.disconnect()))
    try {
      await client.connect()
    } catch (error) {
      throw lastError ?? error
    }
    return redisStore(client, { prefix })
  }
  const redis = applicationPackage('redis')
  if (redis === undefined) throw missingPeer('--redis', ['ioredis', 'redis'], 'iovalkey')
  const client = redis.createClient({ url: url.href, socket: { connectTimeout: CONNECT_TIMEOUT_MS, reconnectStrategy: false } })
  client.on('error', () => {})
  closers.push(() => quietly(() => (typeof client.destroy === 'function' ? client.destroy() : client.disconnect())))
  await client.connect()
  return redisStore(client, { prefix })
}

/** Connects to MongoDB with the application's mongodb (the database named in the URL), as connectRedis. */
async function connectMongo(url, collection, closers) {
  const mongodb = applicationPackage('mongodb')
  if (mongodb === undefined) throw missingPeer('--mongo', ['mongodb'])
  const client = new mongodb.MongoClient(url.href, { serverSelectionTimeoutMS: CONNECT_TIMEOUT_MS, connectTimeoutMS: CONNECT_TIMEOUT_MS })
  closers.push(() => quietly(() => client.close(true)))
  await client.connect()
  const db = client.db()
  // A URL with no database is the driver's default: said, so that an operator who forgot the
  // path does not write where no limiter reads.
  if (url.pathname === '' || url.pathname === '/') process.stderr.write(`quota-clock-source: --mongo names no database (mongodb://host:port/<database>): using the driver's default, "${db.databaseName}"\n`)
  return mongoStore(db, { collection })
}

/**
 * One line a person reads at a glance, e.g.
 *   acme in 2026-12 (quota "api"): used 10000 of limit 10000 + extra 500 (held 218 by instances, 9782 admitted), 500 left; expires 2027-01-01T08:00:00Z
 */
function describeUsage(usage, done) {
  const head = `${done}${usage.key} in ${usage.periodId} (quota "${usage.name}")`
  if (usage.limit === null && usage.extra === 0 && usage.used === 0 && usage.expiresAt === null) {
    return `${head}: no record yet (limit none, extra 0, used 0, held 0)`
  }
  const limit = usage.limit === null ? 'limit none yet' : `limit ${usage.limit}`
  const left = usage.limit === null ? '' : `, ${Math.max(0, usage.limit + usage.extra - usage.used)} left`
  const expires = usage.expiresAt === null ? '' : `; expires ${new Date(usage.expiresAt).toISOString().replace('.000Z', 'Z')}`
  return `${head}: used ${usage.used} of ${limit} + extra ${usage.extra} (held ${usage.held} by instances, ${usage.used - usage.held} admitted)${left}${expires}`
}

function text(values, flag, max) {
  const value = values[flag]
  if (value === undefined) throw bad(`--${flag} is required`)
  if (value.length === 0 || value.length > max) throw bad(`--${flag} must be 1 to ${max} characters; received ${value.length}`)
  return value
}

function storeUrl(values) {
  if (values.redis !== undefined && values.mongo !== undefined) throw bad('give --redis or --mongo, not both')
  if (values.redis === undefined && values.mongo === undefined) throw bad('--redis <url> or --mongo <url> is required: where the shared quota lives')
  const flag = values.redis !== undefined ? 'redis' : 'mongo'
  const protocols = flag === 'redis' ? ['redis:', 'rediss:'] : ['mongodb:', 'mongodb+srv:']
  let url
  try {
    url = new URL(values[flag])
  } catch {
    throw bad(`--${flag} must be a URL such as ${flag === 'redis' ? 'redis://localhost:6379' : 'mongodb://localhost:27017/app'}; received '${values[flag]}'`)
  }
  if (!protocols.includes(url.protocol)) throw bad(`--${flag} must be a ${protocols.join(' or ')} URL; received '${values[flag]}'`)
  if (flag === 'redis' && values.collection !== undefined) throw bad('--collection applies to --mongo only')
  if (flag === 'mongo' && values.prefix !== undefined) throw bad('--prefix applies to --redis only')
  return { flag, url }
}

function periodId(values) {
  const specFlags = ['unit', 'zone', 'anchor-day', 'anchor-month', 'anchor-time'].filter((flag) => values[flag] !== undefined)
  if (values.period !== undefined) {
    if (specFlags.length > 0) throw bad(`give --period or the period spec (--unit, --zone, ...), not both; received --period and --${specFlags[0]}`)
    if (!isPeriodId(values.period)) throw bad(`--period must be a period id such as 2026-12 (month), 2026-12-01 (day or week) or 2026 (year); received '${values.period}'`)
    return values.period
  }
  if (specFlags.length === 0) throw bad('--period <id> or --unit <unit> --zone <IANA> is required: the period of the quota (the spec gives the one open now)')
  return periodAt(periodSpec(values), Date.now()).id
}

/** Milliseconds from now until `sinceStartMs` after the process started (0 if past). */
const untilMs = (sinceStartMs) => Math.max(0, Math.ceil(sinceStartMs - performance.now()))

/**
 * Ends the process once the line is printed and the exit status set (a timer runs after the
 * promise callbacks that do both), at the latest by EXIT_BY_MS; `ms` 0: at once. The timer keeps
 * nothing alive: a process with nothing left to run ends before it.
 */
function exitBy(ms) {
  setTimeout(() => process.exit(), ms).unref()
}

// The error classes of a reply the server sent: ioredis's ReplyError, node-redis's ErrorReply
// (SimpleError, BlobError), the MongoDB driver's MongoServerError (and its subclasses).
const ANSWERED = new Set(['ReplyError', 'ErrorReply', 'MongoServerError'])

/** The error in `error`'s cause chain that is the store's own reply, or undefined. */
function storeReply(error) {
  for (let at = error, depth = 0; at !== null && typeof at === 'object' && depth < 8; at = at.cause, depth++) {
    for (let proto = Object.getPrototypeOf(at); proto !== null && proto !== Error.prototype; proto = Object.getPrototypeOf(proto)) {
      if (ANSWERED.has(proto.constructor?.name)) return at
    }
  }
  return undefined
}

const firstLine = (error) => String(error?.message ?? error).split(/\r?\n/)[0]

/**
 * Checks the arguments, connects, runs `operate(admin, key, periodId)`, prints what it answers
 * (`describe`: a QuotaUsage's line by default; a bucket command has no period, `periodless`).
 */
async function run(values, operate, done, { describe = describeUsage, periodless = false, keyless = false } = {}) {
  const name = text(values, 'name', MAX_NAME_LENGTH)
  const key = keyless ? undefined : text(values, 'key', MAX_KEY_UNITS)
  const period = periodless ? undefined : periodId(values)
  const prepared = operate.prepare?.(values)
  const { flag, url } = storeUrl(values)
  const where = `${flag === 'redis' ? 'Redis' : 'MongoDB'} at ${shown(url)}`
  const unreachable = (cause) => failure('ERR_STORE_UNAVAILABLE', `cannot reach ${where} within ${DEADLINE_MS / 1000} s: ${cause}`)
  const closers = []
  const closeAll = () => Promise.all(closers.map((close) => close()))
  let result
  try {
    result = await withTimeout(
      (async () => {
        const store = await (flag === 'redis' ? connectRedis(url, values.prefix, closers) : connectMongo(url, values.collection, closers))
        return operate(quotaAdmin(store, { name }), key, period, prepared)
      })(),
      untilMs(STORE_BY_MS),
      () => {
        throw unreachable('no answer')
      },
      quietTimer, // (the timer keeps nothing alive)
    )
  } catch (error) {
    // The clients are closed without waiting for them (a reconnecting one would hold the exit).
    closeAll()
    exitBy(0)
    throw explained(error, where, unreachable)
  }
  print(values.json ? JSON.stringify(result, null, 2) : describe(result, done(result, prepared)))
  await withTimeout(closeAll(), untilMs(EXIT_BY_MS), () => undefined, quietTimer)
  exitBy(untilMs(EXIT_BY_MS))
  return 0
}

/** What a failed store command says: a store's own answer is not "cannot reach". */
function explained(error, where, unreachable) {
  if (error instanceof UsageError) return error // (an argument the store's answer showed wrong: grant's --create)
  if (error && (error.code === 'ERR_MISSING_PEER_DEPENDENCY' || error.code === 'ERR_STORE_RESPONSE' || /^cannot reach /.test(error.message))) return error
  // A grant the store refused (it would pass Number.MAX_SAFE_INTEGER): --units is the bad argument.
  if (error && error.code === 'ERR_INVALID_ARG') return bad(`--${firstLine(error)}`)
  const reply = storeReply(error)
  if (reply !== undefined) return failure('ERR_STORE_UNAVAILABLE', `${where} answered: ${firstLine(reply)}`, error)
  return unreachable(firstLine(error?.cause ?? error))
}

/** The store flags' help, for what lives in it (`what`: 'the quota', 'the bucket'). */
const storeFlagsHelp = (what) => `Where ${what} lives (one of):
  --redis <url>           redis:// or rediss:// URL; the client is the application's ioredis (else redis)
  --mongo <url>           mongodb:// URL, the database named in its path; the client is the application's mongodb
  --prefix <prefix>       Redis: the store's prefix, if not the default 'qcs:'
  --collection <name>     MongoDB: the collection, if not the default 'quota_shares'
`

const storeHelp = `${storeFlagsHelp('the quota')}
Which record:
  --name <name>           the quota's name (share.name of the limiters)
  --key <key>             the key (tenant, API key, ...)
  --period <id>           the period's id, e.g. 2026-12 (month), 2026-12-01 (day, week), 2026 (year)
  or the quota's period spec, for the period open now:
  --unit <unit> --zone <IANA> [--anchor-day N] [--anchor-month N] [--anchor-time HH:MM]

Output:
  --json                  print the QuotaUsage { name, key, periodId, limit, extra, used, held, expiresAt }
  -h, --help              print this help

A bad argument exits 2; a store that cannot be reached within ${DEADLINE_MS / 1000} s, or answers with an
error, exits 1 (by ${DEADLINE_MS / 1000} s from the start).
Run it from the application's folder, so that its Redis or MongoDB client is found.`

/**
 * A store command for bin/quota-clock-source.js's table: `operate(admin, key, periodId, prepared)`
 * resolves to the QuotaUsage printed (`done(usage, prepared)` starts its line); `extra` adds the
 * command's own options, usage, help and example (NONE: none); `operate.prepare(values)`, if
 * present, checks them before the store is reached.
 */
const storeCommand = (name, summary, what, extra, operate, done) => ({
  summary,
  options: { ...STORE_OPTIONS, ...extra.options },
  positionals: [],
  help: `Usage: ${PROGRAM} ${name} (--redis <url> | --mongo <url>) --name <name> --key <key>
       (--period <id> | --unit <unit> --zone <IANA> [anchors])${extra.usage} [--json]

${what}

${extra.help}${storeHelp}

Example:
  ${PROGRAM} ${name} --redis redis://localhost:6379 --name tenant-month --key acme --unit month --zone America/Los_Angeles${extra.example}
`,
  run: (values) => run(values, operate, done),
})

const NONE = { options: {}, usage: '', help: '', example: '' }

// (What bin/bucket-admin.js shares with these commands.)
module.exports = { storeCommand, run, storeFlagsHelp, NONE, STORE_OPTIONS, DEADLINE_MS, MAX_NAME_LENGTH, MAX_KEY_UNITS, failure, shown, text, storeUrl, connectRedis, connectMongo }
