'use strict'

// The exactness check of the fleet-bucket tests (helpers/fleet-check.js) on synthetic logs: it
// passes logs a bucket could have admitted and fails those it could not (a check that cannot fail
// would prove nothing), and it never blames logging delay.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { checkBucket, assertBucket, readCalls, admittedUnits, unsharedAdmits } = require('./helpers/fleet-check.js')

const at = (...times) => times.map((t) => ({ lo: t, hi: t }))
const limits = { capacity: 10, refillPerSecond: 20 } // one unit per 50 ms

/** A bucket's admissions at full demand: C at once, then one per 1/R, for `ms`. */
function saturated({ capacity, refillPerSecond }, ms, start = 1000) {
  const times = Array.from({ length: capacity }, () => start)
  for (let t = 1000 / refillPerSecond; t <= ms; t += 1000 / refillPerSecond) times.push(start + t)
  return at(...times)
}

test('a saturated bucket passes, exactly at the bound', () => {
  const result = checkBucket(saturated(limits, 5_000), limits)
  assert.equal(result.ok, true)
  assert.ok(result.worst.excess <= 0 && result.worst.excess > -1, `worst ${JSON.stringify(result.worst)}`)
})

test('one unit more than the bound anywhere fails, and the worst window is named', () => {
  const units = saturated(limits, 5_000)
  units.push({ lo: 3_000.5, hi: 3_000.5 }) // a second unit where one was due
  const result = checkBucket(units, limits)
  assert.equal(result.ok, false)
  assert.ok(result.worst.count > result.worst.bound)
  assert.ok(result.worst.startMs <= 3_000.5 && result.worst.endMs >= 3_000.5)
  assert.throws(() => assertBucket(units, limits, 'synthetic'), /synthetic: \d+ units admitted within .* above C \+ R·Δ·1\.001/)
})

test('two full bursts C apart in time fail; C + 1 at once fails; C at once passes', () => {
  assert.equal(checkBucket(at(...Array(10).fill(0), ...Array(10).fill(100)), limits).ok, false)
  assert.equal(checkBucket(at(...Array(11).fill(0)), limits).ok, false)
  assert.equal(checkBucket(at(...Array(10).fill(0)), limits).ok, true)
  assert.equal(checkBucket([], limits).ok, true)
})

test('rate alone: R·1.002 per second for long enough fails, R·1.0005 passes (the 0.1% for hosts\' clocks)', () => {
  const r = { capacity: 1, refillPerSecond: 1000 }
  const steady = (rate, ms) => at(...Array.from({ length: Math.floor((rate * ms) / 1000) }, (_, i) => (i * 1000) / rate))
  assert.equal(checkBucket(steady(1002, 2_000), r).ok, false)
  assert.equal(checkBucket(steady(1000.5, 2_000), r).ok, true)
})

test('the units of several processes are merged: each within its share, together over the bound', () => {
  // Two processes each admitting a full C at t = 0: each log alone passes, the merged one does not.
  const a = at(...Array(10).fill(0))
  const b = at(...Array(10).fill(1))
  assert.equal(checkBucket(a, limits).ok, true)
  assert.equal(checkBucket(b, limits).ok, true)
  assert.equal(checkBucket([...a, ...b], limits).ok, false)
})

test('logging delay is never blamed: a unit logged late (a wide interval) does not fail a bucket that held', () => {
  // The true admissions are a saturated bucket; some were logged up to 40 ms late (hi) while lo
  // stays before the true time. Taking hi alone as the time would see too many units in a window.
  // (C 1: the bound is tight at every admission, not only after the first burst.)
  const tight = { capacity: 1, refillPerSecond: 20 }
  const truth = saturated(tight, 2_000)
  const logged = truth.map(({ lo }, i) => ({ lo: lo - 0.01, hi: lo + (i % 3 === 0 ? 40 : 0.02) }))
  assert.equal(checkBucket(logged, tight).ok, true)
  const hiOnly = logged.map(({ hi }) => ({ lo: hi, hi }))
  assert.equal(checkBucket(hiOnly, tight).ok, false, 'with the late time alone, the same log looks over the bound')
  // ...but wide intervals do not hide a true excess: one unit too many
  const extra = [...logged, { lo: 1_500.1, hi: 1_500.6 }]
  assert.equal(checkBucket(extra, tight).ok, false)
})

test('an allowance is added to the bound when named', () => {
  assert.equal(checkBucket(at(...Array(11).fill(0)), { ...limits, allowance: 1 }).ok, true)
})

test('worker logs are read back: whole lines only, units by key, n units per call', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-fleet-check-'))
  try {
    const file = path.join(dir, 'w.log')
    const k = (key) => Buffer.from(JSON.stringify(key)).toString('base64url')
    fs.writeFileSync(file, `${k('k:1')} 1000000 2000000 2 A .\n${k('k:1')} 3000000 3000500 1 D .\n${k('other')} 4000000 4000100 1 ERR_STORE_UNAVAILABLE .\n${k('\ud800 lone')} 4500000 4500100 1 A .\n${k('k:1')} 5000000 600`)
    const calls = readCalls([file, path.join(dir, 'missing.log')])
    assert.deepEqual(calls.map(({ key, lo, hi, n, outcome }) => ({ key, lo, hi, n, outcome })), [
      { key: 'k:1', lo: 1, hi: 2, n: 2, outcome: 'A' },
      { key: 'k:1', lo: 3, hi: 3.0005, n: 1, outcome: 'D' },
      { key: 'other', lo: 4, hi: 4.0001, n: 1, outcome: 'ERR_STORE_UNAVAILABLE' },
      { key: '\ud800 lone', lo: 4.5, hi: 4.5001, n: 1, outcome: 'A' },
    ])
    assert.deepEqual(admittedUnits(calls, 'k:1'), [{ lo: 1, hi: 2 }, { lo: 1, hi: 2 }])
    assert.deepEqual(admittedUnits(calls, 'other'), [])
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

test('the unshared yardstick: a bucket of C 10 and R 20 given 40 arrivals a second for 10 s admits 10 + 200', () => {
  const arrivals = Array.from({ length: 401 }, (_, i) => i * 25) // 0 to 10,000 ms
  assert.equal(unsharedAdmits(arrivals, limits), 10 + 200)
})

test('against brute force on random logs: never a failure without a window over the bound; exact when lo = hi', () => {
  /** The largest excess over every window [lo_i, hi_j], counting the units wholly inside. */
  function bruteForce(units, { capacity, refillPerSecond }) {
    let worst = -Infinity
    for (const { lo: s } of units) {
      for (const { hi: e } of units) {
        if (e < s) continue
        const count = units.filter((unit) => unit.lo >= s && unit.hi <= e).length
        worst = Math.max(worst, count - capacity - ((refillPerSecond * 1.001) / 1000) * (e - s))
      }
    }
    return worst
  }
  let seed = 7
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31)
  let failures = 0
  for (let run = 0; run < 300; run++) {
    const count = 1 + Math.floor(random() * 30)
    const points = run % 2 === 0
    const units = Array.from({ length: count }, () => {
      const lo = Math.floor(random() * 400)
      return { lo, hi: points ? lo : lo + Math.floor(random() * 30) }
    })
    const r = { capacity: 3, refillPerSecond: 20 }
    const result = checkBucket(units, r)
    const brute = bruteForce(units, r)
    if (!result.ok) {
      failures++
      assert.ok(brute > 1e-9, `run ${run}: a failure the brute force does not confirm`)
    }
    if (points) assert.ok(Math.abs(result.worst.excess - brute) < 1e-9, `run ${run}: ${result.worst.excess} vs ${brute}`)
  }
  assert.ok(failures > 20, `the random logs broke the bound in ${failures} runs`)
})
