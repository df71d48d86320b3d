'use strict'
// quota-clock-source/koa (its entry lib/koa.js): rateLimit as Koa middleware (Koa 2 and 3). The
// decision is the one the Express middleware makes (./decide.js); this file only says how Koa sets
// a header, sends a problem, goes on and fails. Callbacks get Koa's `ctx` as the request and
// `ctx.response` as the response; the client address is `ctx.ip` (which follows `app.proxy`).
//
//   app.use(rateLimit({ limiter }))        // rateLimit's options
//   ctx.state.rateLimit                    // the decision, for later middleware and the handler

const { createDecider } = require('./decide.js')
const { PROBLEM_CONTENT_TYPE } = require('./responses.js')
const { requirePeer } = require('../common/peer.js')

// Koa itself is not called: the middleware is a function of (ctx, next). It is required so that an
// application without it is told at once, as every adapter's is.
requirePeer('koa', 'koa', 'koa >= 2', () => require('koa'))

/** A request's way through the decision: where it went (on, or to the error path). */
class KoaStep {
  constructor() {
    this.passed = false
    this.failed = false
    this.error = undefined
  }
}

// `response` is Koa's ctx.response; `step` a KoaStep.
const KOA_IO = {
  // Node's response itself, as Koa's response.set and .get end up using it: for one string value
  // they build arrays (set) or copy every header (get) first.
  setHeader(response, name, value) {
    if (!response.res.headersSent) response.res.setHeader(name, value)
  },
  getHeader: (response, name) => response.res.getHeader(name),
  sendProblem(response, status, problem) {
    response.status = status
    // The type first: Koa keeps a Content-Type already set when the body is assigned.
    response.set('Content-Type', PROBLEM_CONTENT_TYPE)
    response.body = Buffer.from(JSON.stringify(problem))
  },
  pass(step) {
    step.passed = true
  },
  fail(err, response, step) {
    step.failed = true
    step.error = err
  },
  setResult(ctx, result) {
    ctx.state.rateLimit = result
  },
  onFinish(response, done) {
    response.res.once('finish', () => done(response))
  },
  // The default key reads `ctx.request` (its ip, headers and socket), where ctx's own getters lead.
  clientOf: (ctx) => ctx.request ?? ctx,
}

/** Goes on (next's promise), or throws the request's error (Koa's error path); a limited request is answered. */
function settle(step, next) {
  if (step.failed) throw step.error
  return step.passed ? next() : undefined
}

function rateLimit(options) {
  const decide = createDecider(options, KOA_IO)
  return function quotaClockRateLimit(ctx, next) {
    const step = new KoaStep()
    const pending = decide(ctx, ctx.response, step)
    if (pending === undefined) return settle(step, next)
    return pending.then(() => settle(step, next))
  }
}

module.exports = { rateLimit }
