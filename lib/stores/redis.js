'use strict'
// redisStore(client, { prefix }): a quota store on Redis. Each operation is one Lua script on one
// key (so a Redis Cluster routes it to one node), run by EVALSHA, and by EVAL when the server does
// not have the script yet (NOSCRIPT: a new or restarted server, SCRIPT FLUSH). Neither Redis
// client is loaded here: the caller's client is used as it is, ioredis through `call`, node-redis
// through `sendCommand` with string arguments.
//
// The fleet bucket's operations are in lib/stores/redis-bucket.js (bucketTake, bucketRead,
// bucketFill).
//
// The record of (name, key, periodId) is a hash at <prefix>{<name and key>}:<periodId>
// (lib/stores/record-key.js: redisQuotaKey; the braces are a Redis Cluster hash tag of the
// (name, key) pair alone, its own braces escaped, so a key's records share a slot and keys spread):
//   c           the units counted in the period (reserved and not given back, and charged by
//               failOpen decisions): `used`
//   x           units granted on top of the limit for the period (quotaAdmin.grant): `extra`
//   l           the limit the latest reservation was judged against
//   i           the record's identity, made when it is created: an instance that finds another
//               one (the data was lost: a restart without persistence, FLUSHALL, a failover)
//               charges the new record with what it had reserved in the old one
//   h:<id>      units instance <id> holds unadmitted, as of its last call (absent: 0)
//   e           the expiry a reservation last gave it, in ms since the epoch; the key's PEXPIREAT
//               follows it, so a later reservation may push the expiry out but never pulls it in
//               (absent on a record a grant made: kept KEEP_GRANTED_MS until a reservation)
// A period end already past by the server's clock (the caller's clock runs behind) would delete
// the record at once, and every later reservation would start again from 0: such a record is
// kept for RECORD_GRACE_MS after the write instead.

const { createHash } = require('node:crypto')
const { makeQuotaStore, checkReserveAnswer, checkRecordAnswer, checkRefusedGrant, clamped, instanceFields, newRecordId, KEEP_GRANTED_MS, RECORD_GRACE_MS } = require('../share/protocol.js')
const { describe } = require('../common/validate.js')
const { redisQuotaKey } = require('./record-key.js')
const { bucketOperations } = require('./redis-bucket.js')
const { blockOperations, RESERVE_BLOCK } = require('./redis-blocks.js')
const { invalid, readStoreOptions, checkText } = require('./options.js')

const DEFAULT_PREFIX = 'qcs:'
const MAX_PREFIX_LENGTH = 256

// Numbers that may be large go back as decimal strings: the clients' reply parsers round an
// integer reply near 2^53 (9007199254740991 arrives as 9007199254740992), and Lua's tostring
// keeps 14 digits. The reader clamps them to Number.MAX_SAFE_INTEGER.
const WHOLE = `
local MAX_SAFE = ${Number.MAX_SAFE_INTEGER}
local function whole(value) return string.format('%.0f', value) end
`

// The record as the operator's view answers it: { 1, limit or '', extra, used, held, expiresAt
// or -1 }, or { 0 } when there is none. (Read after any write: TIME is a random command.)
const VIEW = `${WHOLE}
local function view()
  local all = redis.call('HGETALL', KEYS[1])
  if #all == 0 then return { 0 } end
  local fields, held = {}, 0
  for at = 1, #all, 2 do
    if string.sub(all[at], 1, 2) == 'h:' then held = held + tonumber(all[at + 1]) else fields[all[at]] = all[at + 1] end
  end
  -- PEXPIRETIME (Redis 7) is exact; before it, the server's time plus PTTL.
  local expires = redis.pcall('PEXPIRETIME', KEYS[1])
  if type(expires) ~= 'number' then
    local ttl = redis.call('PTTL', KEYS[1])
    expires = -1
    if ttl >= 0 then
      local now = redis.call('TIME')
      expires = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
    end
  elseif expires < 0 then
    expires = -1
  end
  return { 1, fields.l or '', whole(tonumber(fields.x) or 0), whole(tonumber(fields.c) or 0), whole(held), expires }
end
`

// ARGV: limit, leaseUnits, lacking, charge, expiresAtMs, instance, held, owned, recordId, a new
// identity. Answers { granted, unreserved, identity ('0': nothing written) }, the first two as
// decimal strings; the room is clamped to Number.MAX_SAFE_INTEGER (a record whose extra or count
// passed it is still reserved from).
const RESERVE = `${WHOLE}${RESERVE_BLOCK}
local grace = ${RECORD_GRACE_MS}
local limit, lease, lacking, charge = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local expires, heldField, held, owned, known = tonumber(ARGV[5]), 'h:' .. ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9]
local record = redis.call('HMGET', KEYS[1], 'c', 'e', 'x', 'i')
if record[1] and not tonumber(record[1]) then return redis.error_reply('ERR hash value is not an integer') end
local id = record[4]
local count = (tonumber(record[1]) or 0) + charge
if known ~= '0' and id ~= known then count = count + owned end
local extra = tonumber(record[3]) or 0
local room = math.min(MAX_SAFE, math.max(0, limit + extra - count))
local want = math.max(lacking, math.min(lease, math.ceil(room / 8)))
local granted = 0
if room >= want then granted = want end
count = count + granted
held = held + granted
if not id then
  if count == 0 and (held == 0 or heldField == 'h:') then return { whole(granted), whole(room - granted), '0', string.format('%.3f', blocked) } end
  id = ARGV[10]
end
local function write()
  redis.call('HSET', KEYS[1], 'c', count, 'i', id)
  if extra > 0 then redis.call('HSET', KEYS[1], 'x', extra) end
  if lease > 0 or lacking > 0 then redis.call('HSET', KEYS[1], 'l', limit) end
  if heldField == 'h:' then return end
  if held > 0 then redis.call('HSET', KEYS[1], heldField, held) else redis.call('HDEL', KEYS[1], heldField) end
end
write()
if expires > (tonumber(record[2]) or 0) then
  redis.call('HSET', KEYS[1], 'e', expires)
  redis.call('PEXPIREAT', KEYS[1], expires)
  if redis.call('EXISTS', KEYS[1]) == 0 then
    write()
    redis.call('HSET', KEYS[1], 'e', expires)
    redis.call('PEXPIRE', KEYS[1], grace)
  end
end
return { whole(granted), whole(room - granted), id, string.format('%.3f', blocked) }
`

// ARGV: units, instance, recordId. Gives back to the record of that identity only.
const GIVE_BACK = `
local record = redis.call('HMGET', KEYS[1], 'c', 'i')
local count = tonumber(record[1])
if not count or (ARGV[3] ~= '0' and record[2] ~= ARGV[3]) then return 0 end
local back = math.min(count, tonumber(ARGV[1]))
if back > 0 then redis.call('HINCRBY', KEYS[1], 'c', -back) end
redis.call('HDEL', KEYS[1], 'h:' .. ARGV[2])
return count - back
`

const USAGE = `${VIEW}
return view()
`

// ARGV: units, a new identity, how long a new record is kept (ms). A grant that would take
// limit + extra past Number.MAX_SAFE_INTEGER writes nothing and answers { 2, limit + extra }.
const GRANT = `${VIEW}
local allowance = (tonumber(redis.call('HGET', KEYS[1], 'l')) or 0) + (tonumber(redis.call('HGET', KEYS[1], 'x')) or 0)
if tonumber(ARGV[1]) > MAX_SAFE - allowance then return { 2, whole(math.min(MAX_SAFE, allowance)) } end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'c', 0, 'i', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
redis.call('HINCRBY', KEYS[1], 'x', ARGV[1])
return view()
`

const RESET = `${VIEW}
local all = redis.call('HGETALL', KEYS[1])
if #all == 0 then return { 0 } end
local held = 0
for at = 1, #all, 2 do
  if string.sub(all[at], 1, 2) == 'h:' then held = held + tonumber(all[at + 1]) end
end
redis.call('HSET', KEYS[1], 'c', held, 'x', 0)
return view()
`

function script(source) {
  return { source, sha: createHash('sha1').update(source).digest('hex') }
}

const SCRIPTS = { reserve: script(RESERVE), giveBack: script(GIVE_BACK), usage: script(USAGE), grant: script(GRANT), reset: script(RESET) }

function isNoScript(error) {
  try {
    return error instanceof Error && /^NOSCRIPT\b/.test(String(error.message))
  } catch {
    return false
  }
}

const noTrip = () => {}

// Most arguments a command is given spread into ioredis's call().
const SPREAD_ARGUMENTS = 4_096

/**
 * The one way each client runs a script on one key: `run(commandAndArgs, key)`, every element a
 * string. Returns undefined for anything that is not one of the supported clients.
 */
function commandRunner(client) {
  if (typeof client !== 'object' || client === null) return undefined
  // ioredis Redis and Cluster (and iovalkey's, its fork): isCluster is their own flag; call() routes by the script's key. A
  // long argument list (a renewal of many keys: hundreds of thousands of arguments would overflow
  // the stack spread into the call) goes as one array, which ioredis flattens.
  if (typeof client.isCluster === 'boolean' && typeof client.call === 'function') {
    return (args) => (args.length > SPREAD_ARGUMENTS ? client.call(args[0], args.slice(1)) : client.call(...args))
  }
  if (typeof client.sendCommand !== 'function') return undefined
  // node-redis: a cluster's sendCommand takes the key that picks the node first (a cluster has
  // `masters` since redis 4.6, getMasters() before).
  if ('masters' in client || typeof client.getMasters === 'function') return (args, key) => client.sendCommand(key, false, args)
  if (typeof client.isOpen === 'boolean') return (args) => client.sendCommand(args)
  return undefined
}

/** Whether the client is a Redis Cluster's (ioredis's or iovalkey's Cluster, node-redis's createCluster): one slot a call. */
function isClusterClient(client) {
  return client.isCluster === true || 'masters' in client || typeof client.getMasters === 'function'
}

/** A function per node of the client's deployment that sends it one command (SCAN is per node). */
function scanners(client, run) {
  if (client.isCluster === true) return client.nodes('master').map((node) => (args) => node.call(...args))
  if (client.isCluster === false) return [(args) => run(args)]
  const masters = typeof client.getMasters === 'function' ? client.getMasters() : client.masters
  if (masters !== undefined) return [...masters].map((master) => (args) => Promise.resolve(client.nodeClient(master)).then((node) => node.sendCommand(args)))
  return [(args) => run(args)]
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

  // Runs a script on keys of one slot (the first one picks a cluster's node); `roundTrip()` is
  // called as each command is sent (EVALSHA, and EVAL after a NOSCRIPT).
  async function evaluate({ sha, source }, keys, args, roundTrip = noTrip) {
    const tail = [String(keys.length), ...keys, ...args]
    try {
      roundTrip()
      return await run(['EVALSHA', sha, ...tail], keys[0])
    } catch (error) {
      if (!isNoScript(error)) throw error
      roundTrip()
      return run(['EVAL', source, ...tail], keys[0])
    }
  }

  const keyOf = ({ name, key, periodId }) => prefix + redisQuotaKey(name, key, periodId)
  const blocks = blockOperations({ prefix, evaluate, script, scanners: () => scanners(client, run) })

  /** Runs an operator's script; answers the record after it, or null (a refused grant: { refused: allowance }). */
  async function view(scriptOf, request, args, roundTrip) {
    const reply = await evaluate(scriptOf, [keyOf(request)], args, roundTrip)
    if (Array.isArray(reply) && reply.length === 1 && Number(reply[0]) === 0) return checkRecordAnswer(null, request.name)
    if (Array.isArray(reply) && reply.length === 2 && Number(reply[0]) === 2) return checkRefusedGrant({ refused: clamped(reply[1]) }, request.name)
    if (!Array.isArray(reply) || reply.length !== 6) return checkRecordAnswer(reply, request.name)
    const [, limit, extra, used, held, expiresAt] = reply
    return checkRecordAnswer(
      { limit: limit === '' ? null : clamped(limit), extra: clamped(extra), used: clamped(used), held: clamped(held), expiresAt: expiresAt === -1 ? null : expiresAt },
      request.name,
    )
  }

  return makeQuotaStore('redis', {
    async reserve(request, roundTrip) {
      const { limit, leaseUnits, lacking, charge, expiresAtMs } = request
      const { instance, held, owned, recordId } = instanceFields(request)
      const args = [limit, leaseUnits, lacking, charge, Math.ceil(expiresAtMs), instance, held, owned, recordId, newRecordId()].map(String)
      // The key's block record, in the quota record's slot, is read by the same script
      // (lib/stores/redis-blocks.js); a block is news only while it lasts (a lifted one is learnt
      // by the blocked key's next ask).
      const keys = [keyOf(request), blocks.redisBlockKey(request.name, request.key)]
      const reply = await evaluate(SCRIPTS.reserve, keys, args, roundTrip)
      const blockedMs = Array.isArray(reply) && reply.length === 4 ? Number(reply[3]) : 0
      const answer =
        Array.isArray(reply) && (reply.length === 3 || reply.length === 4)
          ? { granted: clamped(reply[0]), unreserved: clamped(reply[1]), recordId: Number(reply[2]), ...(blockedMs === 0 ? {} : { blockedMs }) }
          : reply
      return checkReserveAnswer(answer, request)
    },
    async giveBack(request, roundTrip) {
      const { instance, recordId } = instanceFields(request)
      await evaluate(SCRIPTS.giveBack, [keyOf(request)], [request.units, instance, recordId].map(String), roundTrip)
    },
    usage: (request, roundTrip) => view(SCRIPTS.usage, request, [], roundTrip),
    grant: (request, roundTrip) => view(SCRIPTS.grant, request, [request.units, request.recordId, KEEP_GRANTED_MS].map(String), roundTrip),
    reset: (request, roundTrip) => view(SCRIPTS.reset, request, [], roundTrip),
    ...bucketOperations({ prefix, evaluate, script, batches: !isClusterClient(client) }),
    blockSet: blocks.blockSet,
    blockClear: blocks.blockClear,
    blockRead: blocks.blockRead,
    keys: blocks.keys,
  })
}

module.exports = { redisStore }
