'use strict'
// quota-clock-source/hono: rateLimit as Hono middleware. It lives in lib/http/hono.js, beside the
// Express middleware whose decision it makes.

const { rateLimit } = require('./http/hono.js')
const { clientKey } = require('./http/client-key.js')

module.exports = { rateLimit, clientKey }
