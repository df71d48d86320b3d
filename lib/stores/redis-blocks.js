'use strict'
// Blocks on Redis (lib/share/protocol.js: blockSet, blockClear, blockRead, keys; docs/blocking.md):
// one hash per (name, key) at <prefix>{<slot(name)>:<slot(key)>}:k, whose hash tag is the one every
// record of the (name, key) carries (lib/stores/record-key.js: its quota periods, its bucket), so
// that the reservation's script reads it in its own round trip on a Redis Cluster too. Fields, in store ms (TIME):
//   u   the block's end        v   the level        d   the latest end of a block (for the reset)
// The hash expires resetAfterMs after d.

const { checkBlockAnswer, checkKeysAnswer } = require('../share/protocol.js')
const { slotTag } = require('./record-key.js')

const UNESCAPES = { '%25': '%', '%7B': '{', '%7D': '}' }

/** The block record of (name, key), without the store's prefix. */
function redisBlockKey(name, key) {
  return `${slotTag(name, key)}:k`
}

const NOW = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function left(key, now)
  local u = tonumber(redis.call('HGET', key, 'u'))
  if u and u > now then return u - now end
  return 0
end
`

// Lua lines for the reservation's script: `blocked` = the block left of KEYS[2] (0 without one).
const RESERVE_BLOCK = `${NOW}
local blocked = 0
if KEYS[2] then blocked = left(KEYS[2], now_ms()) end
`

// ARGV: forMs, resetAfterMs, then the levels' ms (none: a manual block). Answers { left ms, level }.
const SET = `${NOW}
local now = now_ms()
local forMs, reset = tonumber(ARGV[1]), tonumber(ARGV[2])
local record = redis.call('HMGET', KEYS[1], 'u', 'v', 'd')
local untilMs, level, ended = tonumber(record[1]) or 0, tonumber(record[2]) or 0, tonumber(record[3]) or 0
if #ARGV > 2 then
  if now - ended >= reset then level = 0 end
  forMs = tonumber(ARGV[3 + level])
  level = math.min(level + 1, #ARGV - 3)
end
untilMs = math.max(untilMs, now + forMs)
ended = math.max(ended, untilMs)
redis.call('HSET', KEYS[1], 'u', string.format('%.3f', untilMs), 'v', level, 'd', string.format('%.3f', ended))
redis.call('PEXPIREAT', KEYS[1], math.ceil(ended + reset))
return { string.format('%.3f', untilMs - now), level }
`

const CLEAR = `${NOW}
local blocked = left(KEYS[1], now_ms())
redis.call('DEL', KEYS[1])
return { string.format('%.3f', blocked), 0 }
`

const READ = `${NOW}
local blocked = left(KEYS[1], now_ms())
return { string.format('%.3f', blocked), tonumber(redis.call('HGET', KEYS[1], 'v')) or 0 }
`

/** A glob pattern matching `text` literally. */
function globLiteral(text) {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)
}

/** The key of a record name's `<slot(key)>}...` (after `{<slot(name)>:`), or undefined. */
function keyOfRecord(rest) {
  const read = /^(\d+)([:!])/.exec(rest)
  if (read === null) return undefined
  const start = read[0].length
  const length = Number(read[1])
  let text
  if (read[2] === '!') {
    const hex = rest.slice(start, start + length)
    text = ''
    for (let i = 0; i < hex.length; i += 4) text += String.fromCharCode(parseInt(hex.slice(i, i + 4), 16))
  } else {
    const bytes = Buffer.from(rest.slice(start), 'utf8').subarray(0, length)
    text = bytes.toString('utf8')
  }
  return text.replace(/%25|%7B|%7D/g, (c) => UNESCAPES[c])
}

/** The Redis operations of blocks: `run(args, key)` as redis.js's, `evaluate` its script runner, `scanners()` a SCAN function per node. */
function blockOperations({ prefix, evaluate, script, scanners }) {
  const setScript = script(SET)
  const clearScript = script(CLEAR)
  const readScript = script(READ)
  const recordOf = (name, key) => prefix + redisBlockKey(name, key)
  const answer = (reply, name) => checkBlockAnswer(Array.isArray(reply) && reply.length === 2 ? { blockedMs: Number(reply[0]), level: Number(reply[1]) } : reply, name)

  /** Record names matching `pattern` on every node, at most `limit`, SCAN by SCAN. */
  async function scan(pattern, limit, roundTrip = () => {}, seen) {
    for (const scanOne of scanners()) {
      let cursor = '0'
      do {
        roundTrip()
        const [next, names] = await scanOne(['SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000'])
        cursor = String(next)
        for (const name of names) {
          seen.add(String(name))
          if (seen.size >= limit) return
        }
      } while (cursor !== '0')
    }
  }

  return {
    redisBlockKey: (name, key) => prefix + redisBlockKey(name, key),
    async blockSet({ name, key, forMs, levels, resetAfterMs }, roundTrip) {
      const args = [forMs, resetAfterMs, ...(levels ?? [])].map(String)
      return answer(await evaluate(setScript, [recordOf(name, key)], args, roundTrip), name)
    },
    async blockClear({ name, key }, roundTrip) {
      return answer(await evaluate(clearScript, [recordOf(name, key)], [], roundTrip), name)
    },
    async blockRead({ name, key }, roundTrip) {
      return answer(await evaluate(readScript, [recordOf(name, key)], [], roundTrip), name)
    },
    async keys({ name, blocked, limit }, roundTrip) {
      // Every record of the name starts with its hash tag's first half, `{<slot(name)>:`: the tag
      // of the empty key, `{<slot(name)>:0:}`, less its `0:}` (lib/stores/record-key.js).
      const start = `${prefix}${slotTag(name, '').slice(0, -'0:}'.length)}`
      const names = new Set()
      await scan(`${globLiteral(start)}*${blocked ? '}:k' : ''}`, limit * 4, roundTrip, names)
      const found = new Map()
      for (const record of names) {
        const key = keyOfRecord(record.slice(start.length))
        if (key !== undefined) found.set(key, (found.get(key) ?? false) || record.endsWith('}:k'))
        if (found.size >= limit) break
      }
      const out = []
      for (const [key, hasBlock] of found) {
        const blockedMs = hasBlock ? answer(await evaluate(readScript, [recordOf(name, key)], [], roundTrip), name).blockedMs : 0
        if (blocked && blockedMs === 0) continue
        out.push({ key, blockedMs })
      }
      return checkKeysAnswer(out, name)
    },
  }
}

module.exports = { blockOperations, redisBlockKey, RESERVE_BLOCK }
