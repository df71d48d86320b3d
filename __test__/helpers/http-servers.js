'use strict'
// Real servers for the HTTP middleware tests: Express 5, Express 4 and plain node:http, each on
// 127.0.0.1 and a free port, driven by fetch. (Not a test file: node --test runs *.test.js.)

const http = require('node:http')
const express5 = require('express')
const express4 = require('express4')
const { parseList } = require('structured-headers')

/** The error handler every Express app gets: it shows what reached next(err). */
function errorHandler(err, req, res, next) {
  res.status(599).json({ nextErr: true, code: err && err.code, name: err && err.name, message: err && err.message })
}

const SERVERS = {
  'Express 5': (middleware) => {
    const app = express5()
    app.use(middleware)
    app.get('/', (req, res) => res.send('hello'))
    app.use(errorHandler)
    return http.createServer(app)
  },
  'Express 4': (middleware) => {
    const app = express4()
    app.use(middleware)
    app.get('/', (req, res) => res.send('hello'))
    app.use(errorHandler)
    return http.createServer(app)
  },
  // node:http without next: an allowed request just returns (a Promise with async entries).
  'node:http': (middleware) =>
    http.createServer(async (req, res) => {
      await middleware(req, res)
      if (!res.writableEnded) res.end('hello')
    }),
}

/** Starts `kind` with `middleware` on 127.0.0.1; resolves to { url, get(path?, init?), close() }. */
async function serve(kind, middleware, { app } = {}) {
  const server = app ? http.createServer(app) : SERVERS[kind](middleware)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${server.address().port}`
  return {
    url,
    server,
    get: (path = '/', init) => fetch(url + path, init),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(resolve)
      }),
  }
}

/** A response's RateLimit / RateLimit-Policy header as { name: { param: value } } (via structured-headers). */
function items(response, header) {
  const value = response.headers.get(header)
  if (value === null) return null
  const out = {}
  for (const [name, params] of parseList(value)) {
    if (typeof name !== 'string') throw new Error(`${header}: item ${String(name)} is not an sf-string`)
    if (name in out) throw new Error(`${header}: item "${name}" appears twice`)
    out[name] = Object.fromEntries(params)
  }
  return out
}

module.exports = { SERVERS, serve, items }
