'use strict'
// quota-clock-source/fastify: rateLimit as a Fastify plugin (with `default` and `fastifyRateLimit`
// naming the same plugin). It lives in lib/http/fastify.js, beside the Express middleware whose
// decision it makes.

module.exports = require('./http/fastify.js')
