// The ES module face of quota-clock-source/metrics: it loads the CommonJS module, so both share
// one set of limiter classes (and one prom-client) with the main entry point.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('./metrics.js')

export const { registerMetrics } = cjs

export default cjs
