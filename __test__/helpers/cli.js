'use strict'
// What the tests of the command-line tool against real stores share:
//
//   cli(args, { nodeArgs?, cwd? })  runs bin/quota-clock-source.js in a child process; resolves
//       to { status, stdout, stderr, ms }
//   cliStores(servers)  (servers: helpers/shared-fleet.js's useStoreServers) the two kinds of
//       store the commands reach, { redis, mongo }, each { flag() (the command's store option),
//       store() (a store on a client of the test's own) }, and mongoUrl() (its database's URL)
//   freshName(label)  a name no other test of the run uses

const { execFile } = require('node:child_process')
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')
const BIN = path.join(ROOT, 'bin', 'quota-clock-source.js')

function cli(args, { nodeArgs = [], cwd = ROOT } = {}) {
  const started = Date.now()
  return new Promise((resolve) => {
    execFile(process.execPath, [...nodeArgs, BIN, ...args], { cwd, encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? error.code : 0, stdout, stderr, ms: Date.now() - started })
    })
  })
}

function cliStores(servers) {
  const mongoUrl = () => {
    const url = new URL(servers.mongo.uri)
    url.pathname = `/${servers.dbName}`
    return url.href
  }
  const kinds = {
    redis: { flag: () => ['--redis', servers.redis.url], store: () => servers.makeStore('ioredis') },
    mongo: { flag: () => ['--mongo', mongoUrl()], store: () => servers.makeStore('mongo') },
  }
  return { kinds, mongoUrl }
}

let unique = 0
const freshName = (label) => `${label}-${process.pid}-${++unique}`

module.exports = { cli, cliStores, freshName }
