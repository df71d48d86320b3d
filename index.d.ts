// Types of quota-clock-source. Hand-written: the JS face (index.js and lib/) wraps the generated
// native binding, whose own declarations are in binding.d.ts.

/** What to credit when the wall clock runs ahead and no elapsed-realtime reader can tell a host suspend from a wall-clock step. */
export type SuspendPolicy = 'ignore' | 'credit' | 'refuse'

/**
 * A source of the two (optionally three) readings, in milliseconds as finite numbers.
 * `systemClock()` and `manualClock()` are read natively; any other object costs one JS call per reading.
 */
export interface ClockSource {
  /** A clock nobody can step: time since an arbitrary origin. Must never go backwards. */
  monotonicMs(): number
  /** Milliseconds since the Unix epoch, as the host's wall clock tells it. */
  wallMs(): number
  /** Suspend-inclusive elapsed time (what Linux `CLOCK_BOOTTIME` counts and /proc/uptime reports). */
  elapsedRealtimeMs?(): number
}

export interface ManualClockInit {
  /** Default 0. */
  monotonicMs?: number
  /** Default `Date.UTC(2024, 0, 15)`. */
  wallMs?: number
  /** The clock has an `elapsedRealtimeMs` reader only when this is a number. */
  elapsedRealtimeMs?: number
}

/** A clock whose components move independently, for tests and simulations. */
export interface ManualClock extends ClockSource {
  /** Time passes while awake: monotonic, wall and elapsed-realtime all move by `ms` (≥ 0). */
  advance(ms: number): void
  /** The host sleeps: wall and elapsed-realtime move by `ms` (≥ 0), monotonic does not. */
  suspend(ms: number): void
  /** The wall clock is set (an NTP step); negative is backwards. */
  stepWall(deltaMs: number): void
  /** Moves any component to an absolute value (this is how a test makes the monotonic source regress). */
  set(values: { monotonicMs?: number; wallMs?: number; elapsedRealtimeMs?: number }): void
  /** How many times the elapsed-realtime reader was called. */
  readonly elapsedRealtimeReads: number
}

export interface QuotaPeriodSpec {
  /** `'hour'`, `'minute'` and `'second'` are refused with `ERR_SUB_DAY_PERIOD`. */
  unit: 'day' | 'week' | 'month' | 'year'
  /** An IANA name such as `'America/Los_Angeles'`, or `'UTC'`. */
  timeZone: string
  /** month/year: day of month 1..31 (default 1, clamped to the month's length); week: ISO weekday 1..7, 1 = Monday (default 1). Not allowed on `'day'`. */
  anchorDay?: number
  /** year only: 1..12 (default 1). */
  anchorMonth?: number
  /** Local reset time `'HH:MM'` or `'HH:MM:SS'`, default `'00:00'`. */
  anchorTime?: string
}

/** What every limiter takes, bucket or not. */
export interface LimiterOptionsBase {
  /** Required, no default: see {@link SuspendPolicy}. */
  suspendPolicy: SuspendPolicy
  /** Default `systemClock()`. */
  clock?: ClockSource
  /** Called asynchronously, on the creating thread, never inside `tryConsume`. A throw becomes a process warning. */
  onAnomaly?: (anomaly: Anomaly) => void
  /** Default `Date.UTC(2020, 0, 1)`; `null` turns the check off. Only checked with a quota. */
  earliestPlausibleWallMs?: number | null
}

/** A token bucket, with an optional calendar quota. */
export interface BucketLimitOptions {
  /** > 0, finite: bucket size (the largest burst). */
  capacity: number
  /** > 0, finite: tokens per second of real elapsed time. */
  refillPerSecond: number
  /** 0..capacity, default capacity. */
  initialTokens?: number
  /** A calendar quota. `limit` is a non-negative safe integer; 0 blocks every request. */
  quota?: { limit: number; period: QuotaPeriodSpec }
}

/**
 * A quota alone: no bucket. Decisions wait only on the quota; `tokens`, `capacity` and
 * `refillPerSecond` are `Infinity`; `n` is bounded only by the quota.
 */
export interface QuotaAloneOptions {
  capacity?: undefined
  refillPerSecond?: undefined
  initialTokens?: undefined
  /** Required without a bucket. `limit` is a non-negative safe integer; 0 blocks every request. */
  quota: { limit: number; period: QuotaPeriodSpec }
}

/** `capacity` and `refillPerSecond` together (a bucket), or neither with a `quota` (a quota alone). */
export type QuotaClockOptions = LimiterOptionsBase & (BucketLimitOptions | QuotaAloneOptions)

export type AnomalyKind =
  | 'wall-step-back'
  | 'wall-step-forward'
  | 'suspend'
  | 'ambiguous-wall-jump'
  | 'period-regression'
  | 'period-skip'
  | 'store-clock-step'

export interface Anomaly {
  kind: AnomalyKind
  /** One readable sentence with the numbers, for a log line. */
  detail: string
  monotonicDeltaMs: number
  wallDeltaMs: number
  /** What the bucket was credited on this call. */
  creditedMs: number
  /** `suspend`: the suspended time. */
  suspendedMs?: number
  /** `wall-step-*`: the unexplained part of the wall delta, signed; `store-clock-step`: of the store's clock's advance. */
  stepMs?: number
  /** `period-skip`: how many whole periods were jumped over. */
  skipped?: number
  /** `period-*`: the period now open. */
  periodId?: string
}

export interface Decision {
  allowed: boolean
  /** 0 when allowed. */
  retryAfterMs: number
  /** Which clock the wait comes from (`'block'`: a KeyedQuotaClock's block of the key, its time left); `null` when allowed. */
  retryAfterBasis: 'monotonic-refill' | 'wall-period' | 'block' | null
  /** Tokens left after the decision; `Infinity` with a quota alone (no bucket). */
  tokens: number
  /** `limit - used` in the open period; `null` without a quota. */
  quotaRemaining: number | null
  /**
   * Raised while making this decision (usually empty). Typed `Anomaly[]`; the
   * empty array is shared and frozen, so copy it (`[...decision.anomalies]`) before adding to it.
   */
  anomalies: Anomaly[]
}

export interface Period {
  /** `'YYYY-MM-DD'` (day, and week: its anchor date), `'YYYY-MM'` (month), `'YYYY'` (year). */
  id: string
  /** First instant of the period (ms since the epoch). */
  startMs: number
  /** First instant of the next period. */
  endMs: number
  /** `'gap'`: the local start did not exist (DST gap) and snapped to where the gap closes; `'repeat'`: it occurred twice, the first is taken. */
  startKind: 'exact' | 'gap' | 'repeat'
  timeZone: string
}

export interface Status {
  tokens: number
  /** Used in the open period; `null` without a quota. */
  quotaUsed: number | null
  /** `limit - used` in the open period; `null` without a quota. */
  quotaRemaining: number | null
  /** The open period; `null` without a quota (or before the first plausible wall reading). */
  period: Period | null
  /** The limits in force: the bucket size (`Infinity`, as are `tokens` and `refillPerSecond`, with a quota alone) ... */
  capacity: number
  /** ... its refill rate ... */
  refillPerSecond: number
  /** ... and the quota's limit (`null` without a quota). */
  quotaLimit: number | null
  /**
   * A shared bucket's key (`share.bucket` only; absent otherwise): the store's tokens at this
   * process's last store call for the key, refilled since at `refillPerSecond` (an estimate, at
   * most `capacity`; `capacity` before its first store call). `tokens` is this process's slice.
   */
  fleetTokens?: number
}

/** A shared limiter's store calls since construction (`stats().store`). */
export interface StoreStats {
  /** Store calls made (reservations, failOpen charges and give-backs), whatever their outcome. */
  calls: number
  /** Store calls that failed with an error (a call that timed out first counts as a timeout only). */
  errors: number
  /** Store calls that did not answer within `share.timeoutMs`. */
  timeouts: number
  /** Quota units reserved from the store. */
  reserved: number
  /** Reserved units given back to the store. */
  returned: number
}

/**
 * What a limiter has done since it was made (a restored one starts from zero): plain counters kept
 * by the native core, read without a clock. Counts are exact up to `Number.MAX_SAFE_INTEGER`.
 */
export interface LimiterStats {
  /** `tryConsume` (and `consume`) decisions that allowed; a later `refund` does not take one back. */
  allowed: number
  /** Decisions that denied. A call that throws is neither; `status()` and `refund()` are not decisions. */
  denied: number
  /** Anomalies raised, by kind: every kind is present, zeros included. Those raised by `status()` and `refund()` count. */
  anomalies: Record<AnomalyKind, number>
  /** Keys held now (`size`); always 1 on a `QuotaClock`. */
  keys: number
  /** Keys the limiter dropped by itself: to make room at `maxKeys`, or idle keys swept. `delete(key)` is not counted. Always 0 on a `QuotaClock`. */
  evicted: number
  /** New keys refused with `ERR_KEY_LIMIT`. Always 0 on a `QuotaClock`. */
  keyLimitRefusals: number
  /** Only on a `KeyedQuotaClock` with `share`: its store calls. */
  store?: StoreStats
  /** Only on a `KeyedQuotaClock`: of `denied`, the calls a block denied (the denial that started a block included). */
  blocked?: number
  /** Only on a `KeyedQuotaClock`: blocks started (by `block` or `block(key, forMs)`; extending one is not a new one). */
  blocks?: number
}

/** A token bucket on real elapsed time plus an optional calendar quota, reconciled from a monotonic and a wall reading on every call. */
export class QuotaClock {
  /** Throws `TypeError`/`RangeError` with `code` `ERR_INVALID_OPTION`, `ERR_SUB_DAY_PERIOD` or `ERR_UNKNOWN_TIME_ZONE` on bad options. */
  constructor(options: QuotaClockOptions)
  /** `n`: a positive safe integer ≤ capacity (default 1). Being limited is a value, not an error; clock errors throw `QuotaClockError`. */
  tryConsume(n?: number): Decision
  /**
   * Reads and reconciles the clocks like `tryConsume`, then gives back `n` tokens (capped at capacity)
   * and `n` quota units of the open period (never below zero): for requests that must not count.
   * `n`: a positive safe integer (default 1), else `RangeError` `ERR_INVALID_ARG`.
   */
  refund(n?: number): void
  /** Reads and reconciles the clocks like `tryConsume`, consuming nothing; also the limits in force. */
  status(): Status
  /**
   * New limits now (a plan change): fields left out keep their values, `quota: null` removes the
   * quota. Reads and reconciles like `status()`, carries what was used over (a bucket keeps what it
   * lacked of full, within `0..capacity`; the quota's use counts whole in the new spec's open
   * period; `initialTokens` is not applied) and answers `status()` under the new limits. Invalid
   * limits throw like the constructor's options and change nothing.
   */
  setLimits(limits: KeyPolicy): Status
  /** Decisions and anomalies since construction (`keys` 1, `evicted` and `keyLimitRefusals` 0, no `store`); reads no clock. */
  stats(): LimiterStats
  /** The limiter's own period spec applied to `wallMs`; `null` without a quota. */
  periodFor(wallMs: number): Period | null
}

/** A key's own limits; each field overrides the limiter's default. */
/**
 * A key's limits, each field overriding the default. With defaults that have no bucket (a quota
 * alone), `capacity` and `refillPerSecond` come together (the key gets a bucket) or not at all.
 */
export interface KeyPolicy {
  /** > 0, finite. */
  capacity?: number
  /** > 0, finite. */
  refillPerSecond?: number
  /** 0..capacity; default: the limiter's `initialTokens` if it set one (capped at this capacity), else a full bucket. */
  initialTokens?: number
  /** `null`: this key has no quota. */
  quota?: { limit: number; period: QuotaPeriodSpec } | null
}

/** What a KeyedQuotaClock takes besides QuotaClock's options (the defaults of every key). */
export interface KeyedOptions {
  /**
   * A key's own limits (plans, tenants' zones), asked synchronously when a key is first held;
   * `undefined` keeps the defaults. It must answer synchronously: a promise is refused.
   */
  policy?: (key: string) => KeyPolicy | undefined
  /** Positive integer ≤ 2**32, default 1,000,000. */
  maxKeys?: number
  /**
   * A held key's `policy` is asked again once this long (ms, a positive safe integer) has passed on
   * the limiter's timeline since it was last asked, and its answer put in force with what the key
   * used carried over (see `refreshPolicy`). Default: never.
   */
  policyTtlMs?: number
  /** A `snapshot()` taken earlier: its keys are held again (with `zone`: only when the file is created). */
  restore?: Uint8Array
  /** The quota of each key shared by every instance through a store (see docs/several-instances.md). */
  share?: ShareOptions
  /** Blocks a key denied `after` times within `withinMs` for `forMs` (or `forMs[level]`, escalating); see docs/blocking.md. */
  block?: BlockOptions
  /**
   * One limiter for every process of the host: the keys, open periods and clock reconciliation live
   * in this memory-mapped file (e.g. `/dev/shm/api-limits`), made by the first limiter on it. Later limiters on it must
   * have the same options (else `RangeError` `ERR_ZONE_MISMATCH` naming the first that differs); only `systemClock()` can drive it. Linux only.
   */
  zone?: ZoneOptions
}

/** The `block` option: automatic blocks of a key denied again and again. */
export interface BlockOptions {
  /** Denials (positive integer) within `withinMs` that block the key. */
  after: number
  /** ms, counted from the first denial of a run; a denial later than this starts a new run. */
  withinMs: number
  /** How long a block lasts (ms, at most 365 days): one number for every level, or one per level (the last for every level after). */
  forMs: number | number[]
  /** A key with no block this long after its last block ended goes back to level 0 (ms); default 24 hours. */
  resetAfterMs?: number
}

/** A KeyedQuotaClock key's status: `Status` and its block. */
export interface KeyStatus extends Status {
  /** ms left of the key's block (rounded up); 0 when not blocked. */
  blockedForMs: number
}

export interface ZoneOptions {
  /** The zone file: every limiter made with the same path is one limiter. */
  path: string
}

declare const quotaStoreBrand: unique symbol

/**
 * A store that every instance shares a quota through, made by `redisStore()` or `mongoStore()` of
 * `quota-clock-source/shared`; nothing else is accepted (`ERR_INVALID_OPTION`).
 */
export interface QuotaStore {
  readonly kind: 'redis' | 'mongo'
  readonly [quotaStoreBrand]: true
}

/** `share`: each key's quota lives in the store under `name`, the key and the period id. */
export interface ShareOptions {
  /** From `redisStore` / `mongoStore`; anything else is refused. */
  store: QuotaStore
  /** 1..128 characters: the quota's name in the store; limiters with the same store and name share it. */
  name: string
  /** Most units one store call reserves for this process (positive safe integer); default 1% of the key's limit, at least 1. */
  leaseUnits?: number
  /** Unused reserved units of a key idle this long (ms, the limiter's monotonic clock) go back; default 10,000. */
  idleMs?: number
  /** Longest wait for one store call (ms); default 300. Only a store call that fails or goes unanswered this long makes the store unavailable. */
  timeoutMs?: number
  /** Store unavailable: allow as if the quota had room (true; charged to the store later) or reject `ERR_STORE_UNAVAILABLE` (false, default). With `bucket`, calls the slice taken here does not cover are decided by a local bucket of the key's capacity and refill, and what it admitted is taken from the store's bucket once the store answers. */
  failOpen?: boolean
  /** true: each key's bucket is one bucket for every instance too, kept in the store and taken in slices; every capacity must then be an integer 1..2**31. Default false. */
  bucket?: boolean
  /** How long (ms) a process may spend a slice it took from the store, from when it sent the call that took (or last renewed) it: an integer 1,000..600,000; default 10,000. Only with `bucket: true`. */
  leaseMs?: number
}

export type KeyedQuotaClockOptions = QuotaClockOptions & KeyedOptions

/** One limiter holding the bucket and quota of every key (tenant, API key, client address) in Rust. */
export class KeyedQuotaClock {
  /** Throws like `QuotaClock`'s constructor; a bad `restore` is `TypeError`/`RangeError` `ERR_INVALID_OPTION`. */
  constructor(options: KeyedQuotaClockOptions)
  /**
   * `key`: 1 to 256 UTF-16 code units (else `TypeError`/`RangeError` `ERR_INVALID_ARG`); `n`: a positive
   * safe integer ≤ the key's capacity (default 1). A new key past `maxKeys` when every key has quota
   * use throws `QuotaClockError` `ERR_KEY_LIMIT`. On a limiter with `share`: `TypeError`
   * `ERR_SHARED_ASYNC` (use `consume`).
   */
  tryConsume(key: string, n?: number): Decision
  /** Reconciles the clocks, then gives back `n` tokens (capped at capacity) and `n` quota units of the open period. A key not held is left alone. */
  refund(key: string, n?: number): void
  /** The key's status with its limits in force; for a key not held, what a fresh key would have (it is not held by this). */
  status(key: string): KeyStatus
  /** Blocks the key from now for `forMs` (a positive safe integer ≤ 365 days; a longer block stays): every call is denied, basis `'block'`. A key not held is held (its `policy` asked). */
  block(key: string, forMs: number): void
  /** Ends the key's block and brings its level back to 0; `true` if it was blocked. */
  unblock(key: string): boolean
  /**
   * Asks `policy(key)` again at the key's next call of any kind (`tryConsume`, `consume`, `refund`,
   * `status`) and puts its answer in force with what the key used carried over; without a key,
   * every key held now. A key not held: nothing happens. In a zone, the refresh applies in every
   * process; with `share`, the new limit goes with the key's next store call.
   */
  refreshPolicy(key?: string): void
  /** Drops the key and all its state (its block too); `true` if it was held. */
  delete(key: string): boolean
  /** Keys held now (idle keys may be dropped at any time). */
  readonly size: number
  /** A versioned, checksummed binary image of every held key; reads no clock. With `share`, the buckets only (quota use is the store's); with `zone`, every process's keys. */
  snapshot(): Uint8Array
  /**
   * Without `share`: what `tryConsume` would answer, as a promise (a thrown error becomes a
   * rejection). With `share`: decided in the process when the key's reservation covers `n`;
   * otherwise after one store call (shared by concurrent calls for the key; another when concurrent
   * calls took its units), waiting at most `share.timeoutMs` for each; rejects `QuotaClockError`
   * `ERR_STORE_UNAVAILABLE` when the store fails or does not answer (unless `failOpen`; with
   * `bucket`, also when no answer brought the call tokens it could spend within that time while
   * the fleet's bucket had them: a shared bucket's call is denied only when the bucket lacks them),
   * `ERR_STORE_RESPONSE` when its answer makes no sense, `ERR_KEY_LIMIT` when the key was dropped
   * (`maxKeys`) while the call waited and every held key has quota use now.
   */
  consume(key: string, n?: number): Promise<Decision>
  /**
   * With `share`: gives every reservation back and resolves once the store has it (rejects
   * `ERR_STORE_UNAVAILABLE` if it did not take them within `share.timeoutMs`). With `zone`: unmaps
   * the zone (the file and its keys stay; later calls throw, `stats()` answers the counters it had). Otherwise: resolves at once.
   */
  close(): Promise<void>
  /** Decisions, anomalies, keys held, evictions and key-limit refusals since construction (and `store` when shared); reads no clock. */
  stats(): LimiterStats
}

/**
 * The host's monotonic clock that stops while the host is suspended (Linux `CLOCK_MONOTONIC`, macOS
 * `mach_absolute_time`, Windows `QueryUnbiasedInterruptTimePrecise`) and its wall clock, read
 * natively; optionally a suspend-inclusive reader.
 */
export function systemClock(options?: { elapsedRealtimeMs?: () => number }): ClockSource
/** A reader of Linux `CLOCK_BOOTTIME` (read natively when given to `systemClock`). Throws `ERR_UNSUPPORTED_PLATFORM` elsewhere. */
export function procUptimeElapsedRealtime(): () => number
/**
 * A reader of this platform's suspend-inclusive clock, read natively when given to `systemClock`:
 * Linux `CLOCK_BOOTTIME`, macOS `mach_continuous_time`, Windows `QueryInterruptTimePrecise`.
 * Throws `ERR_UNSUPPORTED_PLATFORM` elsewhere.
 */
export function hostElapsedRealtime(): () => number
export function manualClock(init?: ManualClockInit): ManualClock
/** The period of `period` containing `wallMs`. Never calls into JS. */
export function periodFor(period: QuotaPeriodSpec, wallMs: number): Period

/**
 * Every `code` an error of this package carries. A `QuotaClockError` carries
 * `ERR_MONOTONIC_REGRESSION` to `ERR_STORE_RESPONSE` and `ERR_CALLBACK`; `ERR_SHARED_ASYNC` is a
 * `TypeError`; `ERR_INVALID_OPTION`, `ERR_INVALID_ARG`, `ERR_SUB_DAY_PERIOD`,
 * `ERR_UNKNOWN_TIME_ZONE` and `ERR_ZONE_MISMATCH` come on a `TypeError` / `RangeError`; the rest on
 * an `Error`.
 */
export type QuotaClockErrorCode =
  | 'ERR_MONOTONIC_REGRESSION'
  | 'ERR_AMBIGUOUS_WALL_JUMP'
  | 'ERR_IMPLAUSIBLE_WALL_CLOCK'
  | 'ERR_CLOCK_READING'
  | 'ERR_UNSUPPORTED_PLATFORM'
  | 'ERR_KEY_LIMIT'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_STORE_RESPONSE'
  | 'ERR_CALLBACK'
  | 'ERR_SHARED_ASYNC'
  | 'ERR_ZONE_MISMATCH'
  | 'ERR_INVALID_OPTION'
  | 'ERR_SUB_DAY_PERIOD'
  | 'ERR_UNKNOWN_TIME_ZONE'
  | 'ERR_INVALID_ARG'
  | 'ERR_INTERNAL'
  | 'ERR_MISSING_PEER_DEPENDENCY'
  | 'ERR_NATIVE_BINDING_NOT_FOUND'

export class QuotaClockError extends Error {
  code: QuotaClockErrorCode
  constructor(code: QuotaClockErrorCode, message: string)
}

// ---- Shared limits in MongoDB (the @nodedk/throttle API) ------------------------------------

/**
 * The part of a MongoDB collection a throttle uses: the official driver's `Collection` (v6+),
 * or the collection of {@link memoryDb}.
 */
export interface ThrottleCollection {
  /** Must resolve to the document itself (driver v6+; v4/v5's `{ value, ok }` wrapper is unwrapped too). */
  findOneAndUpdate(filter: object, update: object | object[], options?: object): Promise<any>
  deleteMany(filter: object): Promise<{ deletedCount?: number }>
}

/** Anything with MongoDB's `collection(name)`: a driver `Db`, or {@link memoryDb}(). */
export interface ThrottleDb {
  collection(name: string): ThrottleCollection
}

export interface ThrottleOptions {
  /** Required. All throttles on the same database share the counters in its `throttle` collection. */
  db: ThrottleDb
  /** IANA time zone whose midnight starts the day window (and whose calendar months the month window follows). Default `'UTC'`. Minute windows are always UTC minutes. An unknown name throws `RangeError` `ERR_UNKNOWN_TIME_ZONE`. */
  timeZone?: string | undefined
  /**
   * Whose clock files an attempt in its window. `'local'` (default): this process's wall clock.
   * `'server'`: the database server's clock, read through `$$NOW` in an update pipeline (one more
   * round trip per check), so instances with skewed clocks agree on the window; results then carry `skewMs`.
   */
  time?: 'local' | 'server' | undefined
  /** The local wall clock (default `Date.now`); `manualClock()` fits, for tests. */
  clock?: Pick<ClockSource, 'wallMs'> | undefined
}

/** Per-key limits. Each is a non-negative safe integer; an omitted (or `undefined`) limit is unlimited; 0 refuses every attempt. */
export interface ThrottleLimits {
  /** Attempts per UTC minute. */
  requests_per_minute?: number | undefined
  /** Attempts per day (a UTC day, or a local day in the throttle's `timeZone`). */
  requests_per_day?: number | undefined
  /** Attempts per calendar month in the throttle's `timeZone`. */
  requests_per_month?: number | undefined
}

/** One fixed window of a check, for a limit that was given. */
export interface ThrottleWindow {
  /** `'2024-05-01T12:34Z'` (minute), `'2024-05-01'` (day), `'2024-05'` (month). */
  id: string
  /** First instant of the window, ms since the epoch. */
  startMs: number
  /** First instant of the next window; the counter's `expires_at`. */
  endMs: number
  limit: number
  /** The window's count including this attempt; `null` when a longer window refused the attempt first (this counter was not touched). */
  count: number | null
  /** `max(0, limit - count)`; `null` when `count` is. */
  remaining: number | null
}

export type ThrottleReason = 'RATE_LIMIT_MONTH' | 'RATE_LIMIT_DAY' | 'RATE_LIMIT_MINUTE'

/** The window each limit counts in. */
export interface ThrottleLimitWindows {
  requests_per_month: 'month'
  requests_per_day: 'day'
  requests_per_minute: 'minute'
}

/**
 * The windows of a check with limits `L`: a window is there exactly when its limit was given. A limit
 * whose type admits `undefined` (say `ThrottleLimits` itself) gives an optional window.
 */
export type ThrottleWindows<L extends ThrottleLimits = ThrottleLimits> = {
  [K in keyof L & keyof ThrottleLimitWindows as undefined extends L[K] ? never : ThrottleLimitWindows[K]]: ThrottleWindow
} & {
  [K in keyof L & keyof ThrottleLimitWindows as undefined extends L[K] ? ThrottleLimitWindows[K] : never]?: ThrottleWindow
}

/** The fields every result carries besides `allowed`, `reason` and `retryAfterMs`. */
export interface ThrottleResultBase<L extends ThrottleLimits = ThrottleLimits> {
  /** The instant the windows were computed from: local wall time, or the server's with `time: 'server'`. */
  nowMs: number
  /** With `time: 'server'`: server time minus local time at the midpoint of the round trip. */
  skewMs?: number
  /** The windows of the limits given, longest first. */
  windows: ThrottleWindows<L>
}

/** `allowed` and `reason` are exactly the original's; the other fields are additions. */
export type ThrottleResult<L extends ThrottleLimits = ThrottleLimits> =
  | (ThrottleResultBase<L> & { allowed: true; retryAfterMs: 0 })
  | (ThrottleResultBase<L> & {
      allowed: false
      /** Which limit refused: month first, then day, then minute. */
      reason: ThrottleReason
      /** Until the refusing window ends, rounded up. */
      retryAfterMs: number
    })

/** The database server's clock, read once. */
export interface ThrottleSkew {
  /** Server time minus local time at the midpoint of the round trip (accurate to ± roundTripMs / 2). */
  skewMs: number
  roundTripMs: number
  serverMs: number
}

export interface Throttle {
  /**
   * Counts one attempt for `key` (a non-empty string: an account, an IP, any group sharing a limit)
   * and answers whether it is within every limit. The month counter is checked first, then the day,
   * then the minute; an attempt refused by one window is not counted in the shorter ones, and is
   * counted in the longer ones and in the window that refused it. Rejects with a `TypeError` or
   * `RangeError` (code `ERR_INVALID_ARG`) before touching the database when the key or a limit is invalid.
   */
  check<L extends ThrottleLimits = {}>(key: string, limits?: L & { [K in Exclude<keyof L, keyof ThrottleLimits>]: never }): Promise<ThrottleResult<L>>
  /** Deletes the counters whose window has ended (`expires_at <= now`) and resolves to how many documents went. Starts no timer: call it yourself, or create the TTL index. */
  sweep(): Promise<{ n: number }>
  /** Reads the database server's clock once, to see whether this instance needs `time: 'server'`. */
  measureSkew(): Promise<ThrottleSkew>
}

/**
 * Creates a throttle over `options.db`: synchronous, and it neither touches the database nor starts
 * a timer nor creates an index. Throws `TypeError`/`RangeError` (code `ERR_INVALID_ARG`) for bad
 * options and `RangeError` `ERR_UNKNOWN_TIME_ZONE` for an unknown `timeZone`.
 */
export function createThrottle(options: ThrottleOptions): Throttle

/**
 * An in-process database with the two collection methods a throttle uses, with the server's
 * semantics, for a single process or for tests. `options.clock` is the "server" clock `$$NOW` reads
 * (default the system wall clock).
 */
export function memoryDb(options?: { clock?: Pick<ClockSource, 'wallMs'> | undefined }): ThrottleDb
