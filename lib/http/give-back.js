'use strict'
// The all-or-nothing rollback of several limits: what an earlier limit took is given back
// without reading its clock again (a refund would read and reconcile it, and a wall jump that
// `suspendPolicy: 'refuse'` throws for, or a JS clock that throws, would keep the unit there).

const { takenPeriod, giveBackTaken } = require('../limiter/quota-clock.js')
const { takenKeyedPeriod, giveBackKeyedTaken } = require('../keyed/keyed.js')

/** The period the entry's decision just made counts its quota units in: read right after the decision. */
function periodTaken(entry) {
  return entry.keyed ? takenKeyedPeriod(entry.limiter) : takenPeriod()
}

/** Gives back what one limit took for this request: `n` tokens, and `n` quota units to the period they count in, if it is still open. */
function giveBack(entry, key, n, period) {
  if (entry.keyed) giveBackKeyedTaken(entry.limiter, key, n, period)
  else giveBackTaken(entry.limiter, n, period)
}

module.exports = { periodTaken, giveBack }
