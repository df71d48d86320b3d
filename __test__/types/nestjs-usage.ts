// quota-clock-source/nestjs as a strict TypeScript user writes it (compiled by __test__/http-frameworks-types.test.js).
import { HttpException } from '@nestjs/common'
import { RateLimitGuard, RateLimit, RateLimitException, type NestRateLimitRequest } from 'quota-clock-source/nestjs'
import { KeyedQuotaClock, QuotaClock } from 'quota-clock-source'

const limiter = new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' })

export const guard = new RateLimitGuard({
  limiter,
  key: (request: NestRateLimitRequest) => String(request.headers['x-api-key'] ?? 'anonymous'),
  onLimited: (request, response, info) => new HttpException({ wait: info.decision.retryAfterMs }, 429),
  refundIf: (request, response: { statusCode: number }) => response.statusCode >= 500,
})

export const own = RateLimit({ cost: () => 5, limiter: new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' }) })
export const off = RateLimit(false)
export const denial: HttpException = new RateLimitException({ status: 429 })

export function read(request: NestRateLimitRequest): number {
  return request.rateLimit?.limits.length ?? 0
}

// @ts-expect-error @RateLimit takes options or false
RateLimit(true)
