// Types of quota-clock-source/http. Structural request and response types: Node's
// IncomingMessage / ServerResponse and Express's Request / Response fit them, and no @types package
// is needed to use them.

import type { Decision, KeyedQuotaClock, QuotaClock, Throttle, ThrottleLimits } from '../index.js'

/** What the middleware reads of a request: `ip` when a framework set it, the socket's address, the headers. */
export interface RateLimitRequest {
  ip?: string | undefined
  socket?: { remoteAddress?: string | undefined } | null | undefined
  headers: { [name: string]: string | string[] | undefined }
}

/** What the middleware writes on a response. */
export interface RateLimitResponse {
  statusCode: number
  readonly headersSent: boolean
  setHeader(name: string, value: string | number | readonly string[]): unknown
  end(chunk?: any): unknown
}

/** Express/Connect's `next`: called with nothing to go on, with an error to hand it over. */
export type RateLimitNext = (err?: any) => void

/**
 * The key of a request, or a promise of it (awaited). It may say `undefined` (a header that is
 * absent, `req.get('X-Tenant')`): that request then fails with an error naming the entry, as any
 * value that is not a valid key does; it never shares a key with other requests.
 */
export type RateLimitKey<Req extends RateLimitRequest = RateLimitRequest> = (req: Req) => string | undefined | Promise<string | undefined>

/** Tokens (and quota units) a request takes, or a promise of them (awaited). */
export type RateLimitCost<Req extends RateLimitRequest = RateLimitRequest> = (req: Req) => number | Promise<number>

/** One in-process limit: a keyed limiter (a bucket, and a quota, per key) or one limiter shared by every request. */
export interface RateLimitLimiterEntry<Req extends RateLimitRequest = RateLimitRequest> {
  limiter: KeyedQuotaClock | QuotaClock
  /** The key of a request, for a `KeyedQuotaClock` (a `QuotaClock` takes none). Default: the top-level `key`, else `clientKey(req)`. */
  key?: RateLimitKey<Req> | undefined
  /** Tokens (and quota units) the request takes, default the top-level `cost`, else 1. */
  cost?: RateLimitCost<Req> | undefined
  /** Prefixes this entry's header items: `<name>-burst`, `<name>-month`. Unique among the entries. */
  name?: string | undefined
  /** `'shadow'`: decided and counted, but its denial never denies the request (see `onShadowLimited`). Default: the top-level `mode`. */
  mode?: RateLimitMode | undefined
}

/** `'enforce'` (default): a denial denies the request. `'shadow'`: the limit is decided (and takes what it admits) but never denies; its denials go to `onShadowLimited`, and it writes no header items. */
export type RateLimitMode = 'enforce' | 'shadow'

/** The MongoDB throttle as a limit: asked after every in-process limit allowed the request. */
export interface RateLimitThrottleEntry<Req extends RateLimitRequest = RateLimitRequest> {
  throttle: Throttle
  /** At least one of the three; each window is a header item (`minute`, `day`, `month`). */
  limits: ThrottleLimits
  key?: RateLimitKey<Req> | undefined
  name?: string | undefined
  /** How long a check may take before the store counts as down, in ms. Default 300. */
  timeoutMs?: number | undefined
  /** When the store is down or slower than `timeoutMs`: `false` (default) answers 503, `true` lets the request pass. */
  failOpen?: boolean | undefined
  /** As a limiter entry's `mode`; a shadow throttle's outage lets the request pass. */
  mode?: RateLimitMode | undefined
}

export type RateLimitEntry<Req extends RateLimitRequest = RateLimitRequest> = RateLimitLimiterEntry<Req> | RateLimitThrottleEntry<Req>

/** What `onLimited` is told about a denial. */
export interface RateLimitInfo {
  /** The denying limit's decision (for a throttle: its wait, basis `'wall-period'`). */
  decision: Decision
  /** The header items that denied the request, e.g. `['burst']` or `['tenant-month']`. */
  violated: string[]
}

/** One limit a request was checked against, as the request's result reports it. */
export interface RateLimitCheck {
  /** The entry's `name` (undefined without one). */
  name: string | undefined
  mode: RateLimitMode
  /** The key it was asked for (undefined for a `QuotaClock`). */
  key: string | undefined
  /** The units it was asked for. */
  cost: number
  /** Its decision, as it was made (a throttle's: its wait, or its smallest window's remaining). */
  decision: Decision
}

/**
 * The decision of a request, where the framework's handlers read it: Express `req.rateLimit`,
 * Fastify `request.rateLimit`, Koa `ctx.state.rateLimit`, Hono `c.get('rateLimit')`, NestJS the
 * platform request's `rateLimit`. Each rateLimit sets its own (the later one replaces it).
 */
export interface RateLimitResult {
  /** Whether this rateLimit let the request through (shadow denials do not deny). */
  allowed: boolean
  /** The limits checked, in the order they were (those after an enforced denial are not). */
  limits: RateLimitCheck[]
}

declare global {
  namespace Express {
    interface Request {
      /** quota-clock-source/http: the decision of the last rateLimit this request went through. */
      rateLimit?: RateLimitResult | undefined
    }
  }
}

interface RateLimitCommonOptions<Req extends RateLimitRequest, Res extends RateLimitResponse> {
  /** The default key of every keyed entry. Default `clientKey(req)`. */
  key?: RateLimitKey<Req> | undefined
  /** The default cost of every limiter entry. Default 1. */
  cost?: RateLimitCost<Req> | undefined
  /** Policy name prefix of the header items (the default name of every entry). */
  name?: string | undefined
  /** `'draft-11'` (default): `RateLimit-Policy` and `RateLimit`; `false`: neither (a 429 still has `Retry-After`). */
  headers?: 'draft-11' | false | undefined
  /** `true`: the request passes, takes nothing, and gets no headers. */
  skip?: ((req: Req) => boolean | Promise<boolean>) | undefined
  /** Replaces the 429 problem response; the RateLimit headers and `Retry-After` are already set. */
  onLimited?: ((req: Req, res: Res, info: RateLimitInfo) => void | Promise<void>) | undefined
  /** Every entry's default `mode`. Default `'enforce'`. */
  mode?: RateLimitMode | undefined
  /** Called for each denial of a shadow entry (the request goes on), with `onLimited`'s `info`. */
  onShadowLimited?: ((req: Req, info: RateLimitInfo) => void | Promise<void>) | undefined
  /** Called once the response of an allowed request is finished: `true` gives back what it took in every in-process and shared entry (`skipFailedRequests`: `(req, res) => res.statusCode >= 400`). */
  refundIf?: ((req: Req, res: Res) => boolean | Promise<boolean>) | undefined
}

export type RateLimitOptions<Req extends RateLimitRequest = RateLimitRequest, Res extends RateLimitResponse = RateLimitResponse> =
  | (RateLimitCommonOptions<Req, Res> & { limiter: KeyedQuotaClock | QuotaClock; limits?: undefined })
  | (RateLimitCommonOptions<Req, Res> & { limits: readonly RateLimitEntry<Req>[]; limiter?: undefined })

/**
 * Express/Connect middleware, and a plain node:http handler step (`next` omitted: an allowed request
 * just returns, a limited one has been answered). Returns a Promise when a throttle entry is present.
 * Throws `TypeError` / `RangeError` code `ERR_INVALID_OPTION` for bad options. The request type
 * of your functions is inferred from their annotation (`key: (req: express.Request) => ...`), or
 * given: `rateLimit<express.Request>({ ... })`.
 */
export function rateLimit<Req extends RateLimitRequest = RateLimitRequest, Res extends RateLimitResponse = RateLimitResponse>(
  options: RateLimitOptions<Req, Res>,
): (req: Req, res: Res, next?: RateLimitNext) => void | Promise<void>

export interface ClientKeyOptions {
  /** IPv6 addresses are grouped by this many leading bits (1..128, default 56); `false` keys each address by itself. */
  ipv6Subnet?: number | false | undefined
}

/**
 * The client's address as a key: `req.ip` when a framework set it, else `req.socket.remoteAddress`;
 * `'::ffff:1.2.3.4'` is `'1.2.3.4'`; other IPv6 addresses become their prefix, `'2001:db8:1:200::/56'`.
 * Never reads X-Forwarded-For.
 */
export function clientKey(req: RateLimitRequest, options?: ClientKeyOptions): string
