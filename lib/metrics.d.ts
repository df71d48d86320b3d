// quota-clock-source/metrics: Prometheus metrics through prom-client (an optional peer dependency).
import type { Counter, Gauge, Registry } from 'prom-client'
import type { KeyedQuotaClock, QuotaClock } from '../index.js'

export interface RegisterMetricsOptions {
  /**
   * The prom-client registry to register on; default the global `register` of the prom-client the
   * application loads (resolved from its main module, then the working directory).
   */
  register?: Registry | undefined
  /** The limiters to report, by name: the name is the `limiter` label. At least one. */
  limiters: { [name: string]: QuotaClock | KeyedQuotaClock }
}

/**
 * The collectors `registerMetrics` made; each reads the limiters' `stats()` at scrape time. A
 * limiter that is closed, or whose `stats()` throws or answers something that is not counters, is
 * left out of that scrape (warned once, code `QUOTA_CLOCK_METRICS_SKIPPED`).
 */
export interface QuotaClockCollectors {
  /** `quota_clock_decisions_total{limiter, result="allowed"|"denied"|"blocked"}` (`blocked`: a `KeyedQuotaClock`'s, the denials a block made; `denied` the others) */
  decisions: Counter<'limiter' | 'result'>
  /** `quota_clock_blocks_total{limiter}`: blocks started (0 for a `QuotaClock`). */
  blocks: Counter<'limiter'>
  /** `quota_clock_anomalies_total{limiter, kind}`: every anomaly kind, zeros included. */
  anomalies: Counter<'limiter' | 'kind'>
  /** `quota_clock_keys{limiter}`: keys held now (1 for a `QuotaClock`). */
  keys: Gauge<'limiter'>
  /** `quota_clock_evictions_total{limiter}`: keys the limiter dropped by itself. */
  evictions: Counter<'limiter'>
  /** `quota_clock_store_calls_total{limiter, outcome="ok"|"error"|"timeout"}`: only when a limiter is shared. */
  storeCalls?: Counter<'limiter' | 'outcome'>
}

export interface RegisteredMetrics {
  collectors: QuotaClockCollectors
  /** Removes these collectors from the registry (then the limiters can be collected); calling it again does nothing. */
  unregister(): void
}

/**
 * Registers the quota_clock_* collectors for `limiters` on a prom-client registry. Throws
 * `TypeError`/`RangeError` `ERR_INVALID_OPTION` on bad options (an unknown key, a limiter that is
 * not a `QuotaClock`/`KeyedQuotaClock` of this package, a registry that already has these metrics),
 * and `Error` `ERR_MISSING_PEER_DEPENDENCY` when the application has no prom-client (pass `register`).
 */
export function registerMetrics(options: RegisterMetricsOptions): RegisteredMetrics
