// quota-clock-source/shared as a TypeScript user meets it, with stand-ins of the clients' shapes
// (no Redis or MongoDB package needed). It must compile with `tsc --noEmit --strict`; each
// `@ts-expect-error` line must stay an error.
import { KeyedQuotaClock } from 'quota-clock-source'
import type { QuotaStore as MainQuotaStore } from 'quota-clock-source'
import { redisStore, mongoStore, quotaAdmin } from 'quota-clock-source/shared'
import type { BucketUsage, KeyBlock, KeyEntry, IoRedisClient, MongoDb, NodeRedisClient, NodeRedisCluster, QuotaAdmin, QuotaStore, QuotaUsage, RedisClient } from 'quota-clock-source/shared'

declare const ioredis: IoRedisClient
declare const nodeRedis: NodeRedisClient
declare const nodeCluster: NodeRedisCluster
declare const db: MongoDb

const stores: QuotaStore[] = [
  redisStore(ioredis),
  redisStore(nodeRedis, { prefix: 'billing:' }),
  redisStore(nodeCluster, { prefix: undefined }),
  mongoStore(db),
  mongoStore(db, { collection: 'shares' }),
]
const same: MainQuotaStore = stores[0]!
const kind: 'redis' | 'mongo' = same.kind
const clients: RedisClient[] = [ioredis, nodeRedis, nodeCluster]

const limiter = new KeyedQuotaClock({
  capacity: 50,
  refillPerSecond: 10,
  suspendPolicy: 'ignore',
  quota: { limit: 100_000, period: { unit: 'month', timeZone: 'UTC' } },
  share: { store: redisStore(ioredis), name: 'api' },
})

// @ts-expect-error a URL is not a client
redisStore('redis://127.0.0.1:6379')
// @ts-expect-error prefix is a string
redisStore(ioredis, { prefix: 1 })
// @ts-expect-error not an option of redisStore
redisStore(ioredis, { collection: 'x' })
// @ts-expect-error collection is a string
mongoStore(db, { collection: 1 })
// @ts-expect-error a plain object is not a store
const forged: QuotaStore = { kind: 'redis' }

// The operator's view: the QuotaUsage fields.
const admin: QuotaAdmin = quotaAdmin(stores[0], { name: 'api' })
async function operate(): Promise<number> {
  const usage: QuotaUsage = await admin.usage('acme', '2026-12')
  const limit: number | null = usage.limit
  const expiresAt: number | null = usage.expiresAt
  const granted = await admin.grant('acme', '2026-12', 500)
  const reset = await admin.reset('acme', '2026-12')
  return usage.used - usage.held + granted.extra + reset.used + (limit ?? 0) + (expiresAt ?? 0)
}
// The operator's view of a shared bucket: the BucketUsage fields.
async function unblock(): Promise<number> {
  const bucket: BucketUsage = await admin.bucket('203.0.113.7')
  const capacity: number | null = bucket.capacity
  const refill: number | null = bucket.refillPerSecond
  const filled = await admin.fill('203.0.113.7')
  return bucket.tokens + bucket.out + (capacity ?? 0) + (refill ?? 0) + filled.tokens + (filled.expiresAt ?? 0)
}
async function blocks(): Promise<number> {
  const blocked: KeyBlock = await admin.block('203.0.113.9', 3_600_000)
  const lifted: KeyBlock = await admin.unblock('203.0.113.9')
  const now: KeyBlock = await admin.blocked('203.0.113.9')
  const keys: KeyEntry[] = await admin.keys({ blocked: true, limit: 50 })
  const all: KeyEntry[] = await admin.keys()
  return blocked.blockedForMs + blocked.level + lifted.level + now.blockedForMs + keys.length + all.length + blocked.key.length + blocked.name.length
}
void blocks
// @ts-expect-error block needs forMs
void admin.block('203.0.113.9')
// @ts-expect-error keys takes options, not a number
void admin.keys(10)
// @ts-expect-error a bucket has no period
void admin.bucket('acme', '2026-12')
// @ts-expect-error units is a number
void admin.grant('acme', '2026-12', '500')
// @ts-expect-error quotaAdmin needs { name }
quotaAdmin(stores[0])
// @ts-expect-error not an option of quotaAdmin
quotaAdmin(stores[0], { name: 'api', prefix: 'x' })

void stores, kind, clients, limiter, forged, operate, unblock
