#!/usr/bin/env node
'use strict'
// The `quota-clock-source` command: `periods` (when does a quota reset), `simulate`
// (what the naive Date.now() bucket gets wrong), `watch` (this host's clocks, live), and
// `usage`, `grant`, `reset` (a shared quota in Redis or MongoDB), and `bucket`, `fill` (a shared
// bucket there). This file reads the command line and dispatches; each command is a module of
// its own (bin/<command>.js: its options, help and what it runs), and bin/command-line.js holds
// what they share.
// A bad argument exits 2 with one line on stderr naming it; success exits 0.

const { parseArgs } = require('node:util')
const { nearest: closest, didYouMean, editDistance } = require('../lib/cli/index.js')
const { PROGRAM, UsageError, usage, POSITIVE_INTEGER_FLAGS, print, failWrite, oneLine } = require('./command-line.js')

const COMMON_OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
}

/** The commands, in the order --help lists them: { summary, options, positionals, help, run }. */
const COMMANDS = {
  periods: require('./periods.js'),
  simulate: require('./simulate.js'),
  watch: require('./watch.js'),
  // usage, grant, reset: the operator's view of a shared quota (bin/quota-admin.js).
  usage: require('./usage.js'),
  grant: require('./grant.js'),
  reset: require('./reset.js'),
  // bucket, fill: the operator's view of a shared bucket (bin/bucket-admin.js).
  bucket: require('./bucket.js'),
  fill: require('./fill.js'),
  // block, unblock, blocked, keys: the operator's blocks and keys of a shared limiter (bin/block-admin.js).
  block: require('./block.js'),
  unblock: require('./unblock.js'),
  blocked: require('./blocked.js'),
  keys: require('./keys.js'),
}

const MAIN_HELP = `Usage: ${PROGRAM} <command> [options]

Commands:
${Object.entries(COMMANDS)
  .map(([name, command]) => `  ${name.padEnd(10)} ${command.summary}`)
  .join('\n')}

Every command takes --json (machine output on stdout) and --help.
A bad argument exits with status 2 and one line on stderr.
--version prints the package's version.

Examples:
  ${PROGRAM} periods --unit month --zone America/Los_Angeles --from 2024-03-15T00:00:00Z
  ${PROGRAM} simulate step-forward
  ${PROGRAM} watch --count 10
  ${PROGRAM} usage --redis redis://localhost:6379 --name api --key acme --unit month --zone UTC
  ${PROGRAM} fill --redis redis://localhost:6379 --name api --key 203.0.113.7
`

/** Parses one command's arguments strictly; a problem becomes a UsageError naming the argument. */
function parseCommand(name, argv) {
  const command = COMMANDS[name]
  const options = { ...command.options, ...COMMON_OPTIONS }
  let parsed
  try {
    parsed = parseArgs({ args: argv, options, strict: true, allowPositionals: true })
  } catch (error) {
    throw usage(describeParseError(error, name, options, argv))
  }
  if (parsed.positionals.length > command.positionals.length) {
    const extra = parsed.positionals[command.positionals.length]
    const takes = command.positionals.length === 0 ? 'takes no positional arguments' : `takes at most ${command.positionals.map((p) => `[${p}]`).join(' ')}`
    throw usage(`unexpected argument '${extra}': ${name} ${takes}`)
  }
  return parsed
}

function describeParseError(error, commandName, options, argv) {
  const message = String(error.message).split(/\r?\n/).join(' ')
  const missing = /^Option '(-[^' ]+)[^']*' argument missing/.exec(message)
  if (missing) return `${missing[1]} needs a value`
  const ambiguous = /^Option '(-[^' ]+)' argument is ambiguous/.exec(message)
  if (ambiguous) {
    const flag = ambiguous[1]
    const given = argv[argv.indexOf(flag) + 1]
    // A count or an interval is never negative: say what it must be, not that it is missing.
    if (POSITIVE_INTEGER_FLAGS.has(flag.slice(2)) && given !== undefined) return `${flag} must be a positive integer; received '${given}'`
    return `${flag} needs a value; for a value that starts with '-', write ${flag}=-…`
  }
  if (error.code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return message
  const raw = (/'([^']*)'/.exec(message) || [null, ''])[1]
  const given = raw.replace(/^-+/, '').split('=')[0]
  const longNames = Object.keys(options)
  const near = closest(given, longNames)
  if (near !== null) return `unknown option '${raw}' (did you mean '--${near}'?)`
  const owner = Object.keys(COMMANDS).find((other) => other !== commandName && Object.hasOwn(COMMANDS[other].options, given))
  if (owner) return `unknown option '${raw}': it is an option of '${owner}', not '${commandName}'`
  return `unknown option '${raw}'; ${commandName} takes ${longNames.map((option) => `--${option}`).join(', ')}`
}


/** Runs the command line `argv` (without node and the script); resolves to the exit status. */
async function main(argv) {
  const [name, ...rest] = argv
  if (name === undefined) throw usage(`missing command: expected ${Object.keys(COMMANDS).join(', ')} (see '${PROGRAM} --help')`)
  if (name === '--help' || name === '-h' || name === 'help') return print(MAIN_HELP.trimEnd())
  if (name === '--version' || name === '-V' || name === 'version') {
    if (rest.length > 0) throw usage(`--version takes no arguments; received '${rest[0]}'`)
    return print(require('../package.json').version)
  }
  if (!Object.hasOwn(COMMANDS, name)) {
    const near = name.startsWith('-') ? null : closest(name, Object.keys(COMMANDS))
    const what = name.startsWith('-') ? `expected a command before '${name}'` : `unknown command '${name}'${didYouMean(near)}`
    throw usage(`${what}; the commands are ${Object.keys(COMMANDS).join(', ')}`)
  }
  let parsed
  try {
    parsed = parseCommand(name, rest)
    if (parsed.values.help) return print(COMMANDS[name].help.trimEnd())
    return await COMMANDS[name].run(parsed.values, parsed.positionals)
  } catch (error) {
    if (error !== null && typeof error === 'object') error.command = name
    throw error
  }
}

if (require.main === module) {
  // `quota-clock-source periods ... | head -1` closes stdout early: that is not an error.
  // Any other write error (a full disk, /dev/full) is one line on stderr and exit 1, no stack.
  process.stdout.on('error', (error) => {
    if (error.code === 'EPIPE') process.exit(0)
    failWrite(error)
  })
  main(process.argv.slice(2)).then(
    (status) => {
      process.exitCode = status
    },
    (error) => {
      const where = error.command ? `${PROGRAM} ${error.command}` : PROGRAM
      const code = error instanceof UsageError ? '' : error.code ? ` (${error.code})` : ''
      process.stderr.write(`${where}: ${oneLine(error.message)}${code}\n`)
      process.exitCode = error instanceof UsageError ? 2 : 1
    },
  )
}

module.exports = { main, editDistance, closest }
