// The ES module face of quota-clock-source/nestjs: it loads the CommonJS module, so both share one
// set of limiter classes with the main entry point.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('./nestjs.js')

export const { RateLimitGuard, RateLimit, RateLimitException, clientKey } = cjs

export default cjs
