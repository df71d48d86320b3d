'use strict'
// quota-clock-source/nestjs: RateLimitGuard, @RateLimit and RateLimitException. They live in
// lib/http/nestjs.js, beside the Express middleware whose decision the guard makes.

const { RateLimitGuard, RateLimit, RateLimitException } = require('./http/nestjs.js')
const { clientKey } = require('./http/client-key.js')

module.exports = { RateLimitGuard, RateLimit, RateLimitException, clientKey }
