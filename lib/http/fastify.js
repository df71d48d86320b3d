'use strict'
// quota-clock-source/fastify (its entry lib/fastify.js): rateLimit as a Fastify plugin. The
// decision is the one the Express middleware makes (./decide.js); this file only says how Fastify
// sets a header, sends a problem, goes on and fails. Wrapped with fastify-plugin so that its hooks
// apply to every route registered after it, in the registering context and its children, as
// @fastify/rate-limit's do.
//
//   await app.register(require('quota-clock-source/fastify'), { limiter })   // rateLimit's options
//   app.get('/health', { config: { rateLimit: false } }, handler)            // not limited
//   app.get('/search', { config: { rateLimit: { cost: () => 5 } } }, handler) // options of its own

const { createDecider } = require('./decide.js')
const { PROBLEM_CONTENT_TYPE } = require('./responses.js')
const { coded, describe, isPlainObject } = require('../common/validate.js')

const PEER = 'fastify-plugin'
const ROUTE_CONFIG = 'rateLimit'

function loadFastifyPlugin() {
  try {
    return require(PEER)
  } catch (error) {
    if (error === null || typeof error !== 'object' || error.code !== 'MODULE_NOT_FOUND' || !String(error.message).includes(`'${PEER}'`)) throw error
    throw coded(
      Error,
      'ERR_MISSING_PEER_DEPENDENCY',
      `quota-clock-source/fastify needs the package ${PEER} (an optional peer dependency, with fastify >= 5): npm install ${PEER}`,
      { cause: error },
    )
  }
}

const fastifyPlugin = loadFastifyPlugin()

// `reply` is Fastify's Reply; `done` the hook's callback.
const FASTIFY_IO = {
  setHeader(reply, name, value) {
    reply.header(name, value)
  },
  getHeader: (reply, name) => reply.getHeader(name),
  // request.rateLimit: the decision, for the route's handler and later hooks.
  setResult(request, result) {
    request.rateLimit = result
  },
  onFinish(reply, done) {
    reply.raw.once('finish', () => done(reply))
  },
  sendProblem(reply, status, problem) {
    // A Buffer: Fastify would append '; charset=utf-8' to a string's JSON media type, and the
    // Express middleware's answer is exactly 'application/problem+json'.
    reply.code(status).header('content-type', PROBLEM_CONTENT_TYPE).send(Buffer.from(JSON.stringify(problem)))
  },
  pass(done) {
    done()
  },
  fail(err, reply, done) {
    done(err) // Fastify's error handler answers it (setErrorHandler), as next(err) hands it to Express's
  },
}

/** A route's options: the plugin's, with the route's `config.rateLimit` on top (`limiter` and `limits` replace each other). */
function routeOptions(pluginOptions, override, url) {
  if (!isPlainObject(override)) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `rateLimit: the route ${url} has config.${ROUTE_CONFIG} = ${describe(override)}; expected false (not limited) or an object of rateLimit options`)
  }
  const merged = { ...pluginOptions, ...override }
  if (override.limiter !== undefined && override.limits === undefined) delete merged.limits
  if (override.limits !== undefined && override.limiter === undefined) delete merged.limiter
  return merged
}

/** The onRequest hook of one route's decider (callback style: it must not return a promise). */
function hookOf(decide) {
  return function quotaClockRateLimit(request, reply, done) {
    const pending = decide(request, reply, done)
    if (pending !== undefined) {
      pending.then(undefined, (err) => {
        if (!reply.sent) reply.send(err)
      })
    }
  }
}

async function quotaClockFastify(fastify, options) {
  // Bad options throw here, so `await app.register(plugin, options)` rejects with ERR_INVALID_OPTION.
  const pluginHook = hookOf(createDecider(options, FASTIFY_IO))
  // request.rateLimit declared up front, as Fastify asks of a request property (one object shape).
  if (!fastify.hasRequestDecorator('rateLimit')) fastify.decorateRequest('rateLimit', null)
  fastify.addHook('onRoute', (route) => {
    const override = route.config?.[ROUTE_CONFIG]
    if (override === false) return
    const hook = override === undefined ? pluginHook : hookOf(createDecider(routeOptions(options, override, route.url), FASTIFY_IO))
    const existing = route.onRequest
    route.onRequest = existing === undefined || existing === null ? [hook] : [...(Array.isArray(existing) ? existing : [existing]), hook]
  })
}

const plugin = fastifyPlugin(quotaClockFastify, { fastify: '>=5', name: 'quota-clock-source' })

module.exports = plugin
module.exports.default = plugin
module.exports.fastifyRateLimit = plugin
