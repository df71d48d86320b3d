'use strict'
// The `fill` command: one key's shared bucket back to full, fleet-wide.

const { bucketCommand } = require('./bucket-admin.js')

module.exports = bucketCommand(
  'fill',
  'put a shared bucket back to full for one key (unblock it), fleet-wide',
  `Sets the tokens in the store to capacity - out, in one atomic store operation (the slices
instances took stay theirs): a key denied as saturated is admitted again within a second.`,
  (admin, key) => admin.fill(key),
  'filled: ',
)
