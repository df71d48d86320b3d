// Limits that change while running: must compile under --strict.
import { KeyedQuotaClock, QuotaClock, type KeyPolicy, type Status } from 'quota-clock-source'

const plans = new Map<string, KeyPolicy>([['acme', { quota: { limit: 10_000, period: { unit: 'month', timeZone: 'UTC' } } }]])
const keyed = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', policy: (key) => plans.get(key), policyTtlMs: 60_000 })
plans.set('acme', { quota: { limit: 50_000, period: { unit: 'month', timeZone: 'UTC' } } })
keyed.refreshPolicy('acme')
keyed.refreshPolicy()
const refreshed: void = keyed.refreshPolicy(undefined)

const one = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore' })
const status: Status = one.setLimits({ capacity: 20 })
const removed: Status = one.setLimits({ quota: null })
const capacity: number = status.capacity

export { refreshed, removed, capacity }
