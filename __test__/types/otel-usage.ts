// quota-clock-source/otel as a strict TypeScript user writes it (compiled by __test__/http-frameworks-types.test.js).
import { registerOtelMetrics } from 'quota-clock-source/otel'
import { KeyedQuotaClock } from 'quota-clock-source'

const limiter = new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' })
const { unregister } = registerOtelMetrics({ limiters: { api: limiter } })
unregister()
// @ts-expect-error prom-client's register is registerMetrics' option
registerOtelMetrics({ limiters: { api: limiter }, register: {} })
