'use strict'
// The `grant` command: more units for one key in one period, fleet-wide.

const { storeCommand } = require('./quota-admin.js')
const { usage, integerValue } = require('./command-line.js')

/** Whether a QuotaUsage is of a record the store does not have. */
const noRecord = (usage) => usage.limit === null && usage.extra === 0 && usage.used === 0 && usage.expiresAt === null

/**
 * A grant on a record the store has, or with --create on one it has not (a mistyped --name or
 * --key must not swallow a grant): the QuotaUsage after it, with `created`.
 */
async function grant(admin, key, period, { units, create }) {
  const before = await admin.usage(key, period)
  const created = noRecord(before)
  if (created && !create) {
    throw usage(
      `no record of key '${key}' in ${period} for quota "${before.name}": nothing was granted; check --name, --key and the period, or give --create to make the record`,
    )
  }
  return { ...(await admin.grant(key, period, units)), created }
}
grant.prepare = (values) => {
  if (values.units === undefined) throw usage('--units is required: how many units to grant')
  return { units: integerValue('units', values.units, 1, Number.MAX_SAFE_INTEGER), create: values.create === true }
}

module.exports = storeCommand(
  'grant',
  "raise a shared quota's allowance for one key and period, fleet-wide",
  `Adds --units to the key's allowance for that period only (extra, on top of the limit), in
one atomic store operation; instances see it within a second. A period nobody has reserved in
yet has no record: the command says so and exits 2, unless --create makes one (kept 400 days,
or until a reservation sets its period's end); the output says when it did (JSON: created).`,
  {
    options: { units: { type: 'string' }, create: { type: 'boolean' } },
    usage: ' --units <N> [--create]',
    help: 'Options:\n  --units <N>             how many units to add (a positive integer)\n  --create                make the record if the store has none (a new name, key or period)\n\n',
    example: ' --units 500',
  },
  grant,
  (usage, { units }) => `granted ${units}${usage.created ? ' (new record, --create)' : ''}: `,
)
