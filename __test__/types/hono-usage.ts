// quota-clock-source/hono as a strict TypeScript user writes it (compiled by __test__/http-frameworks-types.test.js).
import { Hono } from 'hono'
import { rateLimit, type RateLimitVariables } from 'quota-clock-source/hono'
import { KeyedQuotaClock } from 'quota-clock-source'

const limiter = new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' })

const app = new Hono<{ Variables: RateLimitVariables }>()
app.use(
  rateLimit({
    limiter,
    key: (c) => c.req.header('x-api-key') ?? 'anonymous',
    onLimited: (c, info) => c.json({ wait: info.decision.retryAfterMs }, 429),
    refundIf: (c, res) => res.status >= 500,
    mode: 'shadow',
    onShadowLimited: (c, info) => console.log(info.violated),
  }),
)
app.get('/', (c) => {
  const allowed: boolean = c.get('rateLimit').allowed
  return c.text(String(allowed))
})
export default app

// @ts-expect-error express-rate-limit's option is not one of rateLimit's
rateLimit({ limiter, windowMs: 60_000 })

// An app that does not declare the variables still takes the middleware.
const plain = new Hono()
plain.use(rateLimit({ limiter }))
plain.get('/', (c) => c.text('ok'))
