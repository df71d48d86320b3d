'use strict'
// The `bucket` command: what a shared bucket's store has for one key.

const { bucketCommand } = require('./bucket-admin.js')

module.exports = bucketCommand(
  'bucket',
  "a shared bucket's tokens for one key: in the store, and out in slices",
  `Prints what the store has for the key's shared bucket (share.bucket): its capacity and
refill, the tokens in the store (refilled by the store's elapsed time since its last call, at
most C/R seconds of it; below 0 after failOpen charges) and the tokens out in the instances'
slices. Moves nothing.`,
  (admin, key) => admin.bucket(key),
  '',
)
