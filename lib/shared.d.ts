// Types of quota-clock-source/shared. The client types are structural: ioredis's Redis and
// Cluster, node-redis's client and cluster, and the MongoDB driver's Db fit them, and none of
// those packages is needed to compile against this file.

import type { QuotaStore } from '../index.js'

/** A store made by `redisStore` or `mongoStore`, for `share.store` of a `KeyedQuotaClock`; no other object is accepted. */
export type { QuotaStore }

/** What `redisStore` uses of an ioredis `Redis` or `Cluster` (ioredis >= 5; iovalkey's, its fork, alike). */
export interface IoRedisClient {
  readonly isCluster: boolean
  call(command: string, ...args: Array<string | number>): Promise<unknown>
}

/** What `redisStore` uses of a node-redis client (`createClient()`, redis >= 4). */
export interface NodeRedisClient {
  readonly isOpen: boolean
  sendCommand(args: string[]): Promise<unknown>
}

/** What `redisStore` uses of a node-redis cluster (`createCluster()`, redis >= 4). */
export interface NodeRedisCluster {
  sendCommand(firstKey: string, isReadonly: boolean, args: string[]): Promise<unknown>
}

/** A Redis client connected by the caller: ioredis (Redis or Cluster) or node-redis (client or cluster). */
export type RedisClient = IoRedisClient | NodeRedisClient | NodeRedisCluster

export interface RedisStoreOptions {
  /** Put before every record's key; default `'qcs:'` (at most 256 characters). */
  prefix?: string | undefined
}

/** What `mongoStore` uses of the MongoDB driver's `Db` (mongodb >= 5). */
export interface MongoDb {
  readonly databaseName: string
  collection(name: string): unknown
}

export interface MongoStoreOptions {
  /** The collection holding the records; default `'quota_shares'`. */
  collection?: string | undefined
}

/**
 * A quota store on Redis: one Lua script per operation, each on one key (Redis Cluster works);
 * records expire when their period ends. Throws `TypeError` `ERR_INVALID_OPTION` for anything but
 * a supported client, and for a bad option.
 */
export function redisStore(client: RedisClient, options?: RedisStoreOptions): QuotaStore

/**
 * A quota store on MongoDB: one atomic `findOneAndUpdate` per reservation; each record has an
 * `expiresAt` date for a TTL index:
 * `db.collection('quota_shares').createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 })`.
 */
export function mongoStore(db: MongoDb, options?: MongoStoreOptions): QuotaStore

/** A shared quota's record for one key and period, as `quotaAdmin` answers it. */
export interface QuotaUsage {
  name: string
  key: string
  /** The period's id (`periodFor(spec, wallMs).id`). */
  periodId: string
  /** The limit the latest reservation was judged against; `null`: none yet. */
  limit: number | null
  /** Units granted on top of the limit for this period. */
  extra: number
  /** Units taken from the store and not given back. */
  used: number
  /** Of `used`, units instances reserved and have not admitted yet (as of each one's last store call). */
  held: number
  /** When the store forgets the record (ms since the epoch); `null`: no record. */
  expiresAt: number | null
}

/** A shared bucket (`share.bucket`) of one key, as `quotaAdmin` answers it. */
export interface BucketUsage {
  name: string
  key: string
  /** The capacity of the latest store call for the key; `null`: no bucket record. */
  capacity: number | null
  /** The refill per second of the latest store call for the key; `null`: no bucket record. */
  refillPerSecond: number | null
  /** Tokens in the store, refilled to now by the fleet clock (below 0 after failOpen charges). */
  tokens: number
  /** Tokens taken in slices and not yet spent, given back or written off. */
  out: number
  /** When the store forgets the record (ms since the epoch); `null`: no record. */
  expiresAt: number | null
}

export interface QuotaAdminOptions {
  /** The quota's name in the store (`share.name` of the limiters): 1 to 128 characters. */
  name: string
  /**
   * Longest wait for the store per call, in ms (a positive integer; default 5,000); then the call
   * rejects with `QuotaClockError` `ERR_STORE_UNAVAILABLE`. A `grant` that timed out may still
   * have landed: read `usage(key, periodId)` and compare `extra` before granting again.
   */
  timeoutMs?: number
}

/** The operator's view of one shared quota or bucket: each method is one atomic store operation on one record. */
export interface QuotaAdmin {
  /** The record of `key` in the period `periodId` (zeros and `limit: null` when there is none). */
  usage(key: string, periodId: string): Promise<QuotaUsage>
  /**
   * Raises that period's allowance of `key` by `units` (a positive safe integer), fleet-wide. A
   * grant that would take `limit + extra` past `Number.MAX_SAFE_INTEGER` is refused
   * (`RangeError` `ERR_INVALID_ARG`, nothing written). On `ERR_STORE_UNAVAILABLE` (a timeout) the
   * grant may still have landed: check `usage(key, periodId)` before retrying.
   */
  grant(key: string, periodId: string, units: number): Promise<QuotaUsage>
  /** Sets `used` to what instances reserved and have not admitted, and `extra` to 0. */
  reset(key: string, periodId: string): Promise<QuotaUsage>
  /** The shared bucket of `key` as the store has it now; moves nothing. */
  bucket(key: string): Promise<BucketUsage>
  /** The bucket of `key` back to full (`capacity - out`): a key blocked as saturated is unblocked. */
  fill(key: string): Promise<BucketUsage>
  /** Blocks `key` fleet-wide from now for `forMs` (a positive safe integer ≤ 365 days; a longer block stays); instances honour it from their next store call for the key. */
  block(key: string, forMs: number): Promise<KeyBlock>
  /** Lifts the block of `key` and brings its level back to 0, fleet-wide; `blockedForMs` is what was left. Seen by instances within a second. */
  unblock(key: string): Promise<KeyBlock>
  /** The block of `key` as the store has it now; changes nothing. */
  blocked(key: string): Promise<KeyBlock>
  /** The keys of the name with a record now (a quota period, a bucket, a block), read incrementally: at most `limit` (default 100, at most 10,000); `blocked`: only keys blocked now. */
  keys(options?: { blocked?: boolean; limit?: number }): Promise<KeyEntry[]>
}

/** A key's block in the store (`quotaAdmin`'s block, unblock, blocked). */
export interface KeyBlock {
  name: string
  key: string
  /** ms left of its block, rounded up; 0: not blocked. */
  blockedForMs: number
  /** The key's level: the next automatic block lasts `forMs[level]`. */
  level: number
}

/** A key of `quotaAdmin.keys()`. */
export interface KeyEntry {
  key: string
  /** ms left of its block; 0: not blocked. */
  blockedForMs: number
}

/**
 * The operator's view of the shared quota `name` in `store`. Bad arguments are `TypeError` /
 * `RangeError` `ERR_INVALID_ARG` naming the argument; a store that fails, or does not answer
 * within `timeoutMs`, is `ERR_STORE_UNAVAILABLE`.
 */
export function quotaAdmin(store: QuotaStore, options: QuotaAdminOptions): QuotaAdmin
