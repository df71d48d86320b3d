'use strict'
// The `grant` command: more units for one key in one period, fleet-wide.

const { storeCommand } = require('./quota-admin.js')
const { usage, integerValue } = require('./command-line.js')

const grant = (admin, key, period, n) => admin.grant(key, period, n)
grant.prepare = (values) => {
  if (values.units === undefined) throw usage('--units is required: how many units to grant')
  return integerValue('units', values.units, 1, Number.MAX_SAFE_INTEGER)
}

module.exports = storeCommand(
  'grant',
  "raise a shared quota's allowance for one key and period, fleet-wide",
  `Adds --units to the key's allowance for that period only (extra, on top of the limit), in
one atomic store operation; instances see it within a second. A period nobody has reserved in
yet gets a record (kept 400 days, or until a reservation sets its period's end).`,
  {
    options: { units: { type: 'string' } },
    usage: ' --units <N>',
    help: 'Options:\n  --units <N>             how many units to add (a positive integer)\n\n',
    example: ' --units 500',
  },
  grant,
  (_, n) => `granted ${n}: `,
)
