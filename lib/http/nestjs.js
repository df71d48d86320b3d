'use strict'
// quota-clock-source/nestjs (its entry lib/nestjs.js): `RateLimitGuard`, `@RateLimit` and
// `RateLimitException` for NestJS 10 and 11, on its Express and Fastify platforms. The decision is
// the one the Express middleware makes (./decide.js); this file only says how a guard sets a
// header, denies (a RateLimitException, an HttpException with the problem body, for the
// application's exception filters), goes on and fails (the error thrown). Callbacks get the
// platform's request (`context.switchToHttp().getRequest()`) and response.
//
//   app.useGlobalGuards(new RateLimitGuard({ limiter }))     // or { provide: APP_GUARD, useValue }
//   @RateLimit({ cost: () => 5 })  @RateLimit(false)          // a controller's or handler's own options

const { createDecider } = require('./decide.js')
const { checkPartialOptions } = require('./options.js')
const { quotaExceededProblem, PROBLEM_CONTENT_TYPE } = require('./responses.js')
const { isPlainObject, coded, describe } = require('../common/validate.js')
const { isThenable, isError } = require('./plan.js')
const { requirePeer } = require('../common/peer.js')

const { HttpException, SetMetadata } = requirePeer('@nestjs/common', 'nestjs', '@nestjs/common >= 10 with @nestjs/core', () => require('@nestjs/common'))

// The metadata key @RateLimit writes on a controller class or a handler.
const RATE_LIMIT_METADATA = 'quota-clock-source:rate-limit'

/** A denial: status 429, its response the RFC 9457 problem body; `Retry-After` and the RateLimit headers are already set. */
class RateLimitException extends HttpException {
  constructor(problem) {
    super(problem, 429)
    this.name = 'RateLimitException'
  }
}

/** A request's way through the decision: the platform's response, where the request went, the exception of a denial. */
class NestStep {
  constructor(response) {
    this.response = response
    this.passed = false
    this.failed = false
    this.error = undefined
    this.exception = undefined
  }
}

/**
 * The problem's type on an Express response whose head is still to be written: the JSON type the
 * exception filter's `res.json` gives it becomes the problem's (a filter that answers with another
 * type keeps its own).
 */
function problemTypeAtHead(response) {
  if (typeof response.writeHead !== 'function' || response.headersSent) return
  const own = Object.hasOwn(response, 'writeHead')
  const writeHead = response.writeHead
  response.writeHead = function writeProblemHead(...args) {
    if (own) response.writeHead = writeHead
    else delete response.writeHead
    const type = response.getHeader('Content-Type')
    if (typeof type === 'string' && type.startsWith('application/json')) response.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
    return writeHead.apply(this, args)
  }
}

/** Fastify's reply (Nest's Fastify platform) rather than Node's ServerResponse (its Express platform). */
function isReply(response) {
  return typeof response.header === 'function' && typeof response.code === 'function' && response.raw !== undefined
}

const NEST_IO = {
  setHeader(step, name, value) {
    if (isReply(step.response)) step.response.header(name, value)
    else step.response.setHeader(name, value)
  },
  getHeader: (step, name) => step.response.getHeader(name),
  // The exception filters send the body; its type is the problem's, as every adapter sends it:
  // set on Fastify's reply now, and on Express's response as its head is written (Nest's Express
  // platform replaces a type set before with JSON's, warning; its Fastify platform keeps it).
  sendProblem(step, status, problem) {
    const response = step.response
    if (isReply(response)) response.header('Content-Type', PROBLEM_CONTENT_TYPE)
    else problemTypeAtHead(response)
    step.exception = status === 429 ? new RateLimitException(problem) : new HttpException(problem, status)
  },
  pass(step) {
    step.passed = true
  },
  fail(err, step) {
    step.failed = true
    step.error = err
  },
  setResult(request, result) {
    request.rateLimit = result
  },
  onFinish(step, done) {
    ;(step.response.raw ?? step.response).once('finish', () => done(step.response))
  },
}

/** True (the handler runs), or throws: the request's error, or the denial's exception. */
function settle(step) {
  if (step.failed) throw step.error
  if (step.passed) return true
  throw step.exception
}

/**
 * Nest's callbacks as the decision calls them: `onLimited(request, response, info)` may return (or
 * throw) the exception to throw instead of the RateLimitException.
 */
function nestOptions(options) {
  if (!isPlainObject(options) || typeof options.onLimited !== 'function') return options
  const { onLimited } = options
  const answer = (step, returned, info) => {
    step.exception = isError(returned) ? returned : new RateLimitException(quotaExceededProblem(info.decision, info.violated))
  }
  return {
    ...options,
    onLimited(request, step, info) {
      const returned = onLimited(request, step.response, info)
      if (!isThenable(returned)) return answer(step, returned, info)
      return Promise.resolve(returned).then((value) => answer(step, value, info))
    },
  }
}

/** The guard's options with a controller's or handler's own on top (`limiter` and `limits` replace each other). */
function mergeOptions(base, own) {
  const merged = { ...base, ...own }
  if (own.limiter !== undefined && own.limits === undefined) delete merged.limits
  if (own.limits !== undefined && own.limiter === undefined) delete merged.limiter
  return merged
}

function checkOwn(own) {
  if (own !== false && !isPlainObject(own)) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `@RateLimit: expected false (not limited) or an object of rateLimit options, received ${describe(own)}`)
  }
  // What can be checked of a part alone is checked where the decorator is applied (the whole, once
  // merged over the guard's, when the handler's first request comes).
  if (own !== false) checkPartialOptions(own)
  return own
}

/** `@RateLimit(options | false)` on a controller or a handler: its own options on top of the guard's, or no limit there. */
function RateLimit(options) {
  return SetMetadata(RATE_LIMIT_METADATA, checkOwn(options))
}

function metadataOf(target) {
  return typeof Reflect.getMetadata === 'function' ? Reflect.getMetadata(RATE_LIMIT_METADATA, target) : undefined
}

class RateLimitGuard {
  #options
  #decide
  // A handler's decider (null: not limited), made when its first request arrives; by handler, then class.
  #byHandler = new WeakMap()

  constructor(options) {
    this.#options = options
    // Bad options throw here, where the guard is made.
    this.#decide = createDecider(nestOptions(options), NEST_IO)
  }

  #deciderFor(handler, controller) {
    let byClass = this.#byHandler.get(handler)
    if (byClass === undefined) this.#byHandler.set(handler, (byClass = new WeakMap()))
    let decide = byClass.get(controller)
    if (decide !== undefined) return decide
    const onHandler = metadataOf(handler)
    const onController = metadataOf(controller)
    if (onHandler === false || (onHandler === undefined && onController === false)) decide = null
    else if (onHandler === undefined && onController === undefined) decide = this.#decide
    else {
      let merged = this.#options
      if (isPlainObject(onController)) merged = mergeOptions(merged, onController)
      if (isPlainObject(onHandler)) merged = mergeOptions(merged, onHandler)
      decide = createDecider(nestOptions(merged), NEST_IO)
    }
    byClass.set(controller, decide)
    return decide
  }

  canActivate(context) {
    if (context.getType() !== 'http') return true
    const decide = this.#deciderFor(context.getHandler(), context.getClass())
    if (decide === null) return true
    const http = context.switchToHttp()
    const step = new NestStep(http.getResponse())
    const pending = decide(http.getRequest(), step, step)
    if (pending === undefined) return settle(step)
    return pending.then(() => settle(step))
  }
}

module.exports = { RateLimitGuard, RateLimit, RateLimitException, RATE_LIMIT_METADATA }
