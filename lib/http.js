'use strict'
// quota-clock-source/http: `rateLimit`, Express/Connect middleware that is also a plain node:http
// handler step, and `clientKey`, the default key. The parts live in lib/http/.

const { rateLimit } = require('./http/middleware.js')
const { clientKey } = require('./http/client-key.js')

module.exports = { rateLimit, clientKey }
