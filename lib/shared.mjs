// The ES module face of quota-clock-source/shared: it loads the CommonJS module, so both share one
// set of stores with the main entry point.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('./shared.js')

export const { redisStore, mongoStore, quotaAdmin } = cjs

export default cjs
