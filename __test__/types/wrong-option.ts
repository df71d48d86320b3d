// Must NOT compile: an option name in the wrong case. The types test asserts that tsc fails here
// and that its error names 'suspendpolicy'.
import { QuotaClock } from 'quota-clock-source'

export const limiter = new QuotaClock({
  capacity: 10,
  refillPerSecond: 1,
  suspendpolicy: 'credit',
})
