'use strict'
// The fleet bucket's two operations on Redis (lib/quota-store.js: cellsAcquire, cellsRenew), each
// one Lua script. The record of (name, key) is a hash at <prefix>{b:<part(name)>}:<part(key)>: the
// braces are a hash tag, so every bucket record of one (prefix, name) is in one cluster slot and a
// renewal of many keys is one script on one node.
//   C        capacity                     f    free tokens (a float, as text)
//   i        the record's identity        R    the refill per second (for the record's TTL)
//   h:<X>    cells X holds                t:<X> store ms of X's last renewing call
//   l:<X>    X's leaseMs                  w:<X> store ms X asked for a fair share
// Kept by every full write (both scripts) while nobody waits and f <= C - Σh (absent otherwise):
//   F        fair = ceil(C / n), n the processes holding (h > 0) or waiting
//   z        '<holders> <ttl> <lapse>': how many t:* fields, the record's TTL in ms (below), the
//            earliest t:Y + 1.1 * l:Y + 1000 of any holder (nobody is past the margin until then)
//   u        the store time until which a plain renewal writes t:X alone: the write's time plus
//            min(ttl / 10, 30 s), and no later than lapse when X is not the only holder
// A plain renewal (X keeps all it holds at the same leaseMs, u present) reads i, h:X, l:X, u, F
// and z with one HMGET. Until u it writes t:X alone: the full path would change nothing else
// (lapse only bounds the others: while X is the only holder it is not read, and the next full
// write recomputes it), and it leaves the expiry where it is (the record expires at least
// 0.9 * ttl and ttl - 30 s after X's renewal, still after the time to refill and the margin).
// After u, if X is the only holder or store time <= lapse, it also moves the expiry and u.
// Anything else, or a record without u, takes the full path (HGETALL), which rewrites F, z, u and
// the expiry.
// Store time is TIME in ms, fractional. Floats (tokens, store time) cross as text (Lua numbers
// become integers in replies) and are parsed here. After each write the record expires
// max(ceil(C / R * 1000), max l * 1.1 + 1000) + 60_000 ms later: only after nobody touched it for
// long enough that the bucket would have refilled in full.

const { checkCellsAnswer, checkRenewAnswer, newRecordId } = require('../quota-store.js')
const { part } = require('./record-key.js')

// Most keys one renewal script carries (a script blocks the server while it runs: a plain renewal
// costs Redis about 4-12 µs a key, so 50,000 keys are one script of 0.2-0.6 s, and 100,000 keys
// renewed every leaseMs / 8 are two scripts per tick).
const RENEW_CHUNK = 50_000
// A record of a bucket that never refills (R = 0) is kept this long after its last write.
const NEVER_REFILLS_MS = 400 * 86_400_000

// Shared by both scripts: load a record, forget lapsed holders and waiters, count shares, write.
const COMMON = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function text(x) return string.format('%.17g', x) end
local function load(key)
  local all = redis.call('HGETALL', key)
  if #all == 0 then return nil end
  local r = { h = {}, t = {}, l = {}, w = {}, C = 0, f = 0, R = 0, set = {}, del = {} }
  for at = 1, #all, 2 do
    local field, value = all[at], all[at + 1]
    local kind, who = string.sub(field, 1, 2), string.sub(field, 3)
    if kind == 'h:' then r.h[who] = tonumber(value)
    elseif kind == 't:' then r.t[who] = tonumber(value)
    elseif kind == 'l:' then r.l[who] = tonumber(value)
    elseif kind == 'w:' then r.w[who] = tonumber(value)
    elseif field == 'C' then r.C = tonumber(value)
    elseif field == 'f' then r.f = tonumber(value)
    elseif field == 'R' then r.R = tonumber(value)
    elseif field == 'i' then r.i = value end
  end
  return r
end
local function put(r, field, value) r.set[#r.set + 1] = field; r.set[#r.set + 1] = value end
local function drop(r, field) r.del[#r.del + 1] = field end
local function forget(r, y)
  r.h[y] = nil; r.t[y] = nil; r.l[y] = nil
  drop(r, 'h:' .. y); drop(r, 't:' .. y); drop(r, 'l:' .. y)
end
local function reclaim(r, me, now, lease)
  for y, t in pairs(r.t) do
    if y ~= me and now > t + 1.1 * (r.l[y] or 0) + 1000 then forget(r, y) end
  end
  for y, asked in pairs(r.w) do
    if y ~= me and now > asked + (r.l[y] or lease) then r.w[y] = nil; drop(r, 'w:' .. y) end
  end
end
-- sum of cells, processes holding or waiting (me counted when counted_me), others waiting
local function shares(r, me, counted_me)
  local sum, n, seen, waiting = 0, 0, {}, 0
  for y, h in pairs(r.h) do
    sum = sum + h
    if h > 0 then seen[y] = true; n = n + 1 end
  end
  for y in pairs(r.w) do
    if not seen[y] then seen[y] = true; n = n + 1 end
    if y ~= me then waiting = 1 end
  end
  if counted_me and not seen[me] then n = n + 1 end
  return sum, math.max(n, 1), waiting
end
local function write(key, r, now)
  local longest, sum, holders, n, waiters, lapse, seen = 0, 0, 0, 0, 0, 0, {}
  for _, l in pairs(r.l) do longest = math.max(longest, l) end
  for y, t in pairs(r.t) do
    local at = t + 1.1 * (r.l[y] or 0) + 1000
    if holders == 0 or at < lapse then lapse = at end
    holders = holders + 1
  end
  for y, h in pairs(r.h) do
    sum = sum + h
    if h > 0 then seen[y] = true; n = n + 1 end
  end
  for y in pairs(r.w) do
    waiters = waiters + 1
    if not seen[y] then n = n + 1 end
  end
  local refill = ${NEVER_REFILLS_MS}
  if r.R > 0 then refill = math.ceil(r.C / r.R * 1000) end
  local ttl = math.ceil(math.max(math.min(refill, ${NEVER_REFILLS_MS}), longest * 1.1 + 1000) + 60000)
  if waiters == 0 and r.f <= r.C - sum then
    local due = now + math.min(ttl / 10, 30000)
    if holders > 1 then due = math.min(due, lapse) end
    put(r, 'F', math.ceil(r.C / math.max(n, 1))); put(r, 'u', text(due))
    put(r, 'z', table.concat({ holders, ttl, text(lapse) }, ' '))
  else
    drop(r, 'F'); drop(r, 'u'); drop(r, 'z')
  end
  if #r.del > 0 then redis.call('HDEL', key, unpack(r.del)) end
  redis.call('HSET', key, unpack(r.set))
  redis.call('PEXPIRE', key, ttl)
end
-- A plain renewal of X's past u (z: the record's z): moves the expiry and u, writes t:X and
-- answers true, or answers false when another holder may be past the margin (the full path).
local function prolong(key, z, now, nowText, tField)
  local holders, ttl, lapse = string.match(z or '', '^(%d+) (%d+) (%S+)$')
  if not holders or (holders ~= '1' and now > tonumber(lapse)) then return false end
  local due = now + math.min(ttl / 10, 30000)
  if holders ~= '1' then due = math.min(due, tonumber(lapse)) end
  redis.call('HSET', key, tField, nowText, 'u', text(due))
  redis.call('PEXPIRE', key, ttl)
  return true
end
`

// KEYS[1] the record. ARGV: capacity, refillPerSecond, initial, instance, leaseMs, held, recordId
// ('0': any), a new identity. Answers { granted, tokens, held, fair, waiting, identity, now }.
const ACQUIRE = `${COMMON}
local capacity, refill, initial = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local me, lease, held, known = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local now = now_ms()
local r = load(KEYS[1])
if not r then
  r = { h = {}, t = {}, l = {}, w = {}, C = capacity, f = initial, R = -1, i = ARGV[8], set = {}, del = {} }
  put(r, 'C', capacity); put(r, 'i', r.i)
end
if r.R ~= refill then r.R = refill; put(r, 'R', text(refill)) end
if r.C ~= capacity then
  r.C = capacity
  local sum = shares(r, me, false)
  r.f = math.max(0, math.min(r.f, capacity - sum))
  put(r, 'C', capacity)
end
local lost = known ~= '0' and r.i ~= known
reclaim(r, me, now, lease)
local hX = r.h[me] or 0
if lost then hX = 0 end
if held < hX then hX = held end
r.h[me] = hX
local sum = shares(r, me, true)
local others = sum - hX
hX = math.min(hX, math.max(0, r.C - others))
r.h[me] = hX
local free = math.max(0, r.C - others - hX)
local _, n, waiting = shares(r, me, true)
local fair = math.ceil(r.C / n)
local take = free
if waiting == 1 then take = math.max(0, math.min(free, fair - hX)) end
local tokens = 0
if free > 0 then tokens = math.min(take, r.f * take / free) end
r.f = math.max(0, r.f - tokens)
r.h[me] = hX + take; r.t[me] = now; r.l[me] = lease
put(r, 'f', text(r.f)); put(r, 'h:' .. me, hX + take); put(r, 't:' .. me, text(now)); put(r, 'l:' .. me, lease)
if others > 0 then
  r.w[me] = now; put(r, 'w:' .. me, text(now))
elseif r.w[me] then
  r.w[me] = nil; drop(r, 'w:' .. me)
end
write(KEYS[1], r, now)
return { take, text(tokens), hX + take, fair, waiting, r.i, text(now) }
`

// KEYS: the records. ARGV: instance, leaseMs, then per key held, tokens, recordId ('0': any).
// Answers { now, then per key held, waiting, fair }.
const RENEW = `${COMMON}
local me, lease = ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local nowText = text(now)
local hField, tField, lField = 'h:' .. me, 't:' .. me, 'l:' .. me
local reply = { nowText }
for k = 1, #KEYS do
  local key, held, known = KEYS[k], tonumber(ARGV[3 * k]), ARGV[3 * k + 2]
  local fields = redis.call('HMGET', key, 'i', hField, lField, 'u', 'F', 'z')
  local id, h, due = fields[1], tonumber(fields[2]), fields[4]
  local plain = false
  if id and (known == '0' or id == known) and due and h and h > 0 and held >= h and tonumber(fields[3]) == lease then
    if now <= tonumber(due) then
      redis.call('HSET', key, tField, nowText)
      plain = true
    else
      plain = prolong(key, fields[6], now, nowText, tField)
    end
  end
  if plain then
    -- held and fair as the record's text (the answer's parser reads numbers from text)
    reply[3 * k - 1] = fields[2]; reply[3 * k] = 0; reply[3 * k + 1] = fields[5]
  elseif not id or (known ~= '0' and id ~= known) then
    reply[3 * k - 1] = 0; reply[3 * k] = 0; reply[3 * k + 1] = 0
  else
    local tokens = tonumber(ARGV[3 * k + 1])
    local r = load(KEYS[k])
    reclaim(r, me, now, lease)
    local hX = r.h[me] or 0
    local newH = math.min(hX, held)
    r.f = r.f + math.min(tokens, hX - newH)
    if newH > 0 then
      r.h[me] = newH; r.t[me] = now; r.l[me] = lease
      put(r, 'h:' .. me, newH); put(r, 't:' .. me, text(now)); put(r, 'l:' .. me, lease)
    else
      forget(r, me)
      if r.w[me] then r.w[me] = nil; drop(r, 'w:' .. me) end
    end
    local sum, n, waiting = shares(r, me, false)
    r.f = math.max(0, math.min(r.f, r.C - sum))
    put(r, 'f', text(r.f))
    write(KEYS[k], r, now)
    reply[3 * k - 1] = newH; reply[3 * k] = waiting; reply[3 * k + 1] = math.ceil(r.C / n)
  end
end
return reply
`

/** A reply's number: Lua integers arrive as numbers, floats as text. */
function numberOf(value) {
  if (typeof value === 'number') return value
  if (typeof value === 'string' && value.trim() !== '') return Number(value)
  return Number.NaN
}

/**
 * The two operations for a redisStore: `evaluate(script, keys, args)` runs a script (EVALSHA,
 * EVAL on NOSCRIPT) on keys of one slot; `script(source)` makes { source, sha }.
 */
function cellsOperations({ prefix, evaluate, script }) {
  const acquireScript = script(ACQUIRE)
  const renewScript = script(RENEW)
  const recordOf = (name, key) => `${prefix}{b:${part(name)}}:${part(key)}`

  async function renewChunk(request, keys) {
    const args = [request.instance, String(request.leaseMs)]
    for (const one of keys) args.push(String(one.held), String(one.tokens), String(one.recordId))
    const reply = await evaluate(
      renewScript,
      keys.map((one) => recordOf(request.name, one.key)),
      args,
    )
    if (!Array.isArray(reply) || reply.length !== 1 + 3 * keys.length) return undefined
    const answers = []
    for (let at = 1; at < reply.length; at += 3) answers.push({ held: numberOf(reply[at]), waiting: numberOf(reply[at + 1]), fair: numberOf(reply[at + 2]) })
    return { storeNowMs: numberOf(reply[0]), keys: answers }
  }

  return {
    async cellsAcquire(request) {
      const { name, key, capacity, refillPerSecond, initial, instance, leaseMs, held, recordId } = request
      const args = [capacity, refillPerSecond, initial, instance, leaseMs, held, recordId, newRecordId()].map(String)
      const reply = await evaluate(acquireScript, [recordOf(name, key)], args)
      const answer =
        Array.isArray(reply) && reply.length === 7
          ? {
              granted: numberOf(reply[0]),
              tokens: numberOf(reply[1]),
              held: numberOf(reply[2]),
              fair: numberOf(reply[3]),
              waiting: numberOf(reply[4]),
              recordId: numberOf(reply[5]),
              storeNowMs: numberOf(reply[6]),
            }
          : reply
      return checkCellsAnswer(answer, request)
    },
    async cellsRenew(request) {
      const chunks = []
      for (let at = 0; at < request.keys.length; at += RENEW_CHUNK) chunks.push(request.keys.slice(at, at + RENEW_CHUNK))
      if (chunks.length === 0) return checkRenewAnswer({ storeNowMs: 0, keys: [] }, request)
      const answers = await Promise.all(chunks.map((keys) => renewChunk(request, keys)))
      if (answers.some((one) => one === undefined)) return checkRenewAnswer(undefined, request)
      // The earliest store time: every key was renewed at or after it.
      const storeNowMs = Math.min(...answers.map((one) => one.storeNowMs))
      return checkRenewAnswer({ storeNowMs, keys: answers.flatMap((one) => one.keys) }, request)
    },
  }
}

module.exports = { cellsOperations, RENEW_CHUNK }
