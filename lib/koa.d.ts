// Types of quota-clock-source/koa. Structural context types (Koa ships no types of its own): a
// Koa `Context` fits them, and so does @types/koa's.

import type { KeyedQuotaClock, QuotaClock } from '../index.js'
import type { ClientKeyOptions, RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitResult } from './http.js'

export type { RateLimitCheck, RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitResult } from './http.js'

/** What the middleware reads and writes of a Koa response (`ctx.response`). */
export interface KoaRateLimitResponse {
  status: number
  body: unknown
  set(field: string, value: string): void
  get(field: string): string | string[] | number | undefined
}

/** What the middleware reads of Koa's `ctx`: the client address (`ip`, which follows `app.proxy`), the headers, `state`. */
export interface KoaRateLimitContext {
  ip: string
  headers: { [name: string]: string | string[] | undefined }
  socket?: { remoteAddress?: string | undefined } | null | undefined
  state: { rateLimit?: RateLimitResult | undefined; [key: string]: any }
  response: KoaRateLimitResponse
}

export interface KoaRateLimitCommonOptions<Ctx extends KoaRateLimitContext> {
  /** The default key of every keyed entry (may answer with a promise). Default `clientKey(ctx)`: `ctx.ip`, IPv6 grouped by /56. */
  key?: ((ctx: Ctx) => string | undefined | Promise<string | undefined>) | undefined
  /** The default cost of every limiter entry (may answer with a promise). Default 1. */
  cost?: ((ctx: Ctx) => number | Promise<number>) | undefined
  name?: string | undefined
  headers?: 'draft-11' | false | undefined
  skip?: ((ctx: Ctx) => boolean | Promise<boolean>) | undefined
  /** Replaces the 429 problem: set `response.status` and `response.body`; the RateLimit headers and `Retry-After` are already set. */
  onLimited?: ((ctx: Ctx, response: Ctx['response'], info: RateLimitInfo) => void | Promise<void>) | undefined
  mode?: RateLimitMode | undefined
  onShadowLimited?: ((ctx: Ctx, info: RateLimitInfo) => void | Promise<void>) | undefined
  /** Called once the response of an allowed request is finished: `true` gives back what it took. */
  refundIf?: ((ctx: Ctx, response: Ctx['response']) => boolean | Promise<boolean>) | undefined
}

export type KoaRateLimitOptions<Ctx extends KoaRateLimitContext = KoaRateLimitContext> =
  | (KoaRateLimitCommonOptions<Ctx> & { limiter: KeyedQuotaClock | QuotaClock; limits?: undefined })
  | (KoaRateLimitCommonOptions<Ctx> & { limits: readonly RateLimitEntry<any>[]; limiter?: undefined })

/**
 * Koa middleware (Koa 2 and 3) deciding as quota-clock-source/http's rateLimit does; the decision
 * is `ctx.state.rateLimit`; an error is thrown (Koa's error path). Throws `TypeError` / `RangeError`
 * `ERR_INVALID_OPTION` for bad options.
 */
export function rateLimit<Ctx extends KoaRateLimitContext = KoaRateLimitContext>(options: KoaRateLimitOptions<Ctx>): (ctx: Ctx, next: () => Promise<any>) => Promise<void>

/** quota-clock-source/http's clientKey: a Koa `ctx` is a request it reads (`ctx.ip`). */
export function clientKey(req: { ip?: string | undefined; headers: { [name: string]: string | string[] | undefined } }, options?: ClientKeyOptions): string
