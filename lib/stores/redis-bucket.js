'use strict'
// The fleet bucket's operations on Redis (lib/share/protocol.js: bucketTake, bucketRead,
// bucketFill), each one Lua script on one key; on a client that is not a cluster's, the takes for
// different keys asked in one event-loop turn go as one script call (TAKE_BATCH, bucketOperations).
// The record of (name, key) is one string at <prefix>{<name and key>}:b (lib/stores/record-key.js:
// redisBucketKey), its hash tag the (name, key) pair alone with its braces escaped: in the slot of
// the key's quota records, while the records of one name's keys spread over a cluster's slots, as
// the keys' traffic does.
// The string is binary, little-endian (Lua's struct.pack), 42 bytes and then an entry per
// instance the record lists (none for a key whose takes are spent by the calls that made them, a
// long tail of client addresses: 42 bytes fit Redis's one-allocation string, 44 at most):
//   C u32, R f64, tk f64, F f64, S f64, i u48   capacity, refill per second, tokens, fleet clock,
//                                               store time (TIME in ms, fractional), identity
//   per instance X: its name's length u16, the name, flags u8 (1: a slice, 2: e, 4: d), then
//     with a slice  o f64, a f64, l u32   tokens out, fleet ms of its last call (or of the call
//                                         that gave its slice one more margin), leaseMs
//     with d        d f64                 until when (fleet ms) X counts as hungry
//     e: its slice had that one more margin
// Doubles keep every number exactly (o is an integer up to 2**53 - 1). A script reads the record
// with one GET and writes it whole with one SET ... PX; a take on a record that lists no instance,
// by a call that reports nothing, runs the same steps on the fixed part alone (TAKE's fast path).
// A take also reads the key's block (one HGET of its block record, lib/stores/redis-blocks.js, in
// the same slot) and answers it while it lasts.
// Anything else under the name (a wrong length, a field out of range, another type) is not a
// record (docs/several-instances.md, failures: treated as lost); so is a record of the hash
// layout of releases before this one.

const { checkBucketAnswer, checkBucketUsage, unsoundBucketRecord, newRecordId, bucketTerms, SHARE_REFILL_MS, MAX_CLOCK_MS, MAX_BUCKET_CAPACITY, MAX_RECORD_ID } = require('../share/protocol.js')
const { redisBucketKey } = require('./record-key.js')
const { redisBlockKey } = require('./redis-blocks.js')
const { StoreBatch } = require('../share/store-call.js')

// The fleet bucket's terms (lib/share/protocol.js) written as Lua expressions.
const LUA = { add: (x, y) => `(${x} + ${y})`, mul: (x, y) => `(${x} * ${y})`, div: (x, y) => `(${x} / ${y})`, max: (x, y) => `math.max(${x}, ${y})` }

// The record's fixed part (struct.pack's format) and its length; fill's stand-in is 'full' and an
// identity (10 bytes), which the next take makes a full bucket of.
const HEAD = '<I4ddddI6'
const HEAD_BYTES = 42

// Plain values, no functions: the fast path of TAKE runs before COMMON defines any.
const CONSTANTS = `
local MAX_CLOCK_MS, MAX_CAPACITY, MAX_SAFE, MAX_ID = ${MAX_CLOCK_MS}, ${MAX_BUCKET_CAPACITY}, ${Number.MAX_SAFE_INTEGER}, ${MAX_RECORD_ID}
local HEAD, HEAD_BYTES = '${HEAD}', ${HEAD_BYTES}
`

const COMMON = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function text(x) return string.format('%.17g', x) end
local function write_off_after(lease) return ${bucketTerms.writeOffAfter(LUA, 'lease')} end
local function kept_after_take(C, R, longest) return math.ceil(${bucketTerms.keptAfterTake(LUA, 'C', 'R', 'longest')}) end
-- x a number (not nan, not infinite) in [low, high]; whole: an integer too.
local function within(x, low, high, whole)
  if type(x) ~= 'number' or x ~= x or x < low or x > high then return false end
  return not whole or math.floor(x) == x
end
-- Why the fixed part is not a bucket record's (a field out of range), or nil.
local function head_unsound(C, R, tk, F, S, i)
  if not within(C, 1, MAX_CAPACITY, true) then return 'C' end
  if not within(R, 0, math.huge, false) or R <= 0 or R == math.huge then return 'R' end
  if not within(tk, -MAX_SAFE, C, false) then return 'tk' end
  if not within(F, 0, MAX_CLOCK_MS, false) then return 'F' end
  if not within(S, 0, MAX_CLOCK_MS, false) then return 'S' end
  if not within(i, 1, MAX_ID - 1, true) then return 'i' end
  return nil
end
-- Why r is not a bucket record, or nil.
local function unsound(r)
  local why = head_unsound(r.C, r.R, r.tk, r.F, r.S, r.i)
  if why then return why end
  for y, n in pairs(r.o) do
    if not within(n, 0, MAX_SAFE, true) then return 'o:' .. y end
    if not within(r.a[y], 0, MAX_CLOCK_MS, false) then return 'a:' .. y end
    if not within(r.l[y], 1, MAX_CAPACITY, true) then return 'l:' .. y end
  end
  for y in pairs(r.e) do if not r.o[y] then return 'e:' .. y end end
  -- (d:X, until when X counts as hungry, is at most a few seconds past the fleet clock.)
  for y, d in pairs(r.d) do if not within(d, 0, MAX_CLOCK_MS + 60000, false) then return 'd:' .. y end end
  return nil
end
-- The record the string v holds, or nil and why it is not one.
local function decode(v)
  local n = #v
  if n < HEAD_BYTES then return nil, 'a string of ' .. n .. ' bytes' end
  local r = { o = {}, a = {}, l = {}, e = {}, d = {} }
  r.C, r.R, r.tk, r.F, r.S, r.i = struct.unpack(HEAD, v)
  local at, seen, count = HEAD_BYTES + 1, {}, 0
  while at <= n do
    count = count + 1
    local cut = 'instance entry ' .. count .. ' cut short'
    if at + 2 > n then return nil, cut end
    local flags_at = at + 2 + struct.unpack('<I2', v, at)
    if flags_at > n then return nil, cut end
    local y, flags = string.sub(v, at + 2, flags_at - 1), string.byte(v, flags_at)
    if seen[y] or flags == 0 or flags > 7 then return nil, 'instance entry ' .. count .. ' repeated or of no kind' end
    seen[y], at = true, flags_at + 1
    if flags % 2 == 1 then
      if at + 19 > n then return nil, cut end
      r.o[y], r.a[y], r.l[y] = struct.unpack('<ddI4', v, at)
      at = at + 20
    end
    if flags % 4 >= 2 then r.e[y] = 1 end
    if flags >= 4 then
      if at + 7 > n then return nil, cut end
      r.d[y] = struct.unpack('<d', v, at)
      at = at + 8
    end
  end
  local why = unsound(r)
  if why then return nil, 'field ' .. why .. ' not a number in range' end
  return r
end
local function encode(r)
  local parts = { struct.pack(HEAD, r.C, r.R, r.tk, r.F, r.S, r.i) }
  local listed = {}
  for y in pairs(r.o) do listed[y] = true end
  for y in pairs(r.d) do listed[y] = true end
  for y in pairs(listed) do
    local o, flags = r.o[y], 0
    if o then flags = flags + 1 end
    if r.e[y] then flags = flags + 2 end
    if r.d[y] then flags = flags + 4 end
    parts[#parts + 1] = struct.pack('<I2', #y) .. y .. string.char(flags)
    if o then parts[#parts + 1] = struct.pack('<ddI4', o, r.a[y], r.l[y]) end
    if r.d[y] then parts[#parts + 1] = struct.pack('<d', r.d[y]) end
  end
  return table.concat(parts)
end
-- fill's stand-in's identity, when v is one.
local function stand_in(v)
  if #v ~= 10 or string.sub(v, 1, 4) ~= 'full' then return nil end
  local i = struct.unpack('<I6', v, 5)
  if within(i, 1, MAX_ID - 1, true) then return i end
  return nil
end
-- The record: nil when there is none; false and why when the key holds something that is not a
-- bucket record (another type, a wrong length, a field out of range); { placeholder = true, i }
-- for fill's stand-in.
local function load(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return false, 'a key of another type' end
  if not v then return nil end
  local id = stand_in(v)
  if id then return { placeholder = true, i = id } end
  local r, why = decode(v)
  if not r then return false, why end
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

// TAKE's steps on one record, as Lua text: `key` the record's expression, `arg(n)` its nth
// argument's (TAKE's ARGV[n]; a batch's ARGV[b + n]). The fast path answers or falls through to
// the full path, which answers.
const takeArgs = (arg) => `
local capacity, refill, me, lease = tonumber(${arg(1)}), tonumber(${arg(2)}), ${arg(3)}, tonumber(${arg(4)})
local want, more, held, give = tonumber(${arg(5)}), tonumber(${arg(6)}), tonumber(${arg(7)}), tonumber(${arg(8)})
local charge, fleet, known = tonumber(${arg(9)}), tonumber(${arg(10)}), ${arg(11)}
local most, spent = tonumber(${arg(13)}), tonumber(${arg(14)})
`
const takeFast = (key, arg) => `
-- The fast path: the steps below for a record that lists no instance (its fixed part alone) and a
-- call that reports nothing (no held, give or charge) on the record it knew (or on any, knowing
-- none): no write-off, nothing of X's, no other instance out or hungry.
if type(v) == 'string' and #v == HEAD_BYTES and held == 0 and give == 0 and charge == 0 then
  local C, R, tk, F, S, i = struct.unpack(HEAD, v)
  -- (the fixed part sound, as head_unsound below judges it: C and i are integers as unpacked,
  -- and nan fails every comparison)
  if (known == '0' or tonumber(known) == i) and C >= 1 and C <= MAX_CAPACITY and R > 0 and R < math.huge and tk >= -MAX_SAFE and tk <= C
    and F >= 0 and F <= MAX_CLOCK_MS and S >= 0 and S <= MAX_CLOCK_MS and i >= 1 and i <= MAX_ID - 1 then
    -- 3. the fleet clock
    local by_caller = F + C / R * 1000
    if fleet >= 0 then by_caller = fleet end
    local moved = math.max(F, math.min(F + math.max(0, now - S), by_caller))
    -- 5. the refill, in the general path's pieces: up to when X last spent, and after
    local mark = math.min(moved, math.max(F, moved - spent))
    if mark > F and tk < C then tk = math.min(C, tk + (mark - F) * R / 1000) end
    if moved > mark and tk < C then tk = math.min(C, tk + (moved - mark) * R / 1000) end
    -- 5b. a plan change
    if C ~= capacity or R ~= refill then
      tk = math.min(capacity, tk + capacity - C)
      C, R = capacity, refill
    end
    -- 7. the take, no other instance sharing
    local least = want
    if more > 0 then least = math.max(want, 1) end
    local granted = 0
    if tk >= least then
      local extra = 0
      if more == 1 then local fair = math.min((tk - least) / 1, C / 2)
        extra = math.floor(math.min(fair, math.max(fair / 4, R * ${SHARE_REFILL_MS} / 1000))) elseif more == 2 then extra = math.floor((tk - least) / 1) end
      if most > 0 and least + extra > most then extra = math.max(0, most - least) end
      granted = least + extra
    end
    tk = tk - granted
    -- 8, 9. X found the bucket short, or keeps what it took: the record lists X (below); else
    -- it is the fixed part alone
    local short = (least > 0 and granted == 0) or (granted > 0 and tk < 1)
    if not short and (granted == 0 or ${arg(15)} == '1') then
      redis.call('SET', ${key}, struct.pack(HEAD, C, R, tk, moved, now, i), 'PX', math.ceil(${bucketTerms.keptAfterTake(LUA, 'C', 'R', 'lease')}))
      -- tokens, fleet clock and store time exactly: their 24 bytes as four 48-bit integers
      local w1, w2, w3, w4 = struct.unpack('<I6I6I6I6', struct.pack('<ddd', tk, moved, now))
      local reply = { granted, i, w1, w2, w3, w4 }
      if blocked > 0 then reply[7] = string.format('%.3f', blocked) end
      return reply
    end
  end
end
`
const takeFull = (key, arg) => `
-- 1. a missing record is made; one X knew comes back empty, and so does one that is not a
-- bucket record (repaired: its key is rewritten whole below); fill's stand-in becomes a full bucket
local r
if type(v) == 'table' then r = false
elseif not v then r = nil
else
  local id = stand_in(v)
  if id then r = { placeholder = true, i = id } else r = decode(v) or false end
end
local repaired = r == false
local created = false
if not r or r.placeholder then
  local tk, id = capacity, tonumber(${arg(12)})
  if r then id = r.i elseif known ~= '0' or repaired then tk = 0 end
  r = { C = capacity, R = refill, tk = tk, F = 0, S = now, i = id, o = {}, a = {}, l = {}, e = {}, d = {} }
  created = true
end
local lost = repaired or (known ~= '0' and (created or r.i ~= tonumber(known)))
-- 2. the request's capacity and refill: at 5b, once refilled at the old ones
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
-- 5b. a plan change: what was used stays used
if r.C ~= capacity or r.R ~= refill then
  r.tk = math.min(capacity - others - keep, r.tk + capacity - r.C)
  r.C, r.R = capacity, refill
end
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
if ${arg(15)} == '1' then recorded = keep end
if recorded > 0 then
  r.o[me], r.a[me], r.l[me], r.e[me] = recorded, r.F, lease, nil
else
  r.o[me], r.a[me], r.l[me], r.e[me] = nil, nil, nil, nil
end
-- 9. the record, whole (whatever the key held), and its expiry
local longest = lease
for _, l in pairs(r.l) do longest = math.max(longest, l) end
redis.call('SET', ${key}, encode(r), 'PX', kept_after_take(r.C, r.R, longest))
local reply = { granted, mine, text(r.tk), text(r.F), text(now), r.i, k, repaired and 1 or 0 }
if blocked > 0 then reply[9] = string.format('%.3f', blocked) end
return reply
`
const argvAt = (n) => `ARGV[${n}]`
// The key's block left at store time \`now\` (0: none), from its block record (lib/stores/redis-blocks.js),
// which shares the bucket record's hash tag: the take answers it in its own round trip.
const takeBlock = (blockKey) => `
local blocked = tonumber(redis.pcall('HGET', ${blockKey}, 'u'))
if blocked and blocked > now then blocked = blocked - now else blocked = 0 end
`

// KEYS[1] the record, KEYS[2] the key's block record. ARGV: capacity, refillPerSecond, instance,
// leaseMs, want, more, held, give, charge, fleetMs, recordId ('0': none), newId, most (0: no
// limit), spentMs, spend ('1': not recorded). Answers { granted, held, tokens, fleetMs, now, identity, others, repaired }, or from
// the fast path { granted, identity, and tokens, fleetMs, now as four 48-bit words } (held =
// granted, others 0): formatting a float as exact text costs a script a microsecond each. Either
// has the key's block left (ms, as text) after it while the key is blocked.
const TAKE = `${CONSTANTS}${takeArgs(argvAt)}local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local v = redis.pcall('GET', KEYS[1])
${takeBlock('KEYS[2]')}${takeFast('KEYS[1]', argvAt)}${COMMON}${takeFull('KEYS[1]', argvAt)}`

// Arguments of one take in TAKE_BATCH (bucketTake's args).
const TAKE_ARGS = 15

// KEYS the records of different keys, each followed by its block record; ARGV each one's TAKE
// arguments in turn (TAKE_ARGS each).
// TIME read once, then each record's take as TAKE runs it; answers TAKE's answer of each, in turn.
const TAKE_BATCH = `${CONSTANTS}${COMMON}
local now
local function take(key, block, b)
${takeArgs((n) => `ARGV[b + ${n}]`)}  local v = redis.pcall('GET', key)
${takeBlock('block')}${takeFast('key', (n) => `ARGV[b + ${n}]`)}${takeFull('key', (n) => `ARGV[b + ${n}]`)}end
local clock = redis.call('TIME')
now = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
local answers = {}
for j = 1, #KEYS / 2 do answers[j] = take(KEYS[2 * j - 1], KEYS[2 * j], (j - 1) * ${TAKE_ARGS}) end
return answers
`

// KEYS[1] the record. Answers the view, or {} when there is none. Writes nothing.
const READ = `${CONSTANTS}${COMMON}
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
// its C and R, new identity, when those two read (the fixed part's, or a hash's fields C and R);
// else by fill's stand-in, which the next take makes a full bucket of (answered as no record).
// Either keeps the key's TTL, or gets one.
const FILL = `${CONSTANTS}${COMMON}
local r = load(KEYS[1])
if r == nil then return {} end
local ttl = redis.call('PTTL', KEYS[1])
if not r or r.placeholder then
  local C, R = nil, nil
  local kind = redis.call('TYPE', KEYS[1])['ok']
  if kind == 'string' then
    local v = redis.call('GET', KEYS[1])
    if #v >= HEAD_BYTES then C, R = struct.unpack('<I4d', v) end
  elseif kind == 'hash' then
    C, R = tonumber(redis.call('HGET', KEYS[1], 'C')), tonumber(redis.call('HGET', KEYS[1], 'R'))
  end
  local id = tonumber(ARGV[1])
  if r and r.placeholder then id = r.i end
  if not within(C, 1, MAX_CAPACITY, true) or not within(R, 0, math.huge, false) or R <= 0 or R == math.huge then
    redis.call('SET', KEYS[1], 'full' .. struct.pack('<I6', id), 'PX', math.max(ttl, kept_after_take(0, 1, 0)))
    return {}
  end
  r = { C = C, R = R, tk = C, F = 0, S = now_ms(), i = id, o = {}, a = {}, l = {}, e = {}, d = {} }
  if ttl <= 0 then ttl = kept_after_take(C, R, 0) end
end
write_off(r, nil, r.F)
r.tk = r.C - out_of(r, nil)
if ttl > 0 then redis.call('SET', KEYS[1], encode(r), 'PX', ttl) else redis.call('SET', KEYS[1], encode(r)) end
return view(KEYS[1], r, r.tk)
`

/** A reply's number: Lua integers arrive as numbers, floats as text. */
function numberOf(value) {
  if (typeof value === 'number') return value
  if (typeof value === 'string' && value.trim() !== '') return Number(value)
  return Number.NaN
}

const WORD = 2 ** 48

/** Three doubles from the four 48-bit words (little-endian) of their 24 bytes; null when a word is not one. */
function doublesOf(words) {
  if (!words.every((w) => Number.isSafeInteger(w) && w >= 0 && w < WORD)) return null
  const bytes = Buffer.alloc(24)
  words.forEach((w, at) => bytes.writeUIntLE(w, at * 6, 6))
  return [bytes.readDoubleLE(0), bytes.readDoubleLE(8), bytes.readDoubleLE(16)]
}

/** TAKE's reply as bucketTake answers it: the whole one, or the fast path's (nothing held before, no other holder). */
function answerOf(reply) {
  if (!Array.isArray(reply)) return reply
  if (reply.length === 6 || reply.length === 7) {
    const doubles = doublesOf(reply.slice(2, 6))
    if (doubles === null) return reply
    const granted = numberOf(reply[0])
    const [tokens, fleetMs, storeNowMs] = doubles
    return withBlock({ granted, held: granted, tokens, fleetMs, storeNowMs, recordId: numberOf(reply[1]), others: 0, repaired: false }, reply[6])
  }
  if (reply.length !== 8 && reply.length !== 9) return reply
  return withBlock({
    granted: numberOf(reply[0]),
    held: numberOf(reply[1]),
    tokens: numberOf(reply[2]),
    fleetMs: numberOf(reply[3]),
    storeNowMs: numberOf(reply[4]),
    recordId: numberOf(reply[5]),
    others: numberOf(reply[6]),
    repaired: reply[7] === 1 ? true : reply[7] === 0 ? false : reply[7],
  }, reply[8])
}

/** A take's answer with the key's block left, when the reply has one (the script sends only a block that lasts: anything else is refused). */
function withBlock(answer, blocked) {
  if (blocked === undefined) return answer
  const blockedMs = numberOf(blocked)
  answer.blockedMs = blockedMs > 0 ? blockedMs : Number.NaN
  return answer
}

// Most takes one batch carries (its records' keys and 15 arguments each in one EVALSHA): a take
// on the full path runs about 25 µs in the script, so 24 of them keep a call under 1 ms (no store
// operation of ours may hold Redis longer), while most of the saving is in the first few.
const MAX_BATCH = 24

/**
 * The three operations for a redisStore: `evaluate(script, keys, args, roundTrip)` runs a script
 * (EVALSHA, EVAL on NOSCRIPT) on keys of one slot; `script(source)` makes { source, sha }.
 * `batches`: takes for different keys asked in one event-loop turn go as one TAKE_BATCH (a client
 * that is not a cluster's: there the records of different keys are in different slots).
 */
function bucketOperations({ prefix, evaluate, script, batches = false }) {
  const takeScript = script(TAKE)
  const batchScript = script(TAKE_BATCH)
  const readScript = script(READ)
  const fillScript = script(FILL)
  const recordOf = (name, key) => prefix + redisBucketKey(name, key)
  const blockOf = (name, key) => prefix + redisBlockKey(name, key)

  // Takes asked since the last flush, in batches of at most MAX_BATCH distinct records, in order.
  let queued = []

  /** Queues a take for the next flush (setImmediate: the timers and I/O of one loop iteration join one batch); resolves to its reply. */
  function queue(record, block, args, roundTrip) {
    if (queued.length === 0) setImmediate(flush)
    let batch = queued.at(-1)
    if (batch === undefined || batch.takes.length === MAX_BATCH || batch.records.has(record)) {
      batch = { records: new Set(), takes: [], counted: new StoreBatch(), tripped: [] }
      queued.push(batch)
    }
    batch.records.add(record)
    // A call sent through the store-call primitive rides in the batch's round trips; a bare caller's roundTrip hears of each.
    if (typeof roundTrip?.rideIn === 'function') roundTrip.rideIn(batch.counted)
    else if (typeof roundTrip === 'function') batch.tripped.push(roundTrip)
    return new Promise((resolve, reject) => batch.takes.push({ record, block, args, resolve, reject }))
  }

  function flush() {
    const sending = queued
    queued = []
    for (const batch of sending) send(batch)
  }

  /** One round trip for a batch (a lone take as TAKE); each take gets its own reply, or the call's error. */
  async function send({ takes, counted, tripped }) {
    const roundTrip = () => {
      counted.trip()
      for (const trip of tripped) trip()
    }
    try {
      if (takes.length === 1) {
        takes[0].resolve(await evaluate(takeScript, [takes[0].record, takes[0].block], takes[0].args, roundTrip))
        return
      }
      const replies = await evaluate(batchScript, takes.flatMap((take) => [take.record, take.block]), takes.flatMap((take) => take.args), roundTrip)
      // (An answer that is not one reply a take is each take's reply, which its check refuses.)
      const whole = Array.isArray(replies) && replies.length === takes.length
      takes.forEach((take, at) => take.resolve(whole ? replies[at] : replies))
    } catch (error) {
      for (const take of takes) take.reject(error)
    }
  }

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
      const record = recordOf(name, key)
      const block = blockOf(name, key)
      const reply = batches ? await queue(record, block, args, roundTrip) : await evaluate(takeScript, [record, block], args, roundTrip)
      return checkBucketAnswer(answerOf(reply), request)
    },
    bucketRead: (request, roundTrip) => view(readScript, request, [], roundTrip),
    bucketFill: (request, roundTrip) => view(fillScript, request, [String(newRecordId())], roundTrip),
  }
}

module.exports = { bucketOperations }
