// Must NOT compile: a decision field that does not exist (the field is `retryAfterMs`). The types
// test asserts that tsc fails here and that its error names 'retryAfter'.
import { QuotaClock } from 'quota-clock-source'

const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'credit' })
const decision = limiter.tryConsume()
export const waitMs: number = decision.retryAfter
