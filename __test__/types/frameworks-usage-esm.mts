// The ES module faces of quota-clock-source/koa, /hono, /nestjs and /otel, as a TypeScript ES module sees them.
import { rateLimit as koaRateLimit } from 'quota-clock-source/koa'
import { rateLimit as honoRateLimit } from 'quota-clock-source/hono'
import { RateLimitGuard } from 'quota-clock-source/nestjs'
import { registerOtelMetrics } from 'quota-clock-source/otel'
import { metrics } from '@opentelemetry/api'
import { QuotaClock } from 'quota-clock-source'

const limiter = new QuotaClock({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore' })
const middlewares = [koaRateLimit({ limiter }), honoRateLimit({ limiter }), new RateLimitGuard({ limiter, mode: 'shadow' })]
const registered = registerOtelMetrics({ limiters: { api: limiter }, meter: metrics.getMeter('app') })
registered.unregister()
void middlewares
