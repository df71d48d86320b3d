'use strict'
// The `usage` command: what a shared quota's store has for one key and period.

const { storeCommand, NONE } = require('./quota-admin.js')

module.exports = storeCommand(
  'usage',
  "a shared quota's use for one key and period: admitted, held, granted",
  `Prints what the store has for the key in the period: the limit the latest reservation was
judged against, units granted on top of it, units used (taken from the store and not given
back) and, of those, units instances reserved and have not admitted yet. used - held is what the
instances admitted (exact once they are idle or closed).`,
  NONE,
  (admin, key, period) => admin.usage(key, period),
  () => '',
)
