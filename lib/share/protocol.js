'use strict'
// The one shape every quota store has, whatever is behind it (Redis, MongoDB). A store is made
// only by redisStore()/mongoStore(); a shared limiter refuses anything else, so its operations are
// kept out of reach (a WeakMap keyed by the public store object), not as properties a caller could
// forge or replace.
//
// Operations (every one resolves or rejects; none throws synchronously). Each takes an optional
// second argument, `roundTrip()`, which it calls as it sends each request to the store
// (lib/share/store-call.js counts round trips: stats().store.calls, docs/metrics.md). Each checks
// its answer before it answers (checkReserveAnswer, checkRecordAnswer, checkBucketAnswer,
// checkBucketUsage below); its callers read it as it is:
//
//   reserve({ name, key, periodId, limit, leaseUnits, lacking, charge, expiresAtMs,
//             instance, held, owned, recordId })
//     -> Promise<{ granted, unreserved, recordId }>
//     One atomic step on the record of (name, key, periodId), whose count and extra start at 0:
//       lost   = recordId != 0 and the record is not the one of identity recordId (gone, remade)
//       count += charge                      (units a failOpen decision admitted earlier)
//       count += owned if lost               (what this instance reserved in the lost record)
//       room   = max(0, limit + extra - count)
//       want   = max(lacking, min(leaseUnits, ceil(room / 8)))
//       granted = room >= want ? want : 0    (never reserve past the allowance; never less than lacking)
//       count += granted
//       held[instance] = held + granted      (what the instance holds unadmitted after the call)
//       the record keeps `limit` (when the call reserves: leaseUnits or lacking > 0) and expires
//       at expiresAtMs (the period's end, plus a margin the store chooses)
//     and answers granted, the unreserved room left after it (room - granted) and the record's
//     identity (a positive integer made when the record is created; 0: no record was written).
//     lacking = units the waiting call still needs beyond the local reservation (0 for a
//     background refill, in which case want is at least 1 when room > 0).
//
//   giveBack({ name, key, periodId, units, instance, recordId }) -> Promise<void>
//     If the record exists and is the one of identity recordId (any, for recordId 0):
//     count = max(0, count - units), held[instance] = 0. Nothing otherwise.
//
//   The operator's view (quotaAdmin, lib/stores/admin.js), each one atomic step on one record,
//   answering the record after it as { limit, extra, used, held, expiresAt } (held: summed over
//   the instances) or null when there is no record:
//   usage({ name, key, periodId })
//   grant({ name, key, periodId, units, recordId })  extra += units; a missing record is created
//     (identity recordId, count 0, kept KEEP_GRANTED_MS until a reservation sets its period end).
//     When limit (0 if none yet) + extra + units would pass Number.MAX_SAFE_INTEGER, nothing is
//     written and it answers { refused: limit + extra } instead of the record.
//   reset({ name, key, periodId })                   count = sum of held, extra = 0
//
// Blocks (docs/blocking.md): one block record of (name, key), { until: store ms, level, ended:
// store ms }, forgotten resetAfterMs after its block ends. Store time `now` as the fleet bucket's.
//   blockSet({ name, key, forMs, levels, resetAfterMs }) -> Promise<{ blockedMs, level }>
//     levels: undefined for a manual block (until = max(until, now + forMs), level unchanged), or
//     the escalating list of an automatic one: level = 0 if now - ended >= resetAfterMs;
//     until = max(until, now + levels[level]); level = min(level + 1, #levels - 1).
//     ended = max(ended, until); the record expires at ended + resetAfterMs.
//   blockClear({ name, key }) -> { blockedMs (what was left before), level: 0 }: the record deleted
//   blockRead({ name, key }) -> { blockedMs, level } ({ 0, 0 } without a record)
//   keys({ name, blocked, limit }) -> [{ key, blockedMs }]: the keys of the name with a record,
//     read incrementally (Redis SCAN, a MongoDB index range), at most limit of them
//   reserve's answer (and bucketTake's) carries blockedMs, the key's block left by store time,
//   while there is one (absent: none), read in the call's own round trip.
//
// Every number crossing is a non-negative safe integer; an answer that is not one is the store's
// fault (ERR_STORE_RESPONSE), checked by checkReserveAnswer below. A record holding more than
// Number.MAX_SAFE_INTEGER (extra, count) is answered clamped to it (`clamped`), and reserved from
// with its room clamped alike, never refused for good.
//
// The fleet bucket, one bucket in the store (share.bucket, docs/several-instances.md): the record
// of (name, key) is the bucket itself, refilled by a fleet clock kept in it; instances take slices
// of its tokens. Store time `now` = the store's own clock in ms (Redis TIME, fractional allowed;
// MongoDB $$NOW). Record fields:
//   C   capacity (integer 1..2**31)          R   refill per second (> 0)
//   tk  tokens in the store (a float; below zero after a failOpen charge)
//   F   the fleet clock (ms) at the record's last move      S   store time at that move
//   id  identity (a positive integer < 2**48, made when the record is created)
//   per instance X: o:X tokens out to X in its slice; a:X the fleet clock when X's last call
//     reached the store (or the fleet clock when its slice had one more margin, step 4); l:X X's
//     leaseMs; e:X set when X's slice had that one more margin (absent: not); d:X until when (fleet
//     ms) X counts as hungry: it found the bucket short (absent: not hungry)
//   out = sum of o:Y;  writeOff(Y) = a:Y + WRITE_OFF_FACTOR * l:Y + WRITE_OFF_MARGIN_MS (fleet ms)
//   A record is sound when C is an integer in 1..2**31, R a finite number > 0, tk a finite number
//   in [-(2**53 - 1), C], F and S finite numbers in [0, 2**48] (MAX_CLOCK_MS), id an integer in
//   [1, 2**48), and each instance listed has o:X an integer in [0, 2**53 - 1], e:X 1 when present,
//   a:X in [0, 2**48] and l:X an integer in 1..2**31. Anything else under the record's name (a
//   field missing, text, nan, an infinity, 1e300; on Redis a key of another type) is not a record
//   (docs/several-instances.md, failures): a take treats it as lost (step 1), the operator's view names it.
//
//   bucketTake({ name, key, capacity, refillPerSecond, instance, leaseMs, want, more, held, give,
//                charge, fleetMs, recordId, newId })
//     -> Promise<{ granted, held, tokens, fleetMs, storeNowMs, recordId, others, repaired }>
//     want     integer >= 0: take at least this or nothing (0: a give-back or renewal only)
//     more     0: nothing beyond want; 1: a fair share beyond it; 2: everything there is
//     held     unspent tokens of X's slice that X keeps (their lease renewed)
//     give     unspent tokens X gives back now (a number >= 0)
//     charge   units X admitted with failOpen while the store was away
//     fleetMs  X's fleet-clock reading: its previous answer's fleetMs plus X's own monotonic ms
//              between the two sends; -1: no previous answered call for the key
//     recordId the identity of the record X last dealt with for the key (0: none)
//     most     the most the take brings (0: no limit beyond the sizing below; at least want)
//     spentMs  how long before the call (X's monotonic ms, >= 0) X last spent from its slice:
//              what X spent of it was spent by then (optional, 0)
//     spend    true: the asking call spends what this take grants at once (a take of only what it
//              lacks; optional, false), so the store records none of it as out to X
//     newId    an identity for the record if this call creates it (optional: the store makes
//              one when absent), so a store script needs no randomness
//   One atomic step:
//     1. repaired = the record's name holds something that is not a sound record; it is dropped
//        (rewritten whole at the end of the step, whatever its type was)
//        no record: create it: C = capacity, R = refillPerSecond, id = newId, F = 0, S = now,
//        tk = recordId != 0 or repaired ? 0 : capacity    (a record X knew and the store lost, or
//        one that was not a record, comes back EMPTY, never refilled by what it held)
//        fill's stand-in (id only, marked full): made so, keeping its id, with tk = capacity
//        lost = repaired or (recordId != 0 and (the record was just created or id != recordId))
//     2. C != capacity or R != refillPerSecond: a plan change, taken at step 5b
//     3. the fleet clock moves: byStore = F + max(0, now - S)
//          byCaller = fleetMs >= 0 and not lost ? fleetMs : F + C / R * 1000
//          F' = max(F, min(byStore, byCaller));  the refill waits for steps 4 and 5
//     4. write-off: every other instance Y with o:Y > 0 and writeOff(Y) < F':
//          F' - F > 1.1 * l:Y + 1000 and no e:Y (this move alone passed the margin: the key left
//          alone, or the store away, that long): one more margin, once: a:Y = F', e:Y = 1;
//          else written off, spent for good: o:Y, a:Y, l:Y, e:Y deleted (tokens Y reports later
//          do not go back: once the room they held has been refilled, they would be admitted
//          twice).
//        gone = the tokens so written off, goneUntil = the latest writeOff(Y) among them (F if none)
//     5. X's report: prev = lost ? 0 : o:X  (0 too when X's slice was written off)
//          keep = min(held, prev);  back = min(give, prev - keep);  o:X = keep
//        then the refill from F to F', piece by piece between the marks
//          spentUntil = clamp(F' - spentMs),  goneUntil = clamp(goneUntil)   (clamp: into [F, F'])
//        over each piece [a, b] (a < b):  room = C - others - (a < goneUntil ? gone : 0)
//          - (a < spentUntil ? prev : keep + back),  others = sum of o:Y of the others after step 4;
//          tk < room: tk = min(room, tk + (b - a) * R / 1000) (never lowers tk)
//        (a slice counts as out for the refill until it can no longer be spent from: X's until it
//        last spent from it, a written-off one until its margin; counting a slice spent long ago
//        would cost the refill, not counting one spent just now would let the bucket refill under
//        it, and X spend it and a full bucket at once);  F = F', S = now;
//        tk = min(C - others - keep, tk + back)
//     5b. a plan change (step 2), refilled at the old C and R up to now: what was used stays
//        used: tk = min(capacity - others - keep, tk + capacity - C);  C = capacity,
//        R = refillPerSecond
//     6. charge: tk -= charge
//     7. take: k = the number of other instances with o:Y > 0;  hungry = the number of other
//          instances with d:Y >= F (the others' older d:Y deleted);  s = the number
//          of other instances in either;  w = max(want, more > 0 ? 1 : 0)
//          tk < w: granted = 0
//          else granted = w + (more == 0 ? 0 : more == 1 ? floor(min(fair, max(fair / 4, R * SHARE_REFILL_MS / 1000)))
//                                                     : floor((tk - w) / (hungry + 1)))
//            with fair = min((tk - w) / (s + 1), C / (s + 2))
//          (a fair share: of the capacity while the bucket is full, so busy processes sharing it
//          out take a few slices each, not a shrinking fraction every time; of what is left when
//          it runs low, so that no process ends a burst holding what the others lack; a quarter
//          of it, so that a burst spread at random over the processes strands little in their
//          slices, unless the bucket refills that much within SHARE_REFILL_MS; and of a
//          saturated bucket's refill, among the processes that found it short lately, so that
//          whoever asks first after a refill does not take it all, period after period)
//          most > 0: granted = min(granted, max(w, most))
//          tk -= granted;  o:X += granted
//          d:X = F + hungerMs(leaseMs, C, R, tk) when X found the bucket short (w > 0 and
//          granted = 0, or granted > 0 and tk < 1 after it), else deleted
//     8. spend (the asking call spends what this take grants at once): o:X -= granted, none of it
//        recorded (the answer's held still counts it; X lets what the call did not spend lapse)
//        o:X > 0: a:X = F, l:X = leaseMs, e:X deleted;  else o:X, a:X, l:X, e:X deleted (d:X kept)
//     9. the record expires max(C / R * 1000, WRITE_OFF_FACTOR * L + WRITE_OFF_MARGIN_MS) + RECORD_KEPT_AFTER_MS
//        ms of store time from now (bucketTerms.keptAfterTake),
//        L the longest leaseMs of the instances it lists (X's included)
//   and answers granted, held = o:X, tokens = tk, fleetMs = F, storeNowMs = now, recordId = id,
//   others = k, and blockedMs as reserve's does (the key's block left by store time, read in
//   the take's own round trip; absent: none). checkBucketAnswer below refuses anything else
//   (ERR_STORE_RESPONSE).
//   X learns that its slice was written off from the answer: held = o:X is then only what this
//   call granted, and X keeps no more than held - granted of its slice. The answer's check is
//   held <= request.held + granted, not held <= capacity: after a capacity cut an instance may
//   keep a slice larger than the new capacity (step 5b has made tk negative by as much, so
//   tk + out <= C still holds and the refill pays it back).
//   The answer also says repaired (a boolean; absent: false): the driver emits one
//   QUOTA_CLOCK_STORE_RECORD_REPAIRED warning for each answer that says so; a repaired record is
//   sound after, so each corruption warns once.
//
//   The operator's view (quotaAdmin: bucket, fill), answering { capacity, refillPerSecond, tokens,
//   out, expiresAt (ms since the epoch) } or null when there is no record:
//   bucketRead({ name, key }) moves nothing: G = F + min(max(0, now - S), C / R * 1000);
//     out = sum of o:Y over Y with writeOff(Y) >= G;
//     tokens = tk >= C - out ? tk : min(C - out, tk + (G - F) * R / 1000)
//     a record that is not sound: ERR_STORE_RESPONSE naming it (unsoundBucketRecord); a stand-in: null
//   bucketFill({ name, key }) one atomic step: step 4 judged at F (F not moved); tk = C - out.
//     A record that is not sound is replaced: C and R sound: by { C, R, tk = C, F = 0, S = now,
//     a new id, no instances }; else by fill's stand-in (a new id, marked full: answered as null),
//     which the next take makes a full bucket of. Either keeps the record's TTL (or gets one).

const { randomInt } = require('node:crypto')
const { QuotaClockError } = require('../native/errors.js')
const { CONTRACT } = require('../native/contract.js')

const operations = new WeakMap()

// How long a record made by a grant (no reservation yet) is kept: 400 days.
const KEEP_GRANTED_MS = 400 * 86_400_000
// A quota record is kept at least this long after a write that reserves (10 minutes), even when
// the period's end the caller sent has passed by the store's clock (the caller's clock runs
// behind): deleted at once, every later reservation would start again from 0.
const RECORD_GRACE_MS = 600_000
// The fleet bucket's terms, the core's (src/keyed/slices.rs) read from the native contract: a slice
// is written off WRITE_OFF_FACTOR * leaseMs + WRITE_OFF_MARGIN_MS fleet ms after its call reached
// the store, and a record is kept max(C / R s, the longest write-off) + RECORD_KEPT_AFTER_MS of
// store time after a take.
const {
  writeOffFactor: WRITE_OFF_FACTOR,
  writeOffMarginMs: WRITE_OFF_MARGIN_MS,
  recordKeptAfterMs: RECORD_KEPT_AFTER_MS,
  shareRefillMs: SHARE_REFILL_MS,
} = CONTRACT.fleetBucket
// (SHARE_REFILL_MS: a busy key's share, step 7, is a quarter of a fair share, but not less than
// what the bucket refills in that many ms.)

// How long (fleet ms) an instance that found the bucket short counts among those that share its
// refill (step 7): its local denial (src/keyed/slices.rs, local_denial_ms: until the bucket holds
// a token, at least 1.3 times min(leaseMs / 8, 1 s, C / (2R)), at most 1 s), with room for its
// next call to reach the store (a quarter more, and 50 ms). The store scripts write it out.
function hungerMs(leaseMs, capacity, refillPerSecond, tokens) {
  const floorMs = Math.min(leaseMs / 8, 1_000, (capacity / refillPerSecond) * 500)
  const waitMs = (Math.max(0, 1 - tokens) * 1_000) / refillPerSecond
  return Math.min(Math.max(waitMs, Math.min(1.3 * floorMs, 1_000)), 1_000) * 1.25 + 50
}

/**
 * The two formulas of the fleet bucket's terms, written once over an arithmetic `a` (`add`, `mul`,
 * `div`, `max` on its own values): JS numbers here (JS_ARITHMETIC), Lua expressions in
 * lib/stores/redis-bucket.js, pipeline expressions in lib/stores/mongo-bucket.js.
 */
const bucketTerms = {
  /** Fleet ms after a slice's call reached the store when the store writes it off. */
  writeOffAfter: (a, leaseMs) => a.add(a.mul(WRITE_OFF_FACTOR, leaseMs), WRITE_OFF_MARGIN_MS),
  /** How long the store keeps a bucket record after a take (step 9). */
  keptAfterTake: (a, capacity, refillPerSecond, longestLeaseMs) =>
    a.add(a.max(a.mul(a.div(capacity, refillPerSecond), 1000), bucketTerms.writeOffAfter(a, longestLeaseMs)), RECORD_KEPT_AFTER_MS),
}

const JS_ARITHMETIC = { add: (x, y) => x + y, mul: (x, y) => x * y, div: (x, y) => x / y, max: Math.max }

/** Fleet ms after a slice's call reached the store when the store writes it off. */
function writeOffAfterMs(leaseMs) {
  return bucketTerms.writeOffAfter(JS_ARITHMETIC, leaseMs)
}

/** How long the store keeps a bucket record after a take (step 9). */
function bucketKeptMs(capacity, refillPerSecond, longestLeaseMs) {
  return bucketTerms.keptAfterTake(JS_ARITHMETIC, capacity, refillPerSecond, longestLeaseMs)
}
// Record identities: random positive integers below 2^48.
const MAX_RECORD_ID = 2 ** 48
// The largest fleet clock and store time (ms) a sound bucket record holds: 2^48 ms is 8,900
// years, and a millisecond added to it is still exact (a record with F = 1e300 would never refill).
const MAX_CLOCK_MS = 2 ** 48

/** A new record identity. */
function newRecordId() {
  return randomInt(1, MAX_RECORD_ID)
}

/** Makes the public store object for a set of operations; kind is 'redis' or 'mongo'. */
function makeQuotaStore(kind, ops) {
  const store = Object.freeze({ kind })
  operations.set(store, ops)
  return store
}

function isQuotaStore(value) {
  return typeof value === 'object' && value !== null && operations.has(value)
}

/** The operations behind a store made by makeQuotaStore, or undefined. */
function storeOperations(store) {
  return operations.get(store)
}

/**
 * A request's instance fields, defaulted for a caller that does not report them (instance '':
 * no held to record; held, owned and recordId 0).
 */
function instanceFields({ instance = '', held = 0, owned = 0, recordId = 0 }) {
  return { instance, held, owned, recordId }
}

/**
 * Checks a reserve answer; returns { granted, unreserved, recordId } or throws
 * ERR_STORE_RESPONSE (an answer without recordId names no record: 0).
 */
function checkReserveAnswer(answer, request) {
  const granted = answer && answer.granted
  const unreserved = answer && answer.unreserved
  const recordId = answer && answer.recordId !== undefined ? answer.recordId : 0
  const ok =
    Number.isSafeInteger(granted) && granted >= 0 && Number.isSafeInteger(unreserved) && unreserved >= 0 && Number.isSafeInteger(recordId) && recordId >= 0
  // A grant is nothing, or at least what the call lacks and at most what it asked for.
  if (!ok || (granted > 0 && (granted < request.lacking || granted > Math.max(request.lacking, request.leaseUnits)))) {
    throw new QuotaClockError(
      'ERR_STORE_RESPONSE',
      `quota store answered a reservation for "${request.name}" with ${describe(answer)}; ` +
        'expected { granted, unreserved, recordId } as non-negative safe integers'
    )
  }
  const blockedMs = answer.blockedMs
  if (blockedMs === undefined) return { granted, unreserved, recordId }
  if (!isAmount(blockedMs)) throw badAnswer('a reservation (its block)', request.name, answer, 'blockedMs as a non-negative number of ms')
  return { granted, unreserved, recordId, blockedMs }
}

/** A block record's answer (blockSet, blockClear, blockRead): { blockedMs, level }, checked. */
function checkBlockAnswer(answer, name) {
  if (answer === null || typeof answer !== 'object' || !isAmount(answer.blockedMs) || !isCount(answer.level)) {
    throw badAnswer('a block', name, answer, '{ blockedMs, level } as non-negative numbers')
  }
  return { blockedMs: answer.blockedMs, level: answer.level }
}

/** A keys() answer: [{ key, blockedMs }], checked. */
function checkKeysAnswer(answer, name) {
  if (!Array.isArray(answer) || !answer.every((entry) => entry !== null && typeof entry === 'object' && typeof entry.key === 'string' && isAmount(entry.blockedMs))) {
    throw badAnswer('keys', name, answer, 'an array of { key, blockedMs }')
  }
  return answer
}

function badAnswer(what, name, answer, expected) {
  return new QuotaClockError('ERR_STORE_RESPONSE', `quota store answered ${what} for "${name}" with ${describe(answer)}; expected ${expected}`)
}

const isCount = (value) => Number.isSafeInteger(value) && value >= 0
const isAmount = (value) => typeof value === 'number' && Number.isFinite(value) && value >= 0

// The largest capacity a shared bucket may have (2**31).
const MAX_BUCKET_CAPACITY = 2 ** 31

/**
 * Checks a bucketTake answer against its request; returns { granted, held, tokens, fleetMs,
 * storeNowMs, recordId, others } or throws ERR_STORE_RESPONSE.
 */
function checkBucketAnswer(answer, request) {
  const a = typeof answer === 'object' && answer !== null ? answer : {}
  const { granted, held, tokens, fleetMs, storeNowMs, recordId, others, blockedMs } = a
  const repaired = a.repaired === undefined ? false : a.repaired
  const capacity = request.capacity
  const ok =
    typeof repaired === 'boolean' && isCount(granted) && isCount(held) && isCount(others) && (blockedMs === undefined || isAmount(blockedMs)) &&
    (granted === 0 || granted >= request.want) && granted <= capacity && held >= granted && held - granted <= request.held &&
    typeof tokens === 'number' && Number.isFinite(tokens) && tokens <= capacity &&
    isAmount(fleetMs) && isAmount(storeNowMs) && isCount(recordId) && recordId > 0
  if (!ok) {
    throw badAnswer('a bucket request', request.name, answer,
      '{ granted, held, tokens, fleetMs, storeNowMs, recordId, others, repaired, blockedMs? }: granted, held and others non-negative safe integers, granted 0 or at least want and at most capacity, held from granted to granted plus the held kept, tokens finite and at most capacity, fleetMs and storeNowMs finite non-negative, recordId a positive integer, repaired a boolean, blockedMs a non-negative number of ms')
  }
  const checked = { granted, held, tokens, fleetMs, storeNowMs, recordId, others, repaired }
  if (blockedMs > 0) checked.blockedMs = blockedMs
  return checked
}

/**
 * The operator's view of a bucket record that is not one (`why`: what is wrong): ERR_STORE_RESPONSE
 * naming the record (`where`: its key or document id in the store).
 */
function unsoundBucketRecord(store, where, name, key, why) {
  return new QuotaClockError(
    'ERR_STORE_RESPONSE',
    `quota store (${store}) holds ${describe(where)} for the bucket of "${name}" key ${describe(key)}, and it is not a bucket record (${why}): ` +
      'the next take of the key replaces it with an empty bucket of a new identity, and fill (quotaAdmin.fill, quota-clock-source fill) with a full one',
  )
}

/**
 * Checks a bucket as the operator's view answers it: { capacity, refillPerSecond, tokens, out,
 * expiresAt } or null (no record).
 */
function checkBucketUsage(answer, name) {
  if (answer === null) return null
  const a = typeof answer === 'object' ? answer : {}
  const { capacity, refillPerSecond, tokens, out, expiresAt } = a
  const ok =
    Number.isSafeInteger(capacity) && capacity >= 1 && capacity <= MAX_BUCKET_CAPACITY &&
    typeof refillPerSecond === 'number' && Number.isFinite(refillPerSecond) && refillPerSecond > 0 &&
    typeof tokens === 'number' && Number.isFinite(tokens) && tokens <= capacity &&
    isCount(out) && (expiresAt === null || isCount(expiresAt))
  if (!ok) {
    throw badAnswer('a bucket', name, answer,
      '{ capacity, refillPerSecond, tokens, out, expiresAt }: capacity an integer from 1 to 2**31, refillPerSecond finite and positive, tokens finite and at most capacity, out a non-negative safe integer, expiresAt one or null')
  }
  return { capacity, refillPerSecond, tokens, out, expiresAt }
}

/** Checks a record as the operator's view answers it: { limit, extra, used, held, expiresAt } or null. */
function checkRecordAnswer(answer, name) {
  if (answer === null) return null
  const count = (value) => Number.isSafeInteger(value) && value >= 0
  const ok =
    typeof answer === 'object' &&
    (answer.limit === null || count(answer.limit)) &&
    count(answer.extra) &&
    count(answer.used) &&
    count(answer.held) &&
    (answer.expiresAt === null || count(answer.expiresAt))
  if (!ok) {
    throw new QuotaClockError(
      'ERR_STORE_RESPONSE',
      `quota store answered a record of "${name}" with ${describe(answer)}; expected { limit, extra, used, held, expiresAt } as non-negative safe integers (limit and expiresAt may be null)`
    )
  }
  return { limit: answer.limit, extra: answer.extra, used: answer.used, held: answer.held, expiresAt: answer.expiresAt }
}

/**
 * A store's number as a JS number: a non-negative integer (or its decimal string, as the Redis
 * scripts answer large ones) at most Number.MAX_SAFE_INTEGER, larger ones clamped to it (a record
 * an older version let pass it is answered, not refused); anything else as it came, for the checks.
 */
function clamped(value) {
  const number = typeof value === 'string' && /^[0-9]{1,400}$/.test(value) ? Number(value) : value
  return Number.isInteger(number) && number >= 0 ? Math.min(number, Number.MAX_SAFE_INTEGER) : value
}

/** Checks a grant's refusal, { refused: the record's limit + extra }, or throws ERR_STORE_RESPONSE. */
function checkRefusedGrant(answer, name) {
  if (!(Number.isSafeInteger(answer.refused) && answer.refused >= 0)) {
    throw new QuotaClockError('ERR_STORE_RESPONSE', `quota store refused a grant for "${name}" with an allowance of ${describe(answer.refused)}; expected a non-negative safe integer`)
  }
  return { refused: answer.refused }
}

function describe(value) {
  try {
    const text = JSON.stringify(value)
    if (typeof text === 'string') return text.length > 200 ? `${text.slice(0, 200)}…` : text
  } catch {
    // fall through
  }
  return String(typeof value)
}

module.exports = {
  checkBlockAnswer,
  checkKeysAnswer,
  makeQuotaStore,
  isQuotaStore,
  storeOperations,
  checkReserveAnswer,
  checkRecordAnswer,
  checkRefusedGrant,
  clamped,
  checkBucketAnswer,
  checkBucketUsage,
  unsoundBucketRecord,
  instanceFields,
  newRecordId,
  KEEP_GRANTED_MS,
  RECORD_GRACE_MS,
  bucketTerms,
  hungerMs,
  SHARE_REFILL_MS,
  writeOffAfterMs,
  bucketKeptMs,
  MAX_RECORD_ID,
  MAX_CLOCK_MS,
  MAX_BUCKET_CAPACITY,
}
