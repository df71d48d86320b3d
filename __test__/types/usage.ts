// Valid, strictly typed use of every export and every type index.d.ts declares. It must compile
// with `tsc --noEmit --strict`; each `@ts-expect-error` line must stay an error.
import {
  QuotaClock,
  QuotaClockError,
  systemClock,
  procUptimeElapsedRealtime,
  hostElapsedRealtime,
  manualClock,
  periodFor,
  KeyedQuotaClock,
} from 'quota-clock-source'
import type {
  KeyedQuotaClockOptions,
  KeyPolicy,
  QuotaClockOptions,
  QuotaPeriodSpec,
  SuspendPolicy,
  Decision,
  Status,
  Anomaly,
  AnomalyKind,
  Period,
  ClockSource,
  ManualClock,
  ManualClockInit,
  QuotaClockErrorCode,
  KeyStatus,
  BlockOptions,
} from 'quota-clock-source'

/** Compiles only when A and B are the same type. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false
function assertType<_T extends true>(): void {}

// String fields are unions of their literal values.
assertType<Equal<SuspendPolicy, 'ignore' | 'credit' | 'refuse'>>()
assertType<
  Equal<AnomalyKind, 'wall-step-back' | 'wall-step-forward' | 'suspend' | 'ambiguous-wall-jump' | 'period-regression' | 'period-skip' | 'store-clock-step'>
>()
assertType<Equal<Decision['retryAfterBasis'], 'monotonic-refill' | 'wall-period' | 'block' | null>>()
assertType<Equal<Period['startKind'], 'exact' | 'gap' | 'repeat'>>()
assertType<Equal<QuotaPeriodSpec['unit'], 'day' | 'week' | 'month' | 'year'>>()
assertType<Equal<Anomaly['kind'], AnomalyKind>>()
// QuotaClockErrorCode is every code of the native contract, checked both ways by native-contract.test.js.

// Options: every field, then the smallest valid set.
const period: QuotaPeriodSpec = {
  unit: 'month',
  timeZone: 'America/Los_Angeles',
  anchorDay: 15,
  anchorTime: '09:30',
}
const yearly: QuotaPeriodSpec = { unit: 'year', timeZone: 'UTC', anchorMonth: 4, anchorDay: 6 }
const policy: SuspendPolicy = 'credit'
const init: ManualClockInit = { monotonicMs: 0, wallMs: Date.UTC(2024, 2, 10), elapsedRealtimeMs: 0 }
const clock: ManualClock = manualClock(init)
const seen: Anomaly[] = []
const options: QuotaClockOptions = {
  capacity: 10,
  refillPerSecond: 2.5,
  initialTokens: 5,
  suspendPolicy: policy,
  quota: { limit: 1000, period },
  clock,
  onAnomaly: (anomaly) => {
    seen.push(anomaly)
  },
  earliestPlausibleWallMs: null,
}
const limiter = new QuotaClock(options)
const minimal = new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'refuse' })

// Decisions.
const decision: Decision = limiter.tryConsume()
const many: Decision = minimal.tryConsume(1)
const allowed: boolean = decision.allowed && many.allowed
const retryAfterMs: number = decision.retryAfterMs
const tokens: number = decision.tokens
const quotaRemaining: number | null = decision.quotaRemaining
// `Decision.anomalies` is `Anomaly[]` (strict TypeScript accepts the assignment).
const anomalies: Anomaly[] = decision.anomalies
const readOnlyView: readonly Anomaly[] = decision.anomalies
void readOnlyView
if (decision.retryAfterBasis === 'wall-period') {
  const waitUntilNextPeriod: number = decision.retryAfterMs
  void waitUntilNextPeriod
}

// Anomalies: an exhaustive switch over the kinds, with the optional fields each one carries.
function describeAnomaly(anomaly: Anomaly): string {
  const base = `${anomaly.detail} (monotonic ${anomaly.monotonicDeltaMs} ms, wall ${anomaly.wallDeltaMs} ms, credited ${anomaly.creditedMs} ms)`
  switch (anomaly.kind) {
    case 'wall-step-back':
    case 'wall-step-forward':
      return `${base} step ${anomaly.stepMs ?? 0}`
    case 'suspend':
      return `${base} slept ${anomaly.suspendedMs ?? 0}`
    case 'ambiguous-wall-jump':
      return base
    case 'period-regression':
      return `${base} held ${anomaly.periodId ?? ''}`
    case 'period-skip':
      return `${base} skipped ${anomaly.skipped ?? 0} to ${anomaly.periodId ?? ''}`
    case 'store-clock-step':
      return `${base} store step ${anomaly.stepMs ?? 0}`
    default: {
      const unreachable: never = anomaly.kind
      return unreachable
    }
  }
}
const lines: string[] = anomalies.map(describeAnomaly)

// Status and periods.
const status: Status = limiter.status()
const used: number | null = status.quotaUsed
// A key with a shared bucket (share.bucket) also has the fleet's tokens as last heard of.
const fleetTokens: number | undefined = status.fleetTokens
const open: Period | null = status.period
const limits: [number, number, number | null] = [status.capacity, status.refillPerSecond, status.quotaLimit]
const refunded: void = limiter.refund(1)
const plans: Record<string, KeyPolicy> = { free: { capacity: 5, quota: { limit: 100, period: { unit: 'month', timeZone: 'UTC' } } }, internal: { quota: null } }
const keyedOptions: KeyedQuotaClockOptions = { capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', maxKeys: 1000, policy: (key: string) => plans[key] }
const keyed = new KeyedQuotaClock(keyedOptions)
const keyedDecision: Decision = keyed.tryConsume('tenant-1', 2)
keyed.refund('tenant-1')
const keyedStatus: Status = keyed.status('tenant-1')
const deleted: boolean = keyed.delete('tenant-1')
const held: number = keyed.size
const image: Uint8Array = keyed.snapshot()
const restored = new KeyedQuotaClock({ ...keyedOptions, restore: image })
// @ts-expect-error a key is a string
keyed.tryConsume(42)
// Blocks: the option (forMs one number or an escalating list), block, unblock, blockedForMs.
const loginBlock: BlockOptions = { after: 5, withinMs: 60_000, forMs: [60_000, 600_000, 3_600_000], resetAfterMs: 86_400_000 }
const login = new KeyedQuotaClock({ ...keyedOptions, block: loginBlock })
new KeyedQuotaClock({ ...keyedOptions, block: { after: 3, withinMs: 1000, forMs: 5000 } })
login.block('203.0.113.9', 30_000)
const wasBlocked: boolean = login.unblock('203.0.113.9')
const blockStatus: KeyStatus = login.status('203.0.113.9')
const blockedForMs: number = blockStatus.blockedForMs
const blockBasis: Decision['retryAfterBasis'] = 'block'
const blockedCalls: number | undefined = login.stats().blocked
const blocksStarted: number | undefined = login.stats().blocks
// @ts-expect-error block needs forMs
login.block('203.0.113.9')
// @ts-expect-error block's after is a number
new KeyedQuotaClock({ ...keyedOptions, block: { after: '5', withinMs: 60_000, forMs: 60_000 } })
// @ts-expect-error block needs withinMs
new KeyedQuotaClock({ ...keyedOptions, block: { after: 5, forMs: 60_000 } })
// A quota alone: no capacity and refillPerSecond (one without the other does not compile).
const quotaAlone: QuotaClockOptions = { suspendPolicy: 'ignore', quota: { limit: 10_000, period: { unit: 'month', timeZone: 'UTC' } } }
const quotaOnly = new QuotaClock(quotaAlone)
const unlimitedTokens: number = quotaOnly.tryConsume(500).tokens
const tenants = new KeyedQuotaClock({ ...quotaAlone, policy: (key: string) => (key === 'burst' ? { capacity: 10, refillPerSecond: 1 } : undefined) })
// @ts-expect-error capacity without refillPerSecond
new QuotaClock({ suspendPolicy: 'ignore', capacity: 10, quota: { limit: 1, period: { unit: 'day', timeZone: 'UTC' } } })
// @ts-expect-error no bucket needs a quota
new QuotaClock({ suspendPolicy: 'ignore' })
limiter.refund()
const own: Period | null = limiter.periodFor(Date.UTC(2024, 5, 1))
const p: Period = periodFor(yearly, Date.UTC(2024, 5, 1))
const span: number = p.endMs - p.startMs
const id: string = p.id
const zone: string = p.timeZone

// Clock sources: the system clock, with and without a reader, and a hand-written one.
const system: ClockSource = systemClock()
const withReader: ClockSource = systemClock({ elapsedRealtimeMs: procUptimeElapsedRealtime() })
const reader: () => number = procUptimeElapsedRealtime()
const hostReader: () => number = hostElapsedRealtime()
const withHostReader: ClockSource = systemClock({ elapsedRealtimeMs: hostReader })
const custom: ClockSource = {
  monotonicMs: () => 1,
  wallMs: () => Date.now(),
}
const readings: number = system.monotonicMs() + system.wallMs() + (withReader.elapsedRealtimeMs?.() ?? reader()) + (withHostReader.elapsedRealtimeMs?.() ?? hostReader())
const fromCustom = new QuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock: custom })

// A manual clock: every control, and the read counter.
clock.advance(1_000)
clock.suspend(60_000)
clock.stepWall(-5_000)
clock.set({ monotonicMs: 10, wallMs: 20, elapsedRealtimeMs: 30 })
clock.set({})
const reads: number = clock.elapsedRealtimeReads

// Errors: QuotaClockError is an Error with a typed code.
try {
  limiter.tryConsume()
} catch (error) {
  if (error instanceof QuotaClockError) {
    const code: QuotaClockErrorCode = error.code
    const message: string = error.message
    if (code === 'ERR_MONOTONIC_REGRESSION') void message
  }
}
const made: Error = new QuotaClockError('ERR_CLOCK_READING', 'the clock threw')

// What must stay refused.
// @ts-expect-error suspendPolicy is required and has no default
new QuotaClock({ capacity: 1, refillPerSecond: 1 })
// @ts-expect-error suspendPolicy is one of three strings
new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'skip' })
// @ts-expect-error sub-day periods are not a unit
periodFor({ unit: 'hour', timeZone: 'UTC' }, 0)
// @ts-expect-error a decision is read-only data, not a promise
void decision.then
// @ts-expect-error elapsedRealtimeReads is read-only
clock.elapsedRealtimeReads = 0
// @ts-expect-error a code outside the union
new QuotaClockError('ERR_NOPE', 'no')

export const values = [allowed, retryAfterMs, tokens, quotaRemaining, lines, used, fleetTokens, open, own, span, id, zone, readings, fromCustom, reads, made]
