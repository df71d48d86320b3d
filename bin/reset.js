'use strict'
// The `reset` command: one key's shared quota started over in one period.

const { storeCommand, NONE } = require('./quota-admin.js')

module.exports = storeCommand(
  'reset',
  'start a shared quota over for one key and period (used = held, extra = 0)',
  `Sets used to what instances reserved and have not admitted (it stays theirs) and extra to 0, in one
atomic store operation: the key may use its whole limit again in that period.`,
  NONE,
  (admin, key, period) => admin.reset(key, period),
  () => 'reset: ',
)
