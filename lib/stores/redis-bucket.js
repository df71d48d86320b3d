'use strict'
// The fleet bucket's operations on Redis (lib/share/protocol.js: bucketTake, bucketRead,
// bucketFill), each one Lua script on one key. The record of (name, key) is a hash at
// <prefix>{<name and key>}:b (lib/stores/record-key.js: redisBucketKey), its hash tag the (name,
// key) pair alone with its braces escaped: in the slot of the key's quota records, while the
// records of one name's keys spread over a cluster's slots, as the keys' traffic does.
//   C, R, tk, F, S, i    capacity, refill per second, tokens, fleet clock, store time, identity
//   o:<X>, a:<X>, l:<X>, e:<X>   per instance: tokens out, fleet ms of its last call (or of the
//                                call that gave its slice one more margin), leaseMs, 1 when its
//                                slice had that one more margin (absent: not)
//   d:<X>                        until when (fleet ms) X counts as hungry (absent: not)
// Store time is TIME in ms, fractional. Floats (tk, F, S) are kept and answered as text written
// with 17 significant digits (Lua numbers become integers in replies), so nothing is rounded. A
// script reads the record with one HGETALL and writes it back with one HSET (an HDEL first only for
// fields it no longer has), then PEXPIRE: a record lists a few instances, and a key whose takes
// are spent by the calls that made them (a long tail of client addresses) lists none.

const { checkBucketAnswer, checkBucketUsage, unsoundBucketRecord, newRecordId, bucketTerms, SHARE_REFILL_MS, MAX_CLOCK_MS, MAX_BUCKET_CAPACITY, MAX_RECORD_ID } = require('../share/protocol.js')
const { redisBucketKey } = require('./record-key.js')

// The fleet bucket's terms (lib/share/protocol.js) written as Lua expressions.
const LUA = { add: (x, y) => `(${x} + ${y})`, mul: (x, y) => `(${x} * ${y})`, div: (x, y) => `(${x} / ${y})`, max: (x, y) => `math.max(${x}, ${y})` }

const COMMON = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function text(x) return string.format('%.17g', x) end
local function write_off_after(lease) return ${bucketTerms.writeOffAfter(LUA, 'lease')} end
local MAX_CLOCK_MS, MAX_CAPACITY, MAX_SAFE = ${MAX_CLOCK_MS}, ${MAX_BUCKET_CAPACITY}, ${Number.MAX_SAFE_INTEGER}
-- x a number (not nan, not infinite) in [low, high]; whole: an integer too.
local function within(x, low, high, whole)
  if type(x) ~= 'number' or x ~= x or x < low or x > high then return false end
  return not whole or math.floor(x) == x
end
-- Why r is not a bucket record (a field missing, not a finite number in range), or nil.
local function unsound(r)
  if not within(r.C, 1, MAX_CAPACITY, true) then return 'C' end
  if not within(r.R, 0, math.huge, false) or r.R <= 0 or r.R == math.huge then return 'R' end
  if not within(r.tk, -MAX_SAFE, r.C, false) then return 'tk' end
  if not within(r.F, 0, MAX_CLOCK_MS, false) then return 'F' end
  if not within(r.S, 0, MAX_CLOCK_MS, false) then return 'S' end
  if type(r.i) ~= 'string' or not string.match(r.i, '^[1-9][0-9]*$') or not within(tonumber(r.i), 1, ${MAX_RECORD_ID} - 1, true) then return 'i' end
  for y, n in pairs(r.o) do
    if not within(n, 0, MAX_SAFE, true) then return 'o:' .. y end
    if not within(r.a[y], 0, MAX_CLOCK_MS, false) then return 'a:' .. y end
    if not within(r.l[y], 1, MAX_CAPACITY, true) then return 'l:' .. y end
  end
  for y, e in pairs(r.e) do if e ~= 1 or not r.o[y] then return 'e:' .. y end end
  -- (d:X, until when X counts as hungry, is at most a few seconds past the fleet clock.)
  for y, d in pairs(r.d) do if not within(d, 0, MAX_CLOCK_MS + 60000, false) then return 'd:' .. y end end
  return nil
end
-- The record: nil when there is none; false and why when the key holds something that is not a
-- bucket record (another type, a field missing or out of range); { placeholder = true, i } for
-- fill's stand-in, which the next take makes a full bucket of.
local function load(key)
  local all = redis.pcall('HGETALL', key)
  if type(all) ~= 'table' or all.err then return false, 'a key of another type' end
  if #all == 0 then return nil end
  local r = { v = {}, o = {}, a = {}, l = {}, e = {}, d = {}, fields = {} }
  for at = 1, #all, 2 do
    local field, value = all[at], all[at + 1]
    r.fields[#r.fields + 1] = field
    local kind, who = string.sub(field, 1, 2), string.sub(field, 3)
    if kind == 'o:' then r.o[who] = tonumber(value)
    elseif kind == 'a:' then r.a[who] = tonumber(value)
    elseif kind == 'l:' then r.l[who] = tonumber(value)
    elseif kind == 'e:' then r.e[who] = tonumber(value)
    elseif kind == 'd:' then r.d[who] = tonumber(value)
    else r.v[field] = value end
  end
  r.C, r.R, r.tk, r.F, r.S, r.i = tonumber(r.v.C), tonumber(r.v.R), tonumber(r.v.tk), tonumber(r.v.F), tonumber(r.v.S), r.v.i
  if r.v.full == '1' and #all == 4 and r.v.i and string.match(r.v.i, '^[1-9][0-9]*$') then return { placeholder = true, i = r.v.i } end
  local why = unsound(r)
  if why then
    if r.v[why] == nil and not string.find(why, ':') then return false, 'field ' .. why .. ' missing' end
    return false, 'field ' .. why .. ' not a number in range'
  end
  return r
end
local function out_of(r, except)
  local sum = 0
  for y, o in pairs(r.o) do if y ~= except then sum = sum + o end end
  return sum
end
-- Step 4: the others' slices past their margin at the fleet clock r.F, moved there from
-- before. A move longer than a slice's margin at once (the key left alone, or the store away)
-- gives it one more margin from r.F, once; otherwise it is written off, spent for good. Answers
-- the tokens written off now and the latest margin they passed (nil: none).
local function write_off(r, except, before)
  local gone, gone_until = 0, nil
  for y, o in pairs(r.o) do
    local margin = r.a[y] + write_off_after(r.l[y])
    if y ~= except and margin < r.F then
      if r.F - before > write_off_after(r.l[y]) and not r.e[y] then
        r.a[y], r.e[y] = r.F, 1
      else
        r.o[y], r.a[y], r.l[y], r.e[y] = nil, nil, nil, nil
        gone = gone + o
        if gone_until == nil or margin > gone_until then gone_until = margin end
      end
    end
  end
  return gone, gone_until
end
local function store(key, r)
  local fields = { 'C', r.C, 'R', text(r.R), 'tk', text(r.tk), 'F', text(r.F), 'S', text(r.S), 'i', r.i }
  for y, o in pairs(r.o) do fields[#fields + 1] = 'o:' .. y; fields[#fields + 1] = o end
  for y, e in pairs(r.e) do fields[#fields + 1] = 'e:' .. y; fields[#fields + 1] = e end
  for y, d in pairs(r.d) do fields[#fields + 1] = 'd:' .. y; fields[#fields + 1] = text(d) end
  for y, a in pairs(r.a) do fields[#fields + 1] = 'a:' .. y; fields[#fields + 1] = text(a) end
  for y, l in pairs(r.l) do fields[#fields + 1] = 'l:' .. y; fields[#fields + 1] = l end
  -- The fields the record had and no longer has go (none, for a key whose instances hold nothing).
  if r.replace then
    redis.call('DEL', key)
  elseif r.fields then
    local written, gone = {}, {}
    for at = 1, #fields, 2 do written[fields[at]] = true end
    for _, field in ipairs(r.fields) do if not written[field] then gone[#gone + 1] = field end end
    if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  end
  redis.call('HSET', key, unpack(fields))
end
-- PEXPIRETIME (Redis 7) is exact; before it, the server's time plus PTTL. -1: none.
local function expires_at(key)
  local at = redis.pcall('PEXPIRETIME', key)
  if type(at) == 'number' then return at end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then return -1 end
  return math.floor(now_ms()) + ttl
end
-- The operator's view: { C, R, tokens, out, expiresAt }.
local function view(key, r, tokens)
  return { r.C, text(r.R), text(tokens), out_of(r, nil), expires_at(key) }
end
`

// KEYS[1] the record. ARGV: capacity, refillPerSecond, instance, leaseMs, want, more, held, give,
// charge, fleetMs, recordId ('0': none), newId, most (0: no limit), spentMs, spend ('1': not recorded). Answers { granted, held, tokens, fleetMs, now,
// identity, others }.
const TAKE = `${COMMON}
local capacity, refill, me, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local want, more, held, give = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local charge, fleet, known = tonumber(ARGV[9]), tonumber(ARGV[10]), ARGV[11]
local spent = tonumber(ARGV[14])
local now = now_ms()
-- 1. a missing record is made; one X knew comes back empty, and so does one that is not a
-- bucket record (repaired: its key is rewritten whole below); fill's stand-in becomes a full bucket
local r = load(KEYS[1])
local repaired = r == false
local created = false
if not r or r.placeholder then
  local tk, id = capacity, ARGV[12]
  if r then id = r.i elseif known ~= '0' or repaired then tk = 0 end
  -- (replace: what the key held, not a record or fill's stand-in, goes whole)
  r = { C = capacity, R = refill, tk = tk, F = 0, S = now, i = id, o = {}, a = {}, l = {}, e = {}, d = {}, replace = r ~= nil }
  created = true
end
local lost = repaired or (known ~= '0' and (created or r.i ~= known))
-- 2. the request's capacity and refill
if r.C ~= capacity or r.R ~= refill then
  r.C, r.R = capacity, refill
  r.tk = math.min(r.tk, r.C - out_of(r, nil))
end
-- 3. the fleet clock
local by_store = r.F + math.max(0, now - r.S)
local by_caller = r.F + r.C / r.R * 1000
if fleet >= 0 and not lost then by_caller = fleet end
local moved = math.max(r.F, math.min(by_store, by_caller))
local before = r.F
r.F, r.S = moved, now
-- 4. write-off of the others past their margin
local gone, gone_until = write_off(r, me, before)
-- 5. X's report, then the refill piece by piece: X's slice counts as out in full until it was
-- last spent from (spent ms before now), what X keeps and gives back until now; the slices
-- written off now until their margin passed. Then what X gives back, under C minus what is out.
-- (A slice of X's written off is gone from the record: nothing of it is kept or given back.)
local prev = r.o[me] or 0
if lost then prev = 0 end
local keep = math.min(held, prev)
local back = math.min(give, prev - keep)
local others = out_of(r, me)
local function clamp(at) return math.min(moved, math.max(before, at)) end
local spent_until = clamp(moved - spent)
local written_until = clamp(gone_until or before)
-- (Both marks are within [before, moved]: the pieces are before, the nearer mark, the other, moved.)
local points = { before, math.min(spent_until, written_until), math.max(spent_until, written_until), moved }
for p = 1, 3 do
  local from, to = points[p], points[p + 1]
  if to > from then
    local room = r.C - others
    if from < written_until then room = room - gone end
    if from < spent_until then room = room - prev else room = room - keep - back end
    if r.tk < room then r.tk = math.min(room, r.tk + (to - from) * r.R / 1000) end
  end
end
r.tk = math.min(r.C - others - keep, r.tk + back)
-- 6. failOpen's charge
r.tk = r.tk - charge
-- 7. the take
-- k: the others holding a slice; hungry: the others hungry now; sharing: both
local k, hungry = 0, 0
for y, o in pairs(r.o) do if y ~= me and o > 0 then k = k + 1 end end
local sharing = k
for y, d in pairs(r.d) do
  if y ~= me and d >= r.F then
    hungry = hungry + 1
    if not r.o[y] then sharing = sharing + 1 end
  elseif y ~= me then
    r.d[y] = nil
  end
end
local least = want
if more > 0 then least = math.max(want, 1) end
local granted = 0
if r.tk >= least then
  local extra = 0
  if more == 1 then local fair = math.min((r.tk - least) / (sharing + 1), r.C / (sharing + 2))
    extra = math.floor(math.min(fair, math.max(fair / 4, r.R * ${SHARE_REFILL_MS} / 1000))) elseif more == 2 then extra = math.floor((r.tk - least) / (hungry + 1)) end
local most = tonumber(ARGV[13])
if most > 0 and least + extra > most then extra = math.max(0, most - least) end
  granted = least + extra
end
r.tk = r.tk - granted
local mine = keep + granted
-- X found the bucket short (denied, or it took the last whole token): hungry for its local
-- denial (lib/share/protocol.js, hungerMs)
if (least > 0 and granted == 0) or (granted > 0 and r.tk < 1) then
  local floor = math.min(lease / 8, 1000, r.C / r.R * 500)
  local wait = math.max(0, 1 - r.tk) * 1000 / r.R
  r.d[me] = r.F + math.min(math.max(wait, math.min(1.3 * floor, 1000)), 1000) * 1.25 + 50
else
  r.d[me] = nil
end
-- 8. X's slice; a take the asking call spends at once (spend) is not recorded
local recorded = mine
if ARGV[15] == '1' then recorded = keep end
if recorded > 0 then
  r.o[me], r.a[me], r.l[me], r.e[me] = recorded, r.F, lease, nil
else
  r.o[me], r.a[me], r.l[me], r.e[me] = nil, nil, nil, nil
end
-- 9. the expiry
local longest = lease
for _, l in pairs(r.l) do longest = math.max(longest, l) end
store(KEYS[1], r)
redis.call('PEXPIRE', KEYS[1], math.ceil(${bucketTerms.keptAfterTake(LUA, 'r.C', 'r.R', 'longest')}))
return { granted, mine, text(r.tk), text(r.F), text(now), r.i, k, repaired and 1 or 0 }
`

// KEYS[1] the record. Answers the view, or {} when there is none. Writes nothing.
const READ = `${COMMON}
local r, why = load(KEYS[1])
if r == false then return { 'unsound', why } end
if not r or r.placeholder then return {} end
local now = now_ms()
local at = r.F + math.min(math.max(0, now - r.S), r.C / r.R * 1000)
local out = 0
for y, o in pairs(r.o) do
  if r.a[y] + write_off_after(r.l[y]) >= at then out = out + o else r.o[y] = nil end
end
local tokens = r.tk
if tokens < r.C - out then tokens = math.min(r.C - out, tokens + (at - r.F) * r.R / 1000) end
return view(KEYS[1], r, tokens)
`

// KEYS[1] the record; ARGV[1] an identity for a record made anew. The bucket back to full (C - out);
// answers the view, or {}. A record that is not a bucket record is replaced: by a full bucket of
// its C and R, new identity, when those two read; else by a stand-in { i, full = 1 } that the next
// take makes a full bucket of (answered as no record). Either keeps the key's TTL, or gets one.
const FILL = `${COMMON}
local r = load(KEYS[1])
if r == nil then return {} end
local ttl = redis.call('PTTL', KEYS[1])
if not r or r.placeholder then
  local all = redis.pcall('HGETALL', KEYS[1])
  local C, R = nil, nil
  if type(all) == 'table' and not all.err then
    C, R = tonumber(redis.call('HGET', KEYS[1], 'C')), tonumber(redis.call('HGET', KEYS[1], 'R'))
  end
  local id = ARGV[1]
  if r and r.placeholder then id = r.i end
  redis.call('DEL', KEYS[1])
  if not within(C, 1, MAX_CAPACITY, true) or not within(R, 0, math.huge, false) or R <= 0 or R == math.huge then
    redis.call('HSET', KEYS[1], 'i', id, 'full', '1')
    redis.call('PEXPIRE', KEYS[1], math.max(ttl, math.ceil(${bucketTerms.keptAfterTake(LUA, '0', '1', '0')})))
    return {}
  end
  r = { C = C, R = R, tk = C, F = 0, S = now_ms(), i = id, o = {}, a = {}, l = {}, e = {}, d = {} }
  if ttl <= 0 then ttl = math.ceil(${bucketTerms.keptAfterTake(LUA, 'C', 'R', '0')}) end
end
write_off(r, nil, r.F)
r.tk = r.C - out_of(r, nil)
store(KEYS[1], r)
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
return view(KEYS[1], r, r.tk)
`

/** A reply's number: Lua integers arrive as numbers, floats as text. */
function numberOf(value) {
  if (typeof value === 'number') return value
  if (typeof value === 'string' && value.trim() !== '') return Number(value)
  return Number.NaN
}

/**
 * The three operations for a redisStore: `evaluate(script, keys, args)` runs a script (EVALSHA,
 * EVAL on NOSCRIPT) on keys of one slot; `script(source)` makes { source, sha }.
 */
function bucketOperations({ prefix, evaluate, script }) {
  const takeScript = script(TAKE)
  const readScript = script(READ)
  const fillScript = script(FILL)
  const recordOf = (name, key) => prefix + redisBucketKey(name, key)

  async function view(scriptOf, { name, key }, args, roundTrip) {
    const record = recordOf(name, key)
    const reply = await evaluate(scriptOf, [record], args, roundTrip)
    if (Array.isArray(reply) && reply.length === 0) return checkBucketUsage(null, name)
    if (Array.isArray(reply) && reply.length === 2 && reply[0] === 'unsound') throw unsoundBucketRecord('Redis', record, name, key, String(reply[1]))
    if (!Array.isArray(reply) || reply.length !== 5) return checkBucketUsage(reply, name)
    const [capacity, refillPerSecond, tokens, out, expiresAt] = reply.map(numberOf)
    return checkBucketUsage({ capacity, refillPerSecond, tokens, out, expiresAt: expiresAt === -1 ? null : expiresAt }, name)
  }

  return {
    async bucketTake(request, roundTrip) {
      const { name, key, capacity, refillPerSecond, instance, leaseMs, want, more, held, give, charge, fleetMs, recordId } = request
      const newId = request.newId ?? newRecordId()
      const args = [capacity, refillPerSecond, instance, leaseMs, want, more, held, give, charge, fleetMs, recordId, newId, request.most ?? 0, request.spentMs ?? 0, request.spend ? 1 : 0].map(String)
      const reply = await evaluate(takeScript, [recordOf(name, key)], args, roundTrip)
      const answer =
        Array.isArray(reply) && reply.length === 8
          ? {
              granted: numberOf(reply[0]),
              held: numberOf(reply[1]),
              tokens: numberOf(reply[2]),
              fleetMs: numberOf(reply[3]),
              storeNowMs: numberOf(reply[4]),
              recordId: numberOf(reply[5]),
              others: numberOf(reply[6]),
              repaired: reply[7] === 1 ? true : reply[7] === 0 ? false : reply[7],
            }
          : reply
      return checkBucketAnswer(answer, request)
    },
    bucketRead: (request, roundTrip) => view(readScript, request, [], roundTrip),
    bucketFill: (request, roundTrip) => view(fillScript, request, [String(newRecordId())], roundTrip),
  }
}

module.exports = { bucketOperations }
