'use strict'
// The `keys` command: the keys of a shared limiter that have a record in the store.

const { PROGRAM, integerValue } = require('./command-line.js')
const { run, storeFlagsHelp, DEADLINE_MS } = require('./quota-admin.js')
const { BLOCK_OPTIONS, durationText } = require('./block-admin.js')

const { key: _key, ...KEYS_OPTIONS } = BLOCK_OPTIONS

const list = (admin, _key, _period, options) => admin.keys(options)
list.prepare = (values) => ({ blocked: values.blocked === true, limit: values.limit === undefined ? 100 : integerValue('limit', values.limit, 1, 10_000) })

/** One line a key, e.g. "203.0.113.7  blocked for 9m 58s"; a line saying so when there is none. */
function describeKeys(keys, done) {
  if (keys.length === 0) return `${done}no keys`
  return keys.map(({ key, blockedForMs }) => `${key}${blockedForMs > 0 ? `  blocked for ${durationText(blockedForMs)}` : ''}`).join('\n')
}

module.exports = {
  summary: 'list the keys of a shared limiter that have a record in the store (or only the blocked ones)',
  options: { ...KEYS_OPTIONS, blocked: { type: 'boolean' }, limit: { type: 'string' } },
  positionals: [],
  help: `Usage: ${PROGRAM} keys (--redis <url> | --mongo <url>) --name <name> [--blocked] [--limit N] [--json]

Lists the keys of the name that have a record now (a quota period, a bucket, a block), read
incrementally (Redis SCAN, a MongoDB index range), at most --limit of them: a mistyped --name
lists nothing.

Options:
  --blocked               only the keys blocked now
  --limit <N>             at most N keys (1 to 10000, default 100)

${storeFlagsHelp('the limiter')}
  --name <name>           the limiter's name (share.name of the limiters)

Output:
  --json                  print an array of { key, blockedForMs }
  -h, --help              print this help

A bad argument exits 2; a store that cannot be reached within ${DEADLINE_MS / 1000} s exits 1.

Example:
  ${PROGRAM} keys --redis redis://localhost:6379 --name login --blocked
`,
  run: (values) => run(values, list, () => '', { describe: describeKeys, periodless: true, keyless: true }),
}
