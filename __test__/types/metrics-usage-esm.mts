// The ES module face of quota-clock-source/metrics, as a TypeScript ES module sees it.
import { registerMetrics } from 'quota-clock-source/metrics'
import { QuotaClock } from 'quota-clock-source'
import type { LimiterStats } from 'quota-clock-source'

const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore' })
const stats: LimiterStats = limiter.stats()
const { collectors, unregister } = registerMetrics({ limiters: { api: limiter } })
void stats, collectors, unregister
