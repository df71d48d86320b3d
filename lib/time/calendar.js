'use strict'
// Calendar periods: the type checks of a period spec (its values are checked by the Rust
// calendar) and `periodFor`, the period a wall-clock instant falls in.

const native = require('../native/native.js')
const { PERIOD_UNITS, oneOf } = require('../native/contract.js')
const { callNative } = require('../native/errors.js')
const { isPlainObject, readOptions, typeError, checkNumber } = require('../common/validate.js')

const PERIOD_KEYS = ['unit', 'timeZone', 'anchorDay', 'anchorMonth', 'anchorTime']
const UNIT_CHOICES = oneOf(PERIOD_UNITS)

/** Type checks of a QuotaPeriodSpec; value checks happen in the Rust calendar. */
function periodSpecInput(period, path) {
  if (!isPlainObject(period)) throw typeError('ERR_INVALID_OPTION', path, 'an object { unit, timeZone, ... }', period)
  const { unit, timeZone, anchorDay, anchorMonth, anchorTime } = readOptions(period, PERIOD_KEYS, path)
  if (typeof unit !== 'string') throw typeError('ERR_INVALID_OPTION', `${path}.unit`, UNIT_CHOICES, unit)
  if (typeof timeZone !== 'string') throw typeError('ERR_INVALID_OPTION', `${path}.timeZone`, "an IANA time zone name such as 'America/Los_Angeles' or 'UTC'", timeZone)
  if (anchorDay !== undefined) checkNumber(anchorDay, `${path}.anchorDay`)
  if (anchorMonth !== undefined) checkNumber(anchorMonth, `${path}.anchorMonth`)
  if (anchorTime !== undefined && typeof anchorTime !== 'string') throw typeError('ERR_INVALID_OPTION', `${path}.anchorTime`, "a local time 'HH:MM' or 'HH:MM:SS'", anchorTime)
  return { unit, timeZone, anchorDay, anchorMonth, anchorTime }
}

// A period's id as periodFor gives it: 'YYYY-MM-DD' (day, and week: its anchor date), 'YYYY-MM'
// (month), 'YYYY' (year); a year beyond 0000-9999 carries a sign and up to six digits.
const PERIOD_ID = /^([+-]\d{6}|\d{4})(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?$/

/** Whether `text` is written as a period id (a string of one of the id shapes, naming a day that exists). */
function isPeriodId(text) {
  const match = typeof text === 'string' ? PERIOD_ID.exec(text) : null
  if (match === null) return false
  if (match[5] === undefined) return true
  const year = Number(match[1])
  const month = Number(match[3])
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  const days = month === 2 ? (leap ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31
  return Number(match[5]) <= days
}

/** A native period as the public object (its fields in a fixed order). */
function toPeriod(period) {
  return { id: period.id, startMs: period.startMs, endMs: period.endMs, startKind: period.startKind, timeZone: period.timeZone }
}

/** The period of `period` (a QuotaPeriodSpec) that holds `wallMs`. */
function periodFor(period, wallMs) {
  const spec = periodSpecInput(period, 'period')
  checkNumber(wallMs, 'wallMs', 'ERR_INVALID_ARG')
  return toPeriod(callNative(() => native.periodFor(spec, wallMs, 'period')))
}

module.exports = { periodSpecInput, toPeriod, periodFor, isPeriodId }
