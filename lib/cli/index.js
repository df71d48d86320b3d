'use strict'
// What the command-line tool (bin/) uses of the library besides the public API (index.js): the
// period units and the calendar's range, as the native contract defines them, the shape of a
// period id, the contract's name and key sizes, the did-you-mean rule the library's own refusals use, and the one way to bound a call
// in time. bin/ requires index.js,
// the public subpath lib/shared.js and this file, and nothing else of lib/.

const { PERIOD_UNITS, MAX_WALL_MS } = require('../native/contract.js')
const { nearest, didYouMean, editDistance } = require('../common/did-you-mean.js')
const { isPeriodId } = require('../time/calendar.js')
const { withTimeout, quietTimer } = require('../common/timeout.js')
const { MAX_NAME_LENGTH, MAX_KEY_UNITS } = require('../common/validate.js')

module.exports = { PERIOD_UNITS, MAX_WALL_MS, MAX_NAME_LENGTH, MAX_KEY_UNITS, nearest, didYouMean, editDistance, isPeriodId, withTimeout, quietTimer }
