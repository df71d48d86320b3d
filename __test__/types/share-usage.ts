// The shared limiter's types as a TypeScript user meets them (compiled by build-types.test.js).
import { KeyedQuotaClock } from 'quota-clock-source'
import type { Decision, QuotaStore, ShareOptions } from 'quota-clock-source'

declare const store: QuotaStore

const share: ShareOptions = { store, name: 'api', leaseUnits: 100, idleMs: 10_000, timeoutMs: 300, failOpen: false }
const limiter = new KeyedQuotaClock({
  capacity: 50,
  refillPerSecond: 10,
  suspendPolicy: 'ignore',
  quota: { limit: 100_000, period: { unit: 'month', timeZone: 'UTC' } },
  share,
})

async function handle(key: string): Promise<boolean> {
  const decision: Decision = await limiter.consume(key, 1)
  await limiter.close()
  return decision.allowed
}
void handle

// @ts-expect-error a plain object is not a store
const notAStore: ShareOptions = { store: { kind: 'redis' }, name: 'api' }
void notAStore
