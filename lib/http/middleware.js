'use strict'
// rateLimit: Express/Connect middleware that is also a plain node:http handler step, a thin
// adapter over the framework-neutral decision in ./decide.js. Its options are read in ./options.js,
// the headers written by ./headers.js, its own responses by ./responses.js.

const { createDecider } = require('./decide.js')
const { failed, sendProblem } = require('./responses.js')

// `res` is Node's http.ServerResponse (Express's res extends it); `next` may be omitted with node:http.
const EXPRESS_IO = {
  setHeader: (res, name, value) => res.setHeader(name, value),
  // (A plain object standing in for a response may have neither getHeader nor once.)
  getHeader: (res, name) => (typeof res.getHeader === 'function' ? res.getHeader(name) : undefined),
  // req.rateLimit: the decision, for the handlers after this middleware.
  setResult(req, result) {
    req.rateLimit = result
  },
  onFinish(res, done) {
    if (typeof res.once === 'function') res.once('finish', () => done(res))
  },
  sendProblem,
  pass(next) {
    if (next) next() // a throw from later handlers is not the limiter's
  },
  fail: failed,
}

function rateLimit(options) {
  return createDecider(options, EXPRESS_IO)
}

module.exports = { rateLimit }
