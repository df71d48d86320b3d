'use strict'
// quota-clock-source/koa: rateLimit as Koa middleware. It lives in lib/http/koa.js, beside the
// Express middleware whose decision it makes.

const { rateLimit } = require('./http/koa.js')
const { clientKey } = require('./http/client-key.js')

module.exports = { rateLimit, clientKey }
