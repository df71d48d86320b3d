// Types of quota-clock-source/hono: rateLimit's options with Hono's Context, and the middleware
// typed so that `c.get('rateLimit')` is the request's decision.

import type { Context, MiddlewareHandler } from 'hono'
import type { KeyedQuotaClock, QuotaClock } from '../index.js'
import type { ClientKeyOptions, RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitRequest, RateLimitResult } from './http.js'

export type { RateLimitCheck, RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitResult } from './http.js'

/** The variables the middleware sets: `c.get('rateLimit')`. */
export type RateLimitVariables = { rateLimit: RateLimitResult }

export interface HonoRateLimitCommonOptions {
  /** The default key of every keyed entry (may answer with a promise). Default: the connection's address (`c.env.incoming`, from @hono/node-server), IPv6 grouped by /56. */
  key?: ((c: Context) => string | undefined | Promise<string | undefined>) | undefined
  cost?: ((c: Context) => number | Promise<number>) | undefined
  name?: string | undefined
  headers?: 'draft-11' | false | undefined
  skip?: ((c: Context) => boolean | Promise<boolean>) | undefined
  /** Replaces the 429 problem: returns the Response to answer with (`c.text(...)`); the RateLimit headers and `Retry-After` are already set. The info is passed second and third (so `(c, res, info)` reads it too). */
  onLimited?: ((c: Context, info: RateLimitInfo, alsoInfo: RateLimitInfo) => Response | void | Promise<Response | void>) | undefined
  mode?: RateLimitMode | undefined
  onShadowLimited?: ((c: Context, info: RateLimitInfo) => void | Promise<void>) | undefined
  /** Called once the handler's Response is made: `true` gives back what the request took. */
  refundIf?: ((c: Context, res: Response) => boolean | Promise<boolean>) | undefined
}

export type HonoRateLimitOptions =
  | (HonoRateLimitCommonOptions & { limiter: KeyedQuotaClock | QuotaClock; limits?: undefined })
  | (HonoRateLimitCommonOptions & { limits: readonly RateLimitEntry<any>[]; limiter?: undefined })

/**
 * Hono middleware (Hono 4 on Node, through @hono/node-server) deciding as quota-clock-source/http's
 * rateLimit does; the decision is `c.get('rateLimit')`; an error is thrown (to `app.onError`).
 * Throws `TypeError` / `RangeError` `ERR_INVALID_OPTION` for bad options.
 */
export function rateLimit(options: HonoRateLimitOptions): MiddlewareHandler<{ Variables: RateLimitVariables }>

export function clientKey(req: RateLimitRequest, options?: ClientKeyOptions): string
