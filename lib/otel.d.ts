// quota-clock-source/otel: the limiters' counters through OpenTelemetry (@opentelemetry/api, an
// optional peer dependency).
import type { Meter } from '@opentelemetry/api'
import type { KeyedQuotaClock, QuotaClock } from '../index.js'

export interface RegisterOtelMetricsOptions {
  /** The limiters to report, by name: the name is the `limiter` attribute. At least one. */
  limiters: { [name: string]: QuotaClock | KeyedQuotaClock }
  /** Default: the global MeterProvider's meter named `quota-clock-source`. */
  meter?: Meter | undefined
}

export interface RegisteredOtelMetrics {
  /** Stops reporting the limiters; calling it again does nothing. */
  unregister(): void
}

/**
 * Observable counters `quota_clock.decisions` (`limiter`, `result`), `quota_clock.anomalies`
 * (`limiter`, `kind`), `quota_clock.evictions`, `quota_clock.key_limit_refusals`,
 * `quota_clock.blocks`, `quota_clock.store.calls` (`limiter`, `outcome`) and the gauge
 * `quota_clock.keys`, read from each limiter's `stats()` when the meter collects. Throws
 * `ERR_INVALID_OPTION` on bad options and `ERR_MISSING_PEER_DEPENDENCY` without @opentelemetry/api.
 */
export function registerOtelMetrics(options: RegisterOtelMetricsOptions): RegisteredOtelMetrics
