// The ES module face of quota-clock-source/shared, as a TypeScript ES module sees it.
import { redisStore, mongoStore, quotaAdmin } from 'quota-clock-source/shared'
import defaultExport from 'quota-clock-source/shared'
import type { IoRedisClient, MongoDb, QuotaStore } from 'quota-clock-source/shared'

declare const ioredis: IoRedisClient
declare const db: MongoDb

const stores: QuotaStore[] = [redisStore(ioredis), mongoStore(db)]
const sameRedis: typeof redisStore = defaultExport.redisStore
const sameMongo: typeof mongoStore = defaultExport.mongoStore
const sameAdmin: typeof quotaAdmin = defaultExport.quotaAdmin
void stores, sameRedis, sameMongo, sameAdmin
