// Valid, strictly typed use of quota-clock-source/metrics and of stats(). It must compile with
// `tsc --noEmit --strict`; each `@ts-expect-error` line must stay an error.
import { Registry } from 'prom-client'
import type { Counter, Gauge } from 'prom-client'
import { KeyedQuotaClock, QuotaClock } from 'quota-clock-source'
import type { AnomalyKind, LimiterStats, StoreStats } from 'quota-clock-source'
import { registerMetrics } from 'quota-clock-source/metrics'
import type { QuotaClockCollectors, RegisteredMetrics, RegisterMetricsOptions } from 'quota-clock-source/metrics'

const site = new QuotaClock({ capacity: 100, refillPerSecond: 50, suspendPolicy: 'ignore' })
const tenants = new KeyedQuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', maxKeys: 10_000 })

const stats: LimiterStats = tenants.stats()
const counts: number[] = [stats.allowed, stats.denied, stats.keys, stats.evicted, stats.keyLimitRefusals]
const kind: AnomalyKind = 'suspend'
const suspends: number = stats.anomalies[kind]
const byKind: Record<AnomalyKind, number> = site.stats().anomalies
const store: StoreStats | undefined = stats.store
if (store !== undefined) counts.push(store.calls, store.errors, store.timeouts, store.reserved, store.returned)
// @ts-expect-error: not an anomaly kind
void stats.anomalies['wall-step']

const register = new Registry()
const options: RegisterMetricsOptions = { register, limiters: { site, tenants } }
const registered: RegisteredMetrics = registerMetrics(options)
const collectors: QuotaClockCollectors = registered.collectors
const decisions: Counter<'limiter' | 'result'> = collectors.decisions
const keys: Gauge<'limiter'> = collectors.keys
const storeCalls: Counter<'limiter' | 'outcome'> | undefined = collectors.storeCalls
registered.unregister()
registerMetrics({ limiters: { site } }).unregister()
// @ts-expect-error: limiters is required
registerMetrics({ register })
// @ts-expect-error: a limiter must be one of this package's
registerMetrics({ limiters: { other: { tryConsume: () => true } } })
// @ts-expect-error: unknown option
registerMetrics({ limiters: { site }, prefix: 'app_' })

void counts, suspends, byKind, decisions, keys, storeCalls
