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
}

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
}

export type RateLimitEntry<Req extends RateLimitRequest = RateLimitRequest> = RateLimitLimiterEntry<Req> | RateLimitThrottleEntry<Req>

/** What `onLimited` is told about a denial. */
export interface RateLimitInfo {
  /** The denying limit's decision (for a throttle: its wait, basis `'wall-period'`). */
  decision: Decision
  /** The header items that denied the request, e.g. `['burst']` or `['tenant-month']`. */
  violated: string[]
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
