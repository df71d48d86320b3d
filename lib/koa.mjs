// The ES module face of quota-clock-source/koa: it loads the CommonJS module, so both share one
// set of limiter classes with the main entry point.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('./koa.js')

export const { rateLimit, clientKey } = cjs

export default cjs
