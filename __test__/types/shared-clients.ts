// The real clients' own types fit quota-clock-source/shared: ioredis 5+ (Redis, Cluster),
// node-redis 4+ (client, cluster) and the MongoDB driver's Db. Compiled with `tsc --noEmit --strict`.
import Redis, { Cluster } from 'ioredis'
import { createClient, createCluster } from 'redis'
import { MongoClient } from 'mongodb'
import { KeyedQuotaClock } from 'quota-clock-source'
import { redisStore, mongoStore } from 'quota-clock-source/shared'

const ioredis = new Redis({ lazyConnect: true })
const ioCluster = new Cluster([{ host: '127.0.0.1', port: 7000 }], { lazyConnect: true })
const nodeRedis = createClient({ url: 'redis://127.0.0.1:6379' })
const nodeCluster = createCluster({ rootNodes: [{ url: 'redis://127.0.0.1:7000' }] })
const db = new MongoClient('mongodb://127.0.0.1:27017').db('app')

const limiter = new KeyedQuotaClock({
  capacity: 50,
  refillPerSecond: 10,
  suspendPolicy: 'ignore',
  quota: { limit: 100_000, period: { unit: 'month', timeZone: 'UTC' } },
  share: { store: redisStore(ioredis, { prefix: 'qcs:' }), name: 'api', leaseUnits: 100 },
})
const stores = [redisStore(ioCluster), redisStore(nodeRedis), redisStore(nodeCluster), mongoStore(db, { collection: 'quota_shares' })]
void limiter, stores
