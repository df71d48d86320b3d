'use strict'
// Real servers for the behavioural cases every framework adapter must pass (./http-cases.js):
// rateLimit on Express 5, Express 4 and plain node:http, the Fastify plugin on a real socket and
// through Fastify's inject, the Koa and Hono middleware, and the NestJS guard on its Express and
// Fastify platforms. Each is started from rateLimit's options and answers through the fetch API's
// Response. (Not a test file: node --test runs *.test.js.)

const http = require('node:http')
const express5 = require('express')
const express4 = require('express4')
const { rateLimit } = require('../../lib/http.js')

// `options` is rateLimit's options, or an array of them: that many rateLimits, in order, on every route.
const each = (options) => (Array.isArray(options) ? options : [options])

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
  for (const one of each(options)) app.use(rateLimit(one))
  app.get('/', (req, res) => {
    state.hits++
    state.result = req.rateLimit
    res.send('hello')
  })
  app.use((err, req, res, _next) => res.status(ERROR_STATUS).json(errorBody(err))) // arity 4: Express's error handler
  return http.createServer(app)
}

async function fastifyApp(options, { trustProxy, state }) {
  const app = require('fastify')({ trustProxy: Boolean(trustProxy) })
  app.setErrorHandler((err, request, reply) => reply.code(ERROR_STATUS).send(errorBody(err)))
  for (const one of each(options)) await app.register(require('../../lib/fastify.js'), one)
  app.get('/', async (request) => {
    state.hits++
    state.result = request.rateLimit
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

function koaApp(options, { trustProxy, state }) {
  const Koa = require('koa')
  const { rateLimit: koaRateLimit } = require('../../lib/koa.js')
  const app = new Koa()
  app.proxy = Boolean(trustProxy)
  app.silent = true
  app.use(async (ctx, next) => {
    try {
      await next()
    } catch (err) {
      ctx.status = ERROR_STATUS
      ctx.body = errorBody(err)
    }
  })
  for (const one of each(options)) app.use(koaRateLimit(one))
  app.use((ctx) => {
    state.hits++
    state.result = ctx.state.rateLimit
    ctx.body = 'hello'
  })
  return http.createServer(app.callback())
}

async function honoServer(options, { trustProxy, state }) {
  const { Hono } = require('hono')
  const { serve } = require('@hono/node-server')
  const { rateLimit: honoRateLimit } = require('../../lib/hono.js')
  const app = new Hono()
  app.onError((err, c) => c.json(errorBody(err), ERROR_STATUS))
  // Hono has no trust proxy: a proxy-aware app hands the forwarded address over as the request's ip.
  if (trustProxy) {
    app.use(async (c, next) => {
      c.env.incoming.ip = lastForwarded(c.env.incoming)
      await next()
    })
  }
  for (const one of each(options)) app.use(honoRateLimit(one))
  app.get('/', (c) => {
    state.hits++
    state.result = c.get('rateLimit')
    return c.text('hello')
  })
  const server = await new Promise((resolve) => {
    const started = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(started))
  })
  return server
}

/** A Nest application (decorators applied by hand: no TypeScript) with rateLimit's guard on every route. */
async function nestApp(platform, options, { trustProxy, state }) {
  require('reflect-metadata')
  const { Module, Controller, Get, Req, Catch, HttpException } = require('@nestjs/common')
  const { NestFactory, BaseExceptionFilter } = require('@nestjs/core')
  const { RateLimitGuard } = require('../../lib/nestjs.js')
  const guards = each(options).map((one) => new RateLimitGuard(one))
  class HelloController {
    hello(request) {
      state.hits++
      state.result = request.rateLimit
      return 'hello'
    }
  }
  Req()(HelloController.prototype, 'hello', 0)
  decorateMethod(HelloController, 'hello', [Get('/')])
  Reflect.decorate([Controller()], HelloController)
  class AppModule {}
  Reflect.decorate([Module({ controllers: [HelloController] })], AppModule)
  // HttpExceptions (the guard's 429 and 503) as Nest answers them; any other error as ERROR_STATUS.
  class ErrorFilter extends BaseExceptionFilter {
    catch(exception, host) {
      if (exception instanceof HttpException) return super.catch(exception, host)
      const adapter = this.applicationRef
      const response = host.switchToHttp().getResponse()
      if (adapter.isHeadersSent(response)) return adapter.end(response)
      return adapter.reply(response, errorBody(exception), ERROR_STATUS)
    }
  }
  Reflect.decorate([Catch()], ErrorFilter)
  let adapter
  if (platform === 'fastify') {
    const { FastifyAdapter } = require('@nestjs/platform-fastify')
    adapter = new FastifyAdapter({ trustProxy: Boolean(trustProxy) })
  } else {
    const { ExpressAdapter } = require('@nestjs/platform-express')
    adapter = new ExpressAdapter()
    if (trustProxy) adapter.set('trust proxy', true)
  }
  const app = await NestFactory.create(AppModule, adapter, { logger: false, abortOnError: false })
  app.useGlobalGuards(...guards)
  app.useGlobalFilters(new ErrorFilter(app.getHttpAdapter()))
  await app.listen(0, '127.0.0.1')
  return app
}

/** Applies method decorators by hand, as TypeScript's emitted code does. */
function decorateMethod(Class, name, decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, name)
  const decorated = Reflect.decorate(decorators, Class.prototype, name, descriptor)
  Object.defineProperty(Class.prototype, name, decorated ?? descriptor)
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
      const middlewares = each(options).map(rateLimit)
      const server = http.createServer(async (req, res) => {
        if (trustProxy) req.ip = lastForwarded(req) ?? req.socket.remoteAddress
        for (const middleware of middlewares) {
          await middleware(req, res)
          if (res.writableEnded) return
        }
        state.hits++
        state.result = req.rateLimit
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

Object.assign(FRAMEWORKS, {
  Koa: {
    koa: true,
    async start(options, settings) {
      const server = koaApp(options, settings)
      return overSocket(await listen(server), closeServer(server), settings.state)
    },
  },
  Hono: {
    hono: true,
    // Hono's Context has no url or Node headers: the cases' callbacks read them through these.
    urlOf: (c) => {
      const url = new URL(c.req.url)
      return url.pathname + url.search
    },
    headerOf: (c, name) => c.req.header(name),
    async start(options, settings) {
      const server = await honoServer(options, settings)
      return overSocket(`http://127.0.0.1:${server.address().port}`, closeServer(server), settings.state)
    },
  },
  'NestJS (Express)': {
    nest: true,
    // Nest's exception filter sends the problem body, with the problem's type.
    async start(options, settings) {
      const app = await nestApp('express', options, settings)
      return overSocket(await app.getUrl(), () => app.close(), settings.state)
    },
  },
  'NestJS (Fastify)': {
    nest: true,
    fastify: true,
    // (Fastify serializes the exception filter's object and adds the charset to a JSON type.)
    problemType: 'application/problem+json; charset=utf-8',
    async start(options, settings) {
      const app = await nestApp('fastify', options, settings)
      return overSocket(await app.getUrl(), () => app.close(), settings.state)
    },
  },
})

/** A request header as `kind`'s callbacks read it from the framework's request object (Hono's Context has no Node headers). */
function headerOf(kind, req, name) {
  const framework = FRAMEWORKS[kind]
  return framework.headerOf === undefined ? req.headers[name] : framework.headerOf(req, name)
}

/** The Content-Type of `kind`'s problem answers (every adapter's the same; a framework may say otherwise). */
function problemTypeOf(kind) {
  return FRAMEWORKS[kind].problemType ?? 'application/problem+json'
}

/** Starts `kind` with rateLimit's `options`; resolves to { get(path?, init?), close(), state: { hits } }. */
function start(kind, options, { trustProxy = false } = {}) {
  return FRAMEWORKS[kind].start(options, { trustProxy, state: { hits: 0 } })
}

/** An onLimited that answers `status` with `text` as `kind` writes a response (Hono: the Response it returns), telling `seen` its info. */
function textOnLimited(kind, status, text, seen) {
  if (FRAMEWORKS[kind].hono) {
    return (c, info) => {
      seen(info)
      return c.text(text, status)
    }
  }
  return (req, res, info) => {
    seen(info)
    replyText(kind, res, status, text)
  }
}

/** How a framework's onLimited writes its own response. */
function replyText(kind, res, status, text) {
  if (FRAMEWORKS[kind].koa) {
    res.status = status
    res.set('Content-Type', 'text/plain')
    res.body = text
    return
  }
  if (FRAMEWORKS[kind].fastify) {
    res.code(status).header('content-type', 'text/plain').send(text)
    return
  }
  res.statusCode = status
  res.setHeader('Content-Type', 'text/plain')
  res.end(text)
}

module.exports = { FRAMEWORKS, ERROR_STATUS, start, replyText, textOnLimited, headerOf, problemTypeOf }
