'use strict'
// The `unblock` command: one key's block lifted, fleet-wide.

const { blockCommand, UNBLOCKED } = require('./block-admin.js')

module.exports = blockCommand(
  'unblock',
  "lift one key's block, fleet-wide",
  `Deletes the key's block and its level in the store: every instance admits the key again within
a second. Prints what was left of the block.`,
  { options: {}, usage: '', help: '', example: '' },
  (admin, key) => admin.unblock(key),
  UNBLOCKED,
)
