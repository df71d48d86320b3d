// The ES module face of quota-clock-source. It loads the CommonJS face (index.js) so that both
// entry points share one native binding and one set of classes: `instanceof QuotaClockError`
// holds whichever way a module was loaded.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const cjs = require('./index.js')

export const {
  QuotaClock,
  QuotaClockError,
  KeyedQuotaClock,
  systemClock,
  hostElapsedRealtime,
  procUptimeElapsedRealtime,
  manualClock,
  periodFor,
  createThrottle,
  memoryDb,
} = cjs

// `import qcs from 'quota-clock-source'` gives the same object as `require('quota-clock-source')`,
// as it does for any CommonJS package.
export default cjs
