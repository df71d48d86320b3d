'use strict'
// The store servers' own counts of what a process sent them, for the tests that compare the
// package's round-trip counts with them (share-store-calls, store-round-trips).

const { before, after } = require('node:test')
const { startRedisServer } = require('./redis-server.js')
const { startMongoServer } = require('./mongo-server.js')

/** A redis-server and a MongoDB server for the suite (started before it, stopped after): `{ redis, mongo }` once started. */
function suiteServers() {
  const servers = {}
  before(async () => {
    ;[servers.redis, servers.mongo] = await Promise.all([startRedisServer(), startMongoServer()])
  })
  after(async () => {
    await Promise.allSettled([servers.redis?.stop(), servers.mongo?.stop()])
  })
  return servers
}

/** EVALSHA + EVAL calls the Redis server counted since `CONFIG RESETSTAT` (`admin`: an ioredis client). */
async function scriptCalls(admin) {
  const info = await admin.info('commandstats')
  let calls = 0
  for (const command of ['evalsha', 'eval']) {
    const line = new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)
    if (line) calls += Number(line[1])
  }
  return calls
}

module.exports = { suiteServers, scriptCalls }
