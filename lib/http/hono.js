'use strict'
// quota-clock-source/hono (its entry lib/hono.js): rateLimit as Hono middleware (Hono 4 on Node,
// through @hono/node-server). The decision is the one the Express middleware makes (./decide.js);
// this file only says how Hono sets a header, answers, goes on and fails. Callbacks get Hono's
// Context `c`; the client address is the connection's (`c.env.incoming`, which @hono/node-server
// sets). A limiter error is thrown, for `app.onError`.
//
//   app.use(rateLimit({ limiter }))        // rateLimit's options; onLimited(c, info) returns a Response
//   c.get('rateLimit')                     // the decision, for later middleware and the handler

const { createDecider } = require('./decide.js')
const { PROBLEM_CONTENT_TYPE } = require('./responses.js')
const { isPlainObject, coded } = require('../common/validate.js')
const { isThenable } = require('./plan.js')
const { requirePeer } = require('../common/peer.js')

// Hono itself is not called: the middleware is a function of (c, next). It is required so that an
// application without it is told at once, as every adapter's is.
requirePeer('hono', 'hono', 'hono >= 4, served by @hono/node-server', () => require('hono'))

// Headers go on the Node response (`c.env.outgoing`, @hono/node-server's), as Express's do: Node
// merges them into the Response's when it is written, and a Response made without headers of its
// own keeps Hono's fast path. Served another way, on the Context (`c.header`), with the lists this
// package wrote kept in its variables (Hono has no getter for a header not yet in a Response), so
// that another rateLimit on the same route appends to them.
const WRITTEN = Symbol('quota-clock-source RateLimit lists')

/** A request's way through the decision: where it went, and the Response that answers it when limited. */
class HonoStep {
  constructor(c) {
    this.c = c
    const outgoing = c.env?.outgoing
    this.outgoing = outgoing !== undefined && outgoing !== null && typeof outgoing.setHeader === 'function' ? outgoing : undefined
    this.passed = false
    this.failed = false
    this.error = undefined
    this.response = undefined
    this.finished = undefined
  }
}

/**
 * What the default key reads: the address of the connection @hono/node-server hands over as
 * `c.env.incoming` (its `ip` when a proxy-aware layer set one). Its headers are not read: Node
 * builds them on first access, and Hono has no trusted-proxy setting a warning could point to.
 */
function clientOf(c) {
  const incoming = c.env?.incoming
  if (incoming === undefined || incoming === null) {
    throw coded(
      TypeError,
      'ERR_INVALID_ARG',
      'rateLimit: the request has no client address: the default key reads the connection of @hono/node-server (c.env.incoming); serve the app with it, or give `key`',
    )
  }
  return { ip: incoming.ip ?? incoming.socket?.remoteAddress }
}

// `step` is a HonoStep: the decision's response object and its continuation.
const HONO_IO = {
  setHeader(step, name, value) {
    if (step.outgoing !== undefined) {
      step.outgoing.setHeader(name, value)
      return
    }
    step.c.header(name, value)
    const written = step.c.get(WRITTEN) ?? new Map()
    step.c.set(WRITTEN, written.set(name.toLowerCase(), value))
  },
  getHeader: (step, name) => (step.outgoing !== undefined ? step.outgoing.getHeader(name) : step.c.get(WRITTEN)?.get(name.toLowerCase())),
  sendProblem(step, status, problem) {
    step.response = step.c.body(JSON.stringify(problem), status, { 'Content-Type': PROBLEM_CONTENT_TYPE })
  },
  pass(step) {
    step.passed = true
  },
  fail(err, step) {
    step.failed = true
    step.error = err
  },
  setResult(c, result) {
    c.set('rateLimit', result)
  },
  onFinish(step, done) {
    step.finished = done
  },
  clientOf,
}

/**
 * Hono's callbacks as the decision calls them: `onLimited(c, info, info)` answers with the
 * Response it returns (else an empty 429); `refundIf(c, res)` is told the Response the handler made.
 */
function honoOptions(options) {
  if (!isPlainObject(options) || typeof options.onLimited !== 'function') return options
  const { onLimited } = options
  const answer = (step, returned) => {
    step.response = returned instanceof Response ? returned : step.c.body(null, 429)
  }
  return {
    ...options,
    onLimited(c, step, info) {
      // (info second, as Hono's callbacks take it, and third, where the Express shape (req, res, info) reads it.)
      const returned = onLimited(c, info, info)
      if (!isThenable(returned)) return answer(step, returned)
      return Promise.resolve(returned).then((value) => answer(step, value))
    },
  }
}

/** After the decision: the request's error thrown, the 429's Response, or next() (then refundIf's look at the handler's Response). */
function settle(step, c, next) {
  if (step.failed) throw step.error
  if (!step.passed) return step.response
  if (step.finished === undefined) return next()
  return next().then(() => step.finished(c.res))
}

function rateLimit(options) {
  const decide = createDecider(honoOptions(options), HONO_IO)
  // Not an async function: a request decided without awaiting goes on without a promise of its own.
  return function quotaClockRateLimit(c, next) {
    const step = new HonoStep(c)
    const pending = decide(c, step, step)
    if (pending === undefined) return settle(step, c, next)
    return pending.then(() => settle(step, c, next))
  }
}

module.exports = { rateLimit }
