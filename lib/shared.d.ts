// Types of quota-clock-source/shared. The client types are structural: ioredis's Redis and
// Cluster, node-redis's client and cluster, and the MongoDB driver's Db fit them, and none of
// those packages is needed to compile against this file.

import type { QuotaStore } from '../index.js'

/** A store made by `redisStore` or `mongoStore`, for `share.store` of a `KeyedQuotaClock`; no other object is accepted. */
export type { QuotaStore }

/** What `redisStore` uses of an ioredis `Redis` or `Cluster` (ioredis >= 5). */
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
