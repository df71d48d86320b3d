// Types of quota-clock-source/nestjs: the guard, the decorator and the exception, with rateLimit's
// options over the platform's request and response (Express's or Fastify's).

import type { CanActivate, ExecutionContext, HttpException } from '@nestjs/common'
import type { KeyedQuotaClock, QuotaClock } from '../index.js'
import type { ClientKeyOptions, RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitRequest, RateLimitResult } from './http.js'

export type { RateLimitCheck, RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitResult } from './http.js'

/** The platform's request as the guard reads it (Express's `Request`, Fastify's `FastifyRequest`); the guard sets `rateLimit` on it. */
export interface NestRateLimitRequest extends RateLimitRequest {
  rateLimit?: RateLimitResult | undefined
}

export interface NestRateLimitCommonOptions<Req = any, Res = any> {
  key?: ((request: Req) => string | undefined | Promise<string | undefined>) | undefined
  cost?: ((request: Req) => number | Promise<number>) | undefined
  name?: string | undefined
  headers?: 'draft-11' | false | undefined
  skip?: ((request: Req) => boolean | Promise<boolean>) | undefined
  /** Called on a denial; what it returns or throws (an HttpException) is thrown instead of the RateLimitException. */
  onLimited?: ((request: Req, response: Res, info: RateLimitInfo) => Error | void | Promise<Error | void>) | undefined
  mode?: RateLimitMode | undefined
  onShadowLimited?: ((request: Req, info: RateLimitInfo) => void | Promise<void>) | undefined
  /** Called once the response of an allowed request is finished: `true` gives back what it took. */
  refundIf?: ((request: Req, response: Res) => boolean | Promise<boolean>) | undefined
}

export type NestRateLimitOptions<Req = any, Res = any> =
  | (NestRateLimitCommonOptions<Req, Res> & { limiter: KeyedQuotaClock | QuotaClock; limits?: undefined })
  | (NestRateLimitCommonOptions<Req, Res> & { limits: readonly RateLimitEntry<any>[]; limiter?: undefined })

/** A controller's or handler's own options (on top of the guard's; `limiter` and `limits` replace each other). */
export type NestRateLimitOwnOptions<Req = any, Res = any> = NestRateLimitCommonOptions<Req, Res> & {
  limiter?: KeyedQuotaClock | QuotaClock | undefined
  limits?: readonly RateLimitEntry<any>[] | undefined
}

/**
 * A guard deciding as quota-clock-source/http's rateLimit does, globally (`APP_GUARD` with
 * `useValue`, `app.useGlobalGuards`) or with `@UseGuards(guard)`. A denial throws a
 * RateLimitException; an error of the limiter is thrown as it is. Throws `ERR_INVALID_OPTION` for bad options.
 */
export class RateLimitGuard implements CanActivate {
  constructor(options: NestRateLimitOptions)
  canActivate(context: ExecutionContext): boolean | Promise<boolean>
}

/** `@RateLimit(options)`: a controller's or handler's own options (the handler's over the controller's); `@RateLimit(false)`: not limited there. */
export function RateLimit(options: NestRateLimitOwnOptions | false): ClassDecorator & MethodDecorator

/** A denial: an HttpException with status 429 whose response is the RFC 9457 problem body. */
export class RateLimitException extends HttpException {
  constructor(problem: object)
}

export function clientKey(req: RateLimitRequest, options?: ClientKeyOptions): string
