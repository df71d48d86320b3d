// Must NOT compile: setLimits takes a KeyPolicy, whose field is `capacity`. The types test asserts
// that tsc fails here and that its error names 'capasity'.
import { QuotaClock } from 'quota-clock-source'

const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'credit' })
export const status = limiter.setLimits({ capasity: 20 })
