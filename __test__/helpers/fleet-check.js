'use strict'

// The exactness check of a shared bucket, measured the way a user would: over the merged
// logs of every process, no interval of real time of length Δ may hold more admitted units than
// `C + R·Δ·1.001`.
//
// Each admitted unit is an interval [lo, hi] in ms of the host's one monotonic clock
// (`process.hrtime.bigint()`, the same clock in every process of a host): `lo` read just before the
// `consume` call, `hi` just after its promise settled. The admission happened somewhere inside.
// That is the only allowance made for logging delay, and it is made exactly: a set of units whose
// intervals all lie in [s, e] was admitted within some real interval of length at most `e - s`, so
// `count > C + R·(e - s)·1.001` proves the bound broken. A worker descheduled between its decision
// and its log line (a loaded machine) widens that unit's interval, which can only make the check
// more lenient for windows ending at that unit, never fail one that holds. Covered calls settle in
// a microtask, so their intervals are microseconds wide and the check is as tight as one over exact
// times; a call that waited for the store is a store round trip wide (a millisecond or two: with
// R = 20/s that is 0.04 units of refill, well under the 1 unit that a violation must exceed). No
// other allowance is added (`allowance` below is 0 unless a caller names one).
//
// The worst window: for a start s and an end e, the units with lo ≥ s and hi ≤ e number at least
// `#(hi ≤ e) - #(lo < s)` (equal unless a unit straddles s and ends after e, which only makes this
// count smaller: lenient, never a false failure). The excess `#(hi ≤ e) - #(lo < s) - C - R'·(e - s)`
// is largest with s at some unit's lo and e at some unit's hi, so with the his sorted, a suffix
// maximum of `#(hi ≤ e) - R'·e` answers every s in O(log n): O(n log n) for the whole log.
//
//   checkBucket(units, { capacity, refillPerSecond, allowance? })
//     units: [{ lo, hi }] (ms, any order; one entry per unit)
//     -> { ok, worst: { excess, count, bound, startMs, endMs }, units }
//   assertBucket(units, limits, label)  throws with the worst window when the bound is broken
//   readLogs(files, { key? })  the admitted units of worker logs (helpers/fleet-worker.js), by key

const assert = require('node:assert/strict')
const fs = require('node:fs')

const DRIFT = 1.001 // the contract allows for hosts' clocks that run at slightly different rates

function checkBucket(units, { capacity, refillPerSecond, allowance = 0 }) {
  const n = units.length
  const rate = (refillPerSecond * DRIFT) / 1000 // units per ms
  const los = units.map((unit) => unit.lo).sort((a, b) => a - b)
  const his = units.map((unit) => unit.hi).sort((a, b) => a - b)
  // best[k] = max over j ≥ k of (j + 1 - rate·his[j]), with the j that reaches it.
  const best = new Float64Array(n)
  const at = new Int32Array(n)
  for (let k = n - 1; k >= 0; k--) {
    // ties in his: j + 1 counts every unit up to his[j]; the last of equal his counts them all
    const value = k + 1 - rate * his[k]
    if (k === n - 1 || value > best[k + 1]) {
      best[k] = value
      at[k] = k
    } else {
      best[k] = best[k + 1]
      at[k] = at[k + 1]
    }
  }
  let worst = { excess: -Infinity, count: 0, bound: capacity + allowance, startMs: NaN, endMs: NaN }
  let k = 0
  for (let i = 0; i < n; i++) {
    if (i > 0 && los[i] === los[i - 1]) continue // the first of equal los has the fewest before it
    const s = los[i]
    while (k < n && his[k] < s) k++
    if (k === n) break
    const j = at[k]
    const count = j + 1 - i
    const bound = capacity + rate * (his[j] - s) + allowance
    const excess = count - bound
    if (excess > worst.excess) worst = { excess, count, bound, startMs: s, endMs: his[j] }
  }
  return { ok: !(worst.excess > 1e-9), worst, units: n }
}

function describeWorst({ worst, units }, { capacity, refillPerSecond }) {
  const { count, bound, startMs, endMs } = worst
  return `${count} units admitted within ${(endMs - startMs).toFixed(3)} ms (from ${startMs.toFixed(3)} to ${endMs.toFixed(3)} ms), ` +
    `above C + R·Δ·1.001 = ${bound.toFixed(3)} (C ${capacity}, R ${refillPerSecond}/s; ${units} units in the log)`
}

function assertBucket(units, limits, label = 'the merged log') {
  const result = checkBucket(units, limits)
  assert.ok(result.ok, `${label}: ${describeWorst(result, limits)}`)
  return result
}

/**
 * The lines of worker logs (helpers/fleet-worker.js), every file merged: one entry per call,
 * { file, key, lo, hi, n, outcome } with lo/hi in ms of process.hrtime.bigint() and outcome 'A'
 * (admitted), 'D' (denied) or an error code. A line cut short by a SIGKILL is left out.
 */
function readCalls(files) {
  const calls = []
  for (const file of files) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : ''
    for (const line of text.split('\n')) {
      const fields = line.split(' ')
      if (fields.length !== 6 || fields[5] !== '.') continue // written whole or not at all
      const [key, lo, hi, n, outcome] = fields
      calls.push({ file, key: JSON.parse(Buffer.from(key, 'base64url').toString()), lo: Number(BigInt(lo)) / 1e6, hi: Number(BigInt(hi)) / 1e6, n: Number(n), outcome })
    }
  }
  return calls
}

/** The admitted units of `calls` (of one key when given), one { lo, hi } per unit. */
function admittedUnits(calls, key) {
  const units = []
  for (const call of calls) {
    if (call.outcome !== 'A' || (key !== undefined && call.key !== key)) continue
    for (let u = 0; u < call.n; u++) units.push({ lo: call.lo, hi: call.hi })
  }
  return units
}

module.exports = { checkBucket, assertBucket, describeWorst, readCalls, admittedUnits, DRIFT }

/**
 * What one unshared bucket (capacity C, refill R per second, starting full) admits of `arrivals`
 * (times in ms, any order, `n` units each): the yardstick the fleet is measured against.
 */
function unsharedAdmits(arrivals, { capacity, refillPerSecond, n = 1 }) {
  const times = [...arrivals].sort((a, b) => a - b)
  let tokens = capacity
  let last = times.length > 0 ? times[0] : 0
  let admitted = 0
  for (const t of times) {
    tokens = Math.min(capacity, tokens + ((t - last) * refillPerSecond) / 1000)
    last = t
    if (tokens >= n) {
      tokens -= n
      admitted += n
    }
  }
  return admitted
}

module.exports.unsharedAdmits = unsharedAdmits
