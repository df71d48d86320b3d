'use strict'
// Real servers for the behavioural cases every framework adapter must pass (./http-cases.js):
// rateLimit on Express 5, Express 4 and plain node:http, and the Fastify plugin on a real socket
// and through Fastify's inject. Each is started from rateLimit's options and answers through the
// fetch API's Response. (Not a test file: node --test runs *.test.js.)

const http = require('node:http')
const express5 = require('express')
const express4 = require('express4')
const { rateLimit } = require('../../lib/http.js')

// What reached the error path: Express's error handler (next(err)) and Fastify's (done(err)) both
// answer 599 with the error's fields; node:http without next answers the middleware's own 500.
const ERROR_STATUS = 599
function errorBody(err) {
  return { nextErr: true, code: err && err.code, name: err && err.name, message: err && err.message }
}

/** node:http has no trust proxy: a framework that trusts the proxy sets req.ip from its header. */
function lastForwarded(req) {
  const header = req.headers['x-forwarded-for']
  if (typeof header !== 'string') return undefined
  const parts = header.split(',')
  return parts[parts.length - 1].trim()
}

function expressApp(express, options, { trustProxy, state }) {
  const app = express()
  if (trustProxy) app.set('trust proxy', true)
  app.use(rateLimit(options))
  app.get('/', (req, res) => {
    state.hits++
    res.send('hello')
  })
  app.use((err, req, res, _next) => res.status(ERROR_STATUS).json(errorBody(err))) // arity 4: Express's error handler
  return http.createServer(app)
}

async function fastifyApp(options, { trustProxy, state }) {
  const app = require('fastify')({ trustProxy: Boolean(trustProxy) })
  app.setErrorHandler((err, request, reply) => reply.code(ERROR_STATUS).send(errorBody(err)))
  await app.register(require('../../lib/fastify.js'), options)
  app.get('/', async () => {
    state.hits++
    return 'hello'
  })
  return app
}

async function listen(server) {
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${server.address().port}`
}

function overSocket(url, close, state) {
  return { state, get: (path = '/', init) => fetch(url + path, init), close }
}

function closeServer(server) {
  return () =>
    new Promise((resolve) => {
      server.closeAllConnections()
      server.close(resolve)
    })
}

const FRAMEWORKS = {
  'Express 5': {
    async start(options, settings) {
      const server = expressApp(express5, options, settings)
      return overSocket(await listen(server), closeServer(server), settings.state)
    },
  },
  'Express 4': {
    async start(options, settings) {
      const server = expressApp(express4, options, settings)
      return overSocket(await listen(server), closeServer(server), settings.state)
    },
  },
  'node:http': {
    withoutNext: true,
    async start(options, { trustProxy, state }) {
      const middleware = rateLimit(options)
      const server = http.createServer(async (req, res) => {
        if (trustProxy) req.ip = lastForwarded(req) ?? req.socket.remoteAddress
        await middleware(req, res)
        if (res.writableEnded) return
        state.hits++
        res.end('hello')
      })
      return overSocket(await listen(server), closeServer(server), state)
    },
  },
  'Fastify (socket)': {
    fastify: true,
    async start(options, settings) {
      const app = await fastifyApp(options, settings)
      const url = await app.listen({ port: 0, host: '127.0.0.1' })
      return overSocket(url, () => app.close(), settings.state)
    },
  },
  'Fastify (inject)': {
    fastify: true,
    async start(options, settings) {
      const app = await fastifyApp(options, settings)
      await app.ready()
      return {
        state: settings.state,
        async get(path = '/', init = {}) {
          const injected = await app.inject({ method: init.method ?? 'GET', url: path, headers: init.headers, remoteAddress: init.remoteAddress })
          const headers = new Headers()
          for (const [name, value] of Object.entries(injected.headers)) {
            for (const one of Array.isArray(value) ? value : [value]) headers.append(name, String(one))
          }
          return new Response(injected.rawPayload.length === 0 ? null : injected.rawPayload, { status: injected.statusCode, headers })
        },
        close: () => app.close(),
      }
    },
  },
}

/** Starts `kind` with rateLimit's `options`; resolves to { get(path?, init?), close(), state: { hits } }. */
function start(kind, options, { trustProxy = false } = {}) {
  return FRAMEWORKS[kind].start(options, { trustProxy, state: { hits: 0 } })
}

/** How a framework's onLimited writes its own response. */
function replyText(kind, res, status, text) {
  if (FRAMEWORKS[kind].fastify) {
    res.code(status).header('content-type', 'text/plain').send(text)
    return
  }
  res.statusCode = status
  res.setHeader('Content-Type', 'text/plain')
  res.end(text)
}

module.exports = { FRAMEWORKS, ERROR_STATUS, start, replyText }
