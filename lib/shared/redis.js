'use strict'
// redisStore(client, { prefix }): a quota store on Redis. Each operation is one Lua script on one
// key (so a Redis Cluster routes it to one node), run by EVALSHA, and by EVAL when the server does
// not have the script yet (NOSCRIPT: a new or restarted server, SCRIPT FLUSH). Neither Redis
// client is loaded here: the caller's client is used as it is, ioredis through `call`, node-redis
// through `sendCommand` with string arguments.
//
// The record of (name, key, periodId) is a hash at <prefix><recordKey> (lib/shared/record-key.js):
//   c  the units counted in the period (reserved, and charged by failOpen decisions)
//   e  the expiry it was last given, in ms since the epoch; the key's PEXPIREAT follows it, so a
//      later reservation may push the expiry out but never pulls it in
// A period end already past by the server's clock (the caller's clock runs behind) would delete
// the record at once, and every later reservation would start again from 0: such a record is
// kept for GRACE_MS after the write instead.

const { createHash } = require('node:crypto')
const { makeQuotaStore, checkReserveAnswer } = require('../quota-store.js')
const { describe } = require('../validate.js')
const { recordKey } = require('./record-key.js')
const { invalid, readStoreOptions, checkText } = require('./options.js')

const DEFAULT_PREFIX = 'qcs:'
const GRACE_MS = 600_000
const MAX_PREFIX_LENGTH = 256

// ARGV: limit, leaseUnits, lacking, charge, expiresAtMs. Answers { granted, unreserved }.
const RESERVE = `
local grace = ${GRACE_MS}
local limit = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local lacking = tonumber(ARGV[3])
local charge = tonumber(ARGV[4])
local record = redis.call('HMGET', KEYS[1], 'c', 'e')
local count = (tonumber(record[1]) or 0) + charge
local room = math.max(0, limit - count)
local want = math.max(lacking, math.min(lease, math.ceil(room / 8)))
local granted = 0
if room >= want then granted = want end
if charge + granted > 0 then
  redis.call('HINCRBY', KEYS[1], 'c', charge + granted)
  if tonumber(ARGV[5]) > (tonumber(record[2]) or 0) then
    redis.call('HSET', KEYS[1], 'e', ARGV[5])
    redis.call('PEXPIREAT', KEYS[1], ARGV[5])
    if redis.call('EXISTS', KEYS[1]) == 0 then
      redis.call('HSET', KEYS[1], 'c', count + granted)
      redis.call('HSET', KEYS[1], 'e', ARGV[5])
      redis.call('PEXPIRE', KEYS[1], grace)
    end
  end
end
return { granted, room - granted }
`

// ARGV: units. Answers the count left (never below 0; 0 when there is no record).
const GIVE_BACK = `
local count = tonumber(redis.call('HGET', KEYS[1], 'c'))
if not count then return 0 end
local back = math.min(count, tonumber(ARGV[1]))
if back > 0 then redis.call('HINCRBY', KEYS[1], 'c', -back) end
return count - back
`

function script(source) {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

const SCRIPTS = { reserve: script(RESERVE), giveBack: script(GIVE_BACK) }

function isNoScript(error) {
  try {
    return error instanceof Error && /^NOSCRIPT\b/.test(String(error.message))
  } catch {
    return false
  }
}

/**
 * The one way each client runs a script on one key: `run(commandAndArgs, key)`, every element a
 * string. Returns undefined for anything that is not one of the supported clients.
 */
function commandRunner(client) {
  if (typeof client !== 'object' || client === null) return undefined
  // ioredis Redis and Cluster: isCluster is their own flag; call() routes by the script's key.
  if (typeof client.isCluster === 'boolean' && typeof client.call === 'function') {
    return (args) => client.call(...args)
  }
  if (typeof client.sendCommand !== 'function') return undefined
  // node-redis: a cluster's sendCommand takes the key that picks the node first (a cluster has
  // `masters` since redis 4.6, getMasters() before).
  if ('masters' in client || typeof client.getMasters === 'function') return (args, key) => client.sendCommand(key, false, args)
  if (typeof client.isOpen === 'boolean') return (args) => client.sendCommand(args)
  return undefined
}

/** A quota store on Redis, for an ioredis Redis/Cluster (ioredis >= 5) or a node-redis client or cluster (redis >= 4). */
function redisStore(client, options) {
  const run = commandRunner(client)
  if (run === undefined) {
    throw invalid(
      TypeError,
      'redisStore: client must be an ioredis Redis or Cluster (ioredis >= 5) or a node-redis client (redis >= 4), ' +
        `connected by the caller; received ${describe(client)}`
    )
  }
  const given = readStoreOptions('redisStore', options, ['prefix'])
  const prefix =
    given.prefix === undefined
      ? DEFAULT_PREFIX
      : checkText('redisStore', 'prefix', given.prefix, {
          minLength: 0,
          maxLength: MAX_PREFIX_LENGTH,
          what: `a well-formed string of at most ${MAX_PREFIX_LENGTH} characters`,
        })

  async function evaluate({ sha, source }, key, args) {
    try {
      return await run(['EVALSHA', sha, '1', key, ...args], key)
    } catch (error) {
      if (!isNoScript(error)) throw error
      return run(['EVAL', source, '1', key, ...args], key)
    }
  }

  return makeQuotaStore('redis', {
    async reserve(request) {
      const { name, key, periodId, limit, leaseUnits, lacking, charge, expiresAtMs } = request
      const args = [limit, leaseUnits, lacking, charge, Math.ceil(expiresAtMs)].map(String)
      const reply = await evaluate(SCRIPTS.reserve, prefix + recordKey(name, key, periodId), args)
      const answer = Array.isArray(reply) && reply.length === 2 ? { granted: reply[0], unreserved: reply[1] } : reply
      return checkReserveAnswer(answer, request)
    },
    async giveBack({ name, key, periodId, units }) {
      await evaluate(SCRIPTS.giveBack, prefix + recordKey(name, key, periodId), [String(units)])
    },
  })
}

module.exports = { redisStore }
