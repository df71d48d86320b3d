// Valid, strictly typed use of quota-clock-source/http with Express 5's own types and with
// node:http. It must compile with `tsc --noEmit --strict`; each `@ts-expect-error` line must stay an error.
import http from 'node:http'
import express from 'express'
import { KeyedQuotaClock, QuotaClock, createThrottle, memoryDb } from 'quota-clock-source'
import type { Decision } from 'quota-clock-source'
import { rateLimit, clientKey } from 'quota-clock-source/http'
import type { RateLimitEntry, RateLimitInfo, RateLimitOptions, ClientKeyOptions } from 'quota-clock-source/http'

const perClient = new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' })
const perTenant = new KeyedQuotaClock({
  capacity: 200,
  refillPerSecond: 100,
  suspendPolicy: 'ignore',
  policy: (tenant) => ({ quota: { limit: 100_000, period: { unit: 'month', timeZone: tenant === 'acme' ? 'America/Los_Angeles' : 'UTC' } } }),
})
const global = new QuotaClock({ capacity: 1000, refillPerSecond: 500, suspendPolicy: 'ignore' })
const throttle = createThrottle({ db: memoryDb() })

// Express: the request type is inferred from the key function, and the middleware fits app.use.
const app = express()
app.use(rateLimit({ limiter: perClient }))
app.use(
  rateLimit({
    limits: [
      { limiter: global, name: 'site' },
      { limiter: perClient, name: 'client' },
      { limiter: perTenant, name: 'tenant', key: (req: express.Request) => req.get('X-Tenant') ?? 'anonymous', cost: () => 2 },
      { throttle, limits: { requests_per_day: 10_000 }, name: 'shared', timeoutMs: 250, failOpen: true },
    ],
    skip: (req) => req.path === '/health',
    headers: 'draft-11',
    onLimited: (req, res: express.Response, info: RateLimitInfo) => {
      const decision: Decision = info.decision
      const violated: string[] = info.violated
      res.status(429).json({ violated, wait: decision.retryAfterMs })
    },
  }),
)
app.use(rateLimit({ limiter: perClient, headers: false, key: (req) => clientKey(req, { ipv6Subnet: 64 }) }))
app.use(rateLimit<express.Request>({ limiter: perTenant, key: (req) => req.get('X-Tenant') ?? 'anonymous' }))

// node:http: no next.
const limit = rateLimit({ limiter: perClient })
http.createServer((req, res) => {
  const returned: void | Promise<void> = limit(req, res)
  void returned
  if (!res.writableEnded) res.end('hello')
})
const asyncLimit = rateLimit({ limits: [{ throttle, limits: { requests_per_minute: 60 } }] })
http.createServer(async (req, res) => {
  await asyncLimit(req, res)
  if (!res.writableEnded) res.end('hello')
})

// Keys.
const key: string = clientKey({ ip: '::1', headers: {} })
const subnet: ClientKeyOptions = { ipv6Subnet: false }
const entries: RateLimitEntry[] = [{ limiter: perClient }, { throttle, limits: { requests_per_month: 1 } }]
const options: RateLimitOptions = { limits: entries, name: 'api' }
void key, subnet, options

// @ts-expect-error express-rate-limit's keyGenerator is not an option
rateLimit({ limiter: perClient, keyGenerator: (req: express.Request) => req.ip })
// @ts-expect-error one limiter or several, not both
rateLimit({ limiter: perClient, limits: [{ limiter: global }] })
// @ts-expect-error headers is 'draft-11' or false
rateLimit({ limiter: perClient, headers: 'draft-8' })
// @ts-expect-error ipv6Subnet is a number of bits or false
clientKey({ headers: {} }, { ipv6Subnet: '56' })

// The throttle's windows are typed from the limits given (no minute window without a minute limit).
async function windows(): Promise<void> {
  const daily = await throttle.check('k', { requests_per_day: 5 })
  const count: number | null = daily.windows.day.count
  // @ts-expect-error no minute limit, so no minute window
  daily.windows.minute.count
  const limits: { requests_per_minute: number; requests_per_day?: number } = { requests_per_minute: 5 }
  const general = await throttle.check('k', limits)
  const minute: number | null = general.windows.minute.count
  // @ts-expect-error the day limit may be absent, so the day window may be too
  general.windows.day.count
  const optional = general.windows.day?.count
  void count, minute, optional
  // @ts-expect-error requests_per_hour is not a limit
  await throttle.check('k', { requests_per_day: 5, requests_per_hour: 1 })
}
void windows
