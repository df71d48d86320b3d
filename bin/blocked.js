'use strict'
// The `blocked` command: whether one key is blocked, and for how long.

const { blockCommand } = require('./block-admin.js')

module.exports = blockCommand(
  'blocked',
  'show whether one key of a shared limiter is blocked, and for how long',
  "Reads the key's block and level in the store (changing nothing).",
  { options: {}, usage: '', help: '', example: '' },
  (admin, key) => admin.blocked(key),
  '',
)
