// Types of quota-clock-source/fastify: the rateLimit options of quota-clock-source/http, with
// Fastify's request and reply, and the route config that opts a route out or gives it its own.

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { KeyedQuotaClock, QuotaClock } from '../index.js'
import type { RateLimitEntry, RateLimitInfo, RateLimitMode, RateLimitResult } from './http.js'

type FastifyRateLimitPlugin = FastifyPluginAsync<fastifyRateLimit.FastifyRateLimitOptions>

declare namespace fastifyRateLimit {
  export interface FastifyRateLimitCommonOptions {
    /** The default key of every keyed entry (may answer with a promise). Default `clientKey(request)`: `request.ip`, IPv6 grouped by /56. */
    key?: ((request: FastifyRequest) => string | Promise<string>) | undefined
    /** The default cost of every limiter entry (may answer with a promise). Default 1. */
    cost?: ((request: FastifyRequest) => number | Promise<number>) | undefined
    /** Policy name prefix of the header items (the default name of every entry). */
    name?: string | undefined
    /** `'draft-11'` (default): `RateLimit-Policy` and `RateLimit`; `false`: neither (a 429 still has `Retry-After`). */
    headers?: 'draft-11' | false | undefined
    /** `true` (or a promise of it): the request passes, takes nothing, and gets no headers. */
    skip?: ((request: FastifyRequest) => boolean | Promise<boolean>) | undefined
    /** Replaces the 429 problem response (send it with `reply`); the RateLimit headers and `Retry-After` are already set. */
    onLimited?: ((request: FastifyRequest, reply: FastifyReply, info: RateLimitInfo) => void | Promise<void>) | undefined
    /** Every entry's default `mode`. Default `'enforce'`. */
    mode?: RateLimitMode | undefined
    /** Called for each denial of a shadow entry (the request goes on), with `onLimited`'s `info`. */
    onShadowLimited?: ((request: FastifyRequest, info: RateLimitInfo) => void | Promise<void>) | undefined
    /** Called once the reply of an allowed request is sent: `true` gives back what the request took. */
    refundIf?: ((request: FastifyRequest, reply: FastifyReply) => boolean | Promise<boolean>) | undefined
  }

  /** `await app.register(fastifyRateLimit, options)`: rateLimit's options, one limiter or several entries. */
  export type FastifyRateLimitOptions =
    | (FastifyRateLimitCommonOptions & { limiter: KeyedQuotaClock | QuotaClock; limits?: undefined })
    | (FastifyRateLimitCommonOptions & { limits: readonly RateLimitEntry<FastifyRequest>[]; limiter?: undefined })

  /**
   * A route's `config.rateLimit`: `false`, not limited; an object, the plugin's options with these on
   * top (`limiter` and `limits` replace each other).
   */
  export type FastifyRateLimitRouteConfig = false | (FastifyRateLimitCommonOptions & {
    limiter?: KeyedQuotaClock | QuotaClock | undefined
    limits?: readonly RateLimitEntry<FastifyRequest>[] | undefined
  })

  export const fastifyRateLimit: FastifyRateLimitPlugin
  export { fastifyRateLimit as default }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** quota-clock-source/fastify: the decision of the request (null on a route the plugin does not limit). */
    rateLimit?: RateLimitResult | null | undefined
  }
  interface FastifyContextConfig {
    /** quota-clock-source/fastify: `false` opts the route out; an object gives it options of its own. */
    rateLimit?: fastifyRateLimit.FastifyRateLimitRouteConfig | undefined
  }
}

/**
 * The Fastify plugin: every route registered after it (in its context and the children) is limited
 * as rateLimit's Express middleware limits a request, with the same headers and the same 429 / 503
 * problem answers; errors go to Fastify's error handler. Rejects with `TypeError` / `RangeError`
 * code `ERR_INVALID_OPTION` for bad options.
 */
declare function fastifyRateLimit(...args: Parameters<FastifyRateLimitPlugin>): ReturnType<FastifyRateLimitPlugin>
export = fastifyRateLimit
