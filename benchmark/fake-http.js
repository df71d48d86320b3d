'use strict'
// The fake request and response the HTTP micro-benchmarks drive a middleware with (benchmark/http.js
// and benchmark/compare-http.js): no sockets, so the middleware's own cost is what is timed.

const ADDRESSES = Array.from({ length: 100 }, (_, i) => `10.0.0.${i}`)
const APP = { get: () => false } // what express-rate-limit asks of req.app ('trust proxy')

// A new request and response object per request, as a server makes (express-rate-limit checks that
// a request is not counted twice, and appends to its response's headers).
function fakeRequest(i) {
  const ip = ADDRESSES[i % ADDRESSES.length]
  return { ip, method: 'GET', url: '/', headers: { host: 'localhost' }, socket: { remoteAddress: ip }, app: APP }
}

function fakeResponse() {
  const headers = new Map()
  return {
    headers,
    statusCode: 200,
    headersSent: false,
    setHeader(name, value) {
      headers.set(name.toLowerCase(), value)
    },
    append(name, value) {
      const previous = headers.get(name.toLowerCase())
      headers.set(name.toLowerCase(), previous === undefined ? value : [].concat(previous, value))
      return this
    },
    getHeader: (name) => headers.get(name.toLowerCase()),
    removeHeader: (name) => headers.delete(name.toLowerCase()),
    on() {},
    once() {},
    status(code) {
      this.statusCode = code
      return this
    },
    send() {},
    end() {},
  }
}

async function microCase(middleware, iterations) {
  const start = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) {
    await new Promise((resolve) => middleware(fakeRequest(i), fakeResponse(), resolve))
  }
  return Number(process.hrtime.bigint() - start) / iterations
}

module.exports = { fakeRequest, fakeResponse, microCase }
