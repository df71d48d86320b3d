// quota-clock-source/koa as a strict TypeScript user writes it (compiled by __test__/http-frameworks-types.test.js).
import { rateLimit, clientKey, type KoaRateLimitContext, type RateLimitResult } from 'quota-clock-source/koa'
import { KeyedQuotaClock, QuotaClock } from 'quota-clock-source'

const perClient = new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' })
const site = new QuotaClock({ capacity: 1000, refillPerSecond: 100, suspendPolicy: 'ignore' })

export const middleware = rateLimit({
  limits: [
    { limiter: site, name: 'site' },
    { limiter: perClient, name: 'client', mode: 'shadow', key: (ctx: KoaRateLimitContext) => clientKey(ctx) },
  ],
  skip: async (ctx) => ctx.headers['x-health'] !== undefined,
  onLimited: (ctx, response, info) => {
    response.status = 429
    response.body = { wait: info.decision.retryAfterMs }
  },
  onShadowLimited: (ctx, info) => void info.violated,
  refundIf: (ctx, response) => response.status >= 500,
})

export async function handler(ctx: KoaRateLimitContext): Promise<void> {
  await middleware(ctx, async () => {})
  const result: RateLimitResult | undefined = ctx.state.rateLimit
  void result?.limits.map((check) => check.decision.tokens)
}

// @ts-expect-error express-rate-limit's option is not one of rateLimit's
rateLimit({ limiter: site, keyGenerator: () => 'k' })
// @ts-expect-error a mode is 'enforce' or 'shadow'
rateLimit({ limiter: site, mode: 'dry-run' })
