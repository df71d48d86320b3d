// The ES module face of quota-clock-source/fastify: it loads the CommonJS module, so both share one
// set of limiter classes with the main entry point.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const plugin = require('./fastify.js')

export const fastifyRateLimit = plugin

export default plugin
