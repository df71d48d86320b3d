'use strict'
// The `block` command: one key blocked for a while, fleet-wide.

const { blockCommand, durationValue } = require('./block-admin.js')

const block = (admin, key, forMs) => admin.block(key, forMs)
block.prepare = (values) => {
  if (values.for === undefined) throw require('./command-line.js').usage('--for is required: how long the block lasts (30s, 5m, 1h, 1d)')
  return durationValue(values.for)
}

module.exports = blockCommand(
  'block',
  'block one key of a shared limiter for a while, fleet-wide',
  `Every instance of the limiter denies the key from its next store call for it (within a second
for a key it is denying already), until --for from now; a longer block stays. The key's level
does not change.`,
  {
    options: { for: { type: 'string' } },
    usage: ' --for <30s|5m|1h|1d|ms>',
    help: 'Options:\n  --for <duration>        how long: 30s, 5m, 1h, 1d or a number of ms (at most 365 days)\n\n',
    example: ' --for 1h',
  },
  block,
  'blocked: ',
)
