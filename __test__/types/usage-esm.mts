// The same package seen from an ES module: the "import" condition of package.json "exports".
import { QuotaClock, manualClock, type Decision, type QuotaClockOptions } from 'quota-clock-source'
import quotaClockSource from 'quota-clock-source'

const options: QuotaClockOptions = { capacity: 3, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock() }
const decision: Decision = new QuotaClock(options).tryConsume()
const viaDefault: Decision = new quotaClockSource.QuotaClock(options).tryConsume()

export const results: boolean[] = [decision.allowed, viaDefault.allowed]
