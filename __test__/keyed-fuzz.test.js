'use strict'
// the option fuzzer's awkward option objects (see helpers/option-fuzz.js), with
// awkward policies, maxKeys and snapshots, given to KeyedQuotaClock: each constructs or throws a
// TypeError/RangeError with an option-error code; what constructs is used (tryConsume, refund, status,
// delete, snapshot and restore), and each use decides or throws a coded error; nothing else.
const test = require('node:test')
const assert = require('node:assert/strict')
const { fuzzer, judge, OPTION_CODES, ARG_CODES, CLOCK_CODES } = require('./helpers/option-fuzz.js')
const library = require('..')

const USE_CODES = new Set([...OPTION_CODES, ...ARG_CODES])

function judgeUse(fn) {
  try {
    fn()
    return null
  } catch (error) {
    if (error instanceof library.QuotaClockError && (CLOCK_CODES.has(error.code) || error.code === 'ERR_KEY_LIMIT')) return null
    if ((error instanceof RangeError || error instanceof TypeError) && USE_CODES.has(error.code)) return null
    return `${error && error.constructor && error.constructor.name} ${error && error.code}: ${error && error.message}`
  }
}

function keyedFuzz(count, seed) {
  const { options, anything, wrap, period } = fuzzer(library, seed)
  let state = seed
  const below = (n) => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648
    return state % n
  }
  const pick = (values) => values[below(values.length)]
  const keyPolicy = () =>
    pick([
      () => undefined,
      () => ({ capacity: pick([1, 5, 0, -1, NaN, 'x']) }),
      () => wrap({ capacity: 3, refillPerSecond: pick([1, 0.5, 0, Infinity]), initialTokens: pick([0, 1, 3, 4, anything()]) }, ['capacity', 'refillPerSecond', 'initialTokens']),
      () => ({ quota: pick([null, anything(), wrap({ limit: pick([0, 2, 1.5, -1]), period: period() }, ['limit', 'period'])]) }),
      () => ({ capcity: 5 }),
      () => anything(),
      () => new Proxy({}, { ownKeys() { throw new Error('trap') } }),
      () => { throw pick([new Error('no plan'), Symbol('odd'), null]) },
    ])()
  const tally = { constructed: 0, refused: 0, uses: 0, bad: [] }
  for (let index = 0; index < count; index++) {
    let given = options()
    try {
      given = { ...given, policy: below(2) === 0 ? () => keyPolicy() : undefined, maxKeys: pick([undefined, undefined, undefined, 1, 2, 1000, anything()]) }
    } catch {
      // An options object that cannot even be spread is still handed over as it is.
    }
    const made = judge(() => new library.KeyedQuotaClock(given), OPTION_CODES)
    if (made.outcome === 'bad' && /QuotaClockError ERR_CLOCK_READING/.test(made.text)) continue
    if (made.outcome === 'bad') tally.bad.push({ seed, index, what: 'KeyedQuotaClock', text: made.text })
    else if (made.outcome === 'coded') tally.refused++
    else {
      tally.constructed++
      const limiter = made.value
      /** A limiter made with the same options and `restore` (undefined when the options cannot be copied: their getters throw). */
      const restoreWith = (restore) => {
        let again
        try {
          again = { ...given, restore }
        } catch {
          return undefined
        }
        return new library.KeyedQuotaClock(again)
      }
      const uses = [
        () => limiter.tryConsume('k'),
        () => limiter.tryConsume('k2', 2),
        () => limiter.refund('k'),
        () => limiter.status('k'),
        () => limiter.status('fresh'),
        () => limiter.tryConsume(pick(['', 'x'.repeat(300), 5, 'ok'])),
        () => limiter.delete('k2'),
        () => restoreWith(limiter.snapshot())?.status('k'),
        () => restoreWith(limiter.snapshot().subarray(3)),
      ]
      for (const use of uses) {
        tally.uses++
        const problem = judgeUse(use)
        if (problem) tally.bad.push({ seed, index, what: 'use', text: problem })
      }
    }
  }
  return tally
}

for (const seed of [11, 12]) {
  test(`keyed fuzzer, seed ${seed}: 1,500 awkward option objects and policies construct or throw coded errors, and every use decides or throws a coded error`, () => {
    const tally = keyedFuzz(1_500, seed)
    const shown = tally.bad.slice(0, 10).map((b) => `- seed ${b.seed} case ${b.index} (${b.what}): ${b.text}`)
    assert.equal(tally.bad.length, 0, `calls that broke the contract:\n${shown.join('\n')}`)
    assert.ok(tally.constructed > 20 && tally.refused > 300, JSON.stringify({ constructed: tally.constructed, refused: tally.refused }))
  })
}
