// The ES module face of quota-clock-source/http, as a TypeScript ES module sees it.
import { rateLimit, clientKey } from 'quota-clock-source/http'
import defaultExport from 'quota-clock-source/http'
import { QuotaClock } from 'quota-clock-source'

const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore' })
const middleware = rateLimit({ limiter })
const key: string = clientKey({ ip: '192.0.2.1', headers: {} })
const same: typeof rateLimit = defaultExport.rateLimit
void middleware, key, same
