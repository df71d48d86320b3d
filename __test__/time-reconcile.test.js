'use strict'
// reconciling the monotonic and the wall reading. One test per table row and per sentence,
// driven by manualClock. Expected numbers are computed by hand from the spec:
//   tol = 250 + 0.0005 * dm, credited e per row, suspended = max(0, (er - er0) - (m - m0)),
//   stepMs = dw - dm - suspended.
// The bucket refills 1000 tokens per second (1 token per credited ms) from 0, and every probe asks
// for the whole (huge) capacity, so it is always denied, consumes nothing, and `decision.tokens`
// is exactly the total credited time in ms.

const test = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, manualClock, QuotaClockError } = require('..')

const W0 = Date.UTC(2024, 0, 15, 12) // noon UTC; no quota in this file anyway
const CAP = 1e9
const tol = (dm) => 250 + 0.0005 * dm

function near(actual, expected, message) {
  assert.ok(Math.abs(actual - expected) < 1e-6, `${message || 'value'}: expected ${expected}, got ${actual}`)
}

function setup({ policy = 'ignore', reader = false } = {}) {
  const clock = manualClock(reader ? { monotonicMs: 0, wallMs: W0, elapsedRealtimeMs: 0 } : { monotonicMs: 0, wallMs: W0 })
  const delivered = []
  const limiter = new QuotaClock({
    capacity: CAP,
    refillPerSecond: 1000,
    initialTokens: 0,
    suspendPolicy: policy,
    clock,
    onAnomaly: (a) => delivered.push(a),
  })
  const probe = () => {
    const d = limiter.tryConsume(CAP)
    assert.equal(d.allowed, false, 'the probe never fits the bucket')
    return d
  }
  return { clock, limiter, probe, delivered }
}

const kinds = (d) => d.anomalies.map((a) => a.kind).sort()
const find = (d, kind) => d.anomalies.find((a) => a.kind === kind)
const tick = () => new Promise((resolve) => setTimeout(resolve, 30))

function assertThrowsCode(fn, code) {
  assert.throws(fn, (error) => {
    assert.ok(error instanceof QuotaClockError, `expected QuotaClockError, got ${error && error.constructor && error.constructor.name}: ${error && error.message}`)
    assert.ok(error instanceof Error)
    assert.equal(error.code, code)
    return true
  })
}

// ---------------------------------------------------------------------------------------------
// Row: dm < 0

test('row dm < 0: the monotonic source regressed — throw ERR_MONOTONIC_REGRESSION', async () => {
  const { clock, limiter, delivered } = setup()
  clock.advance(1000)
  limiter.tryConsume(CAP) // re-anchor at m = 1000
  clock.set({ monotonicMs: 999 })
  assertThrowsCode(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
  await tick()
  assert.deepEqual(delivered, [], 'the dm < 0 row raises no anomaly')
})

test('row dm < 0: every later call throws it too (tryConsume and status, even after the monotonic source recovers)', () => {
  const { clock, limiter } = setup()
  clock.set({ monotonicMs: -1 })
  assertThrowsCode(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
  assertThrowsCode(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
  assertThrowsCode(() => limiter.status(), 'ERR_MONOTONIC_REGRESSION')
  clock.set({ monotonicMs: 1e6 })
  clock.advance(1000)
  assertThrowsCode(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
  assertThrowsCode(() => limiter.status(), 'ERR_MONOTONIC_REGRESSION')
})

test('row dm < 0 applies whatever the policy and with a reader', () => {
  for (const policy of ['ignore', 'credit', 'refuse']) {
    for (const reader of [false, true]) {
      const { clock, limiter } = setup({ policy, reader })
      clock.set({ monotonicMs: -5 })
      clock.stepWall(60_000)
      assertThrowsCode(() => limiter.tryConsume(), 'ERR_MONOTONIC_REGRESSION')
    }
  }
})

test('dm = 0 is not a regression', () => {
  const { clock, probe } = setup()
  clock.set({ monotonicMs: 0 })
  const d = probe()
  near(d.tokens, 0)
  assert.deepEqual(d.anomalies, [])
})

// ---------------------------------------------------------------------------------------------
// Row: |dw − dm| ≤ tol

test('row |dw − dm| ≤ tol: agree — credited dm, no anomaly', async () => {
  const { clock, probe, delivered } = setup()
  clock.advance(5000)
  const d = probe()
  near(d.tokens, 5000, 'credited dm')
  assert.deepEqual(d.anomalies, [])
  await tick()
  assert.deepEqual(delivered, [])
})

test('tol = 250 ms + 500 ppm × dm: dw exactly dm + tol agrees (dm = 2000, tol = 251)', () => {
  const { clock, probe } = setup()
  clock.advance(2000)
  clock.stepWall(tol(2000)) // dw = 2251
  assert.equal(tol(2000), 251)
  const d = probe()
  near(d.tokens, 2000, 'credited dm, not dw')
  assert.deepEqual(d.anomalies, [])
})

test('tol = 250 ms + 500 ppm × dm: dw exactly dm − tol agrees (dm = 2000, tol = 251)', () => {
  const { clock, probe } = setup()
  clock.advance(2000)
  clock.stepWall(-251) // dw = 1749
  const d = probe()
  near(d.tokens, 2000)
  assert.deepEqual(d.anomalies, [])
})

test('tol at dm = 0 is 250 ms: ±250 agrees', () => {
  for (const step of [250, -250]) {
    const { clock, probe } = setup()
    clock.stepWall(step)
    const d = probe()
    near(d.tokens, 0)
    assert.deepEqual(d.anomalies, [], `step ${step}`)
  }
})

test('tol grows with dm: 500 ppm of dm = 1 000 000 ms is 500 ms (tol 750)', () => {
  {
    const { clock, probe } = setup()
    clock.advance(1_000_000)
    clock.stepWall(750)
    const d = probe()
    near(d.tokens, 1_000_000)
    assert.deepEqual(d.anomalies, [])
  }
  {
    const { clock, probe } = setup()
    clock.advance(1_000_000)
    clock.stepWall(-751)
    const d = probe()
    assert.deepEqual(kinds(d), ['wall-step-back'])
    near(d.tokens, 1_000_000)
  }
})

test('dm and dw are deltas since the previous reading: two +200 ms steps each agree', () => {
  const { clock, probe } = setup()
  clock.stepWall(200)
  assert.deepEqual(probe().anomalies, [])
  clock.stepWall(200)
  assert.deepEqual(probe().anomalies, [], 'the second step is measured from the previous reading, not from construction')
  clock.stepWall(-200)
  clock.advance(100)
  const d = probe()
  assert.deepEqual(d.anomalies, [])
  near(d.tokens, 100)
})

test('the agree row does not call the elapsed-realtime reader', () => {
  const { clock, probe } = setup({ reader: true })
  assert.equal(clock.elapsedRealtimeReads, 1, 'once at construction')
  clock.advance(1000)
  probe()
  clock.advance(2000)
  clock.stepWall(251)
  probe()
  clock.stepWall(-250)
  probe()
  assert.equal(clock.elapsedRealtimeReads, 1)
})

// ---------------------------------------------------------------------------------------------
// Row: dw < dm − tol

test('row dw < dm − tol: wall was set back — credited the full dm, anomaly wall-step-back', async () => {
  const { clock, probe, delivered } = setup()
  clock.advance(10_000)
  clock.stepWall(-5000) // dm 10000, dw 5000
  const d = probe()
  near(d.tokens, 10_000, 'the full monotonic delta is credited')
  assert.deepEqual(kinds(d), ['wall-step-back'])
  const a = find(d, 'wall-step-back')
  assert.equal(a.monotonicDeltaMs, 10_000)
  assert.equal(a.wallDeltaMs, 5000)
  assert.equal(a.creditedMs, 10_000)
  assert.equal(a.stepMs, -5000)
  await tick()
  assert.equal(delivered.length, 1)
  assert.equal(delivered[0].kind, 'wall-step-back')
})

test('row dw < dm − tol: tol + 1 below is a step back (dm = 2000, dw = 1748)', () => {
  const { clock, probe } = setup()
  clock.advance(2000)
  clock.stepWall(-252)
  const d = probe()
  assert.deepEqual(kinds(d), ['wall-step-back'])
  near(d.tokens, 2000)
  assert.equal(find(d, 'wall-step-back').stepMs, -252)
})

test('row dw < dm − tol: tol + 1 below at dm = 0 (dw = −251)', () => {
  const { clock, probe } = setup()
  clock.stepWall(-251)
  const d = probe()
  assert.deepEqual(kinds(d), ['wall-step-back'])
  near(d.tokens, 0)
})

test('row dw < dm − tol: the same whatever the policy (refuse does not throw on a step back)', () => {
  for (const policy of ['ignore', 'credit', 'refuse']) {
    const { clock, probe } = setup({ policy })
    clock.advance(3000)
    clock.stepWall(-3_600_000)
    const d = probe()
    assert.deepEqual(kinds(d), ['wall-step-back'], policy)
    near(d.tokens, 3000, policy)
  }
})

test('row dw < dm − tol does not call the elapsed-realtime reader', () => {
  const { clock, probe } = setup({ reader: true })
  clock.advance(1000)
  clock.stepWall(-60_000)
  const d = probe()
  assert.deepEqual(kinds(d), ['wall-step-back'])
  assert.equal(clock.elapsedRealtimeReads, 1)
})

test('after a step back the readings are re-anchored: the next awake second agrees', () => {
  const { clock, probe } = setup()
  clock.stepWall(-60_000)
  probe()
  clock.advance(1000)
  const d = probe()
  assert.deepEqual(d.anomalies, [])
  near(d.tokens, 1000)
})

// ---------------------------------------------------------------------------------------------
// Row: dw > dm + tol, reader present

test('row dw > dm + tol, reader present: a suspend is settled by the host — credited dm + suspended, anomaly suspend', async () => {
  const { clock, probe, delivered } = setup({ reader: true })
  clock.advance(1000)
  clock.suspend(60_000) // dm 1000, dw 61000, er delta 61000 → suspended 60000, stepMs 0
  const d = probe()
  near(d.tokens, 61_000, 'dm + suspended')
  assert.deepEqual(kinds(d), ['suspend'], 'no step anomaly: the unexplained rest is 0')
  const a = find(d, 'suspend')
  assert.equal(a.suspendedMs, 60_000)
  assert.equal(a.monotonicDeltaMs, 1000)
  assert.equal(a.wallDeltaMs, 61_000)
  assert.equal(a.creditedMs, 61_000)
  assert.equal(clock.elapsedRealtimeReads, 2, 'the reader was called for this row')
  await tick()
  assert.deepEqual(delivered.map((x) => x.kind), ['suspend'])
})

test('row dw > dm + tol, reader present: a forward step with no suspend — credited dm, wall-step-forward, no suspend anomaly', () => {
  const { clock, probe } = setup({ reader: true })
  clock.advance(500)
  clock.stepWall(60_000)
  const d = probe()
  near(d.tokens, 500)
  assert.deepEqual(kinds(d), ['wall-step-forward'], 'suspend only if suspended > 0')
  const a = find(d, 'wall-step-forward')
  assert.equal(a.stepMs, 60_000)
  assert.equal(a.creditedMs, 500)
  assert.equal(a.monotonicDeltaMs, 500)
  assert.equal(a.wallDeltaMs, 60_500)
})

test('reader row: suspend and forward step together — suspend + wall-step-forward, only the suspend credited', () => {
  const { clock, probe } = setup({ reader: true })
  clock.suspend(30_000)
  clock.stepWall(20_000) // dm 0, dw 50000, suspended 30000, stepMs 20000
  const d = probe()
  near(d.tokens, 30_000)
  assert.deepEqual(kinds(d), ['suspend', 'wall-step-forward'])
  assert.equal(find(d, 'suspend').suspendedMs, 30_000)
  assert.equal(find(d, 'wall-step-forward').stepMs, 20_000)
  for (const a of d.anomalies) assert.equal(a.creditedMs, 30_000)
})

test('reader row: unexplained rest below −tol is reported as wall-step-back', () => {
  const { clock, probe } = setup({ reader: true })
  clock.suspend(60_000)
  clock.stepWall(-10_000) // dm 0, dw 50000 > tol, suspended 60000, stepMs -10000
  const d = probe()
  near(d.tokens, 60_000)
  assert.deepEqual(kinds(d), ['suspend', 'wall-step-back'])
  assert.equal(find(d, 'wall-step-back').stepMs, -10_000)
  assert.equal(find(d, 'suspend').suspendedMs, 60_000)
})

test('reader row: unexplained rest exactly ±tol is not a step; tol + 1 is', () => {
  const cases = [
    { step: 250, expect: ['suspend'] },
    { step: -250, expect: ['suspend'] },
    { step: 251, expect: ['suspend', 'wall-step-forward'] },
    { step: -251, expect: ['suspend', 'wall-step-back'] },
  ]
  for (const { step, expect } of cases) {
    const { clock, probe } = setup({ reader: true })
    clock.suspend(60_000)
    clock.stepWall(step)
    const d = probe()
    assert.deepEqual(kinds(d), expect, `rest ${step}`)
    near(d.tokens, 60_000, `rest ${step}: the stepped part is never credited`)
    if (expect.length === 2) assert.equal(d.anomalies.find((a) => a.kind.startsWith('wall-step')).stepMs, step)
  }
})

test('reader row: tol for the unexplained rest also grows with dm (dm = 2000, rest 251 is within, 252 is not)', () => {
  {
    const { clock, probe } = setup({ reader: true })
    clock.advance(2000)
    clock.suspend(10_000)
    clock.stepWall(251)
    const d = probe()
    assert.deepEqual(kinds(d), ['suspend'])
    near(d.tokens, 12_000)
  }
  {
    const { clock, probe } = setup({ reader: true })
    clock.advance(2000)
    clock.suspend(10_000)
    clock.stepWall(252)
    const d = probe()
    assert.deepEqual(kinds(d), ['suspend', 'wall-step-forward'])
    assert.equal(find(d, 'wall-step-forward').stepMs, 252)
    near(d.tokens, 12_000)
  }
})

test('the suspended part is always credited and the stepped part never, whatever the policy', () => {
  for (const policy of ['ignore', 'credit', 'refuse']) {
    const { clock, probe } = setup({ policy, reader: true })
    clock.suspend(40_000)
    clock.stepWall(100_000)
    const d = probe() // refuse must not throw: the reader settles it
    near(d.tokens, 40_000, policy)
    assert.deepEqual(kinds(d), ['suspend', 'wall-step-forward'], policy)
    assert.equal(find(d, 'wall-step-forward').stepMs, 100_000, policy)
  }
})

test('suspended = max(0, (er − er₀) − (m − m₀)): a reader that ran slower than monotonic gives 0, not a negative credit', () => {
  const { clock, probe } = setup({ reader: true })
  clock.advance(10_000)
  clock.set({ elapsedRealtimeMs: 5000 }) // er advanced 5000 while m advanced 10000
  clock.stepWall(30_000) // dm 10000, dw 40000
  const d = probe()
  near(d.tokens, 10_000, 'credited dm + 0')
  assert.deepEqual(kinds(d), ['wall-step-forward'])
  assert.equal(find(d, 'wall-step-forward').stepMs, 30_000)
})

test('suspended time is measured from the reader baseline taken at construction', () => {
  const clock = manualClock({ monotonicMs: 100, wallMs: W0, elapsedRealtimeMs: 7000 })
  const limiter = new QuotaClock({ capacity: CAP, refillPerSecond: 1000, initialTokens: 0, suspendPolicy: 'ignore', clock })
  clock.advance(1000) // awake: er - er0 = 1000, m - m0 = 1000
  assert.deepEqual(limiter.tryConsume(CAP).anomalies, [])
  clock.suspend(5000)
  const d = limiter.tryConsume(CAP)
  assert.deepEqual(kinds(d), ['suspend'])
  assert.equal(find(d, 'suspend').suspendedMs, 5000)
  near(d.tokens, 6000)
})

test('er₀, m₀ are retaken at every reader call: a suspend is claimed once', () => {
  const { clock, probe } = setup({ reader: true })
  clock.suspend(60_000)
  near(probe().tokens, 60_000)
  clock.stepWall(10_000) // forward divergence again, but no new suspend since the last reader call
  const d = probe()
  assert.deepEqual(kinds(d), ['wall-step-forward'])
  assert.equal(find(d, 'wall-step-forward').stepMs, 10_000)
  near(d.tokens, 60_000, 'the earlier suspend is not credited twice')
  assert.equal(clock.elapsedRealtimeReads, 3)
})

test('a suspend hidden by an equal opposite wall step is not lost: it is claimed at the next forward divergence', () => {
  const { clock, probe } = setup({ reader: true })
  clock.suspend(60_000)
  clock.stepWall(-60_000) // dm 0, dw 0: agree, reader not called
  let d = probe()
  assert.deepEqual(d.anomalies, [])
  near(d.tokens, 0)
  assert.equal(clock.elapsedRealtimeReads, 1, 'agree row: reader not called')
  clock.advance(1000) // awake, agree
  d = probe()
  assert.deepEqual(d.anomalies, [])
  near(d.tokens, 1000)
  clock.stepWall(1000) // next forward divergence: dm 0, dw 1000 > 250
  d = probe()
  assert.equal(clock.elapsedRealtimeReads, 2)
  // suspended = (61000 - 0) - (1000 - 0) = 60000; stepMs = 1000 - 0 - 60000 = -59000
  near(d.tokens, 61_000, 'the hidden 60 s suspend is credited now')
  assert.deepEqual(kinds(d), ['suspend', 'wall-step-back'])
  assert.equal(find(d, 'suspend').suspendedMs, 60_000)
  assert.equal(find(d, 'wall-step-back').stepMs, -59_000)
  assert.equal(find(d, 'suspend').creditedMs, 60_000)
})

test('a hidden suspend survives a step back in between (still claimed later)', () => {
  const { clock, probe } = setup({ reader: true })
  clock.suspend(60_000)
  clock.stepWall(-60_000)
  probe() // agree
  clock.stepWall(-5000) // step back row: reader not called
  assert.deepEqual(kinds(probe()), ['wall-step-back'])
  assert.equal(clock.elapsedRealtimeReads, 1)
  clock.stepWall(5000 + 300) // forward divergence
  const d = probe()
  assert.equal(find(d, 'suspend').suspendedMs, 60_000)
  near(d.tokens, 60_000)
})

test('the reader is called only in the dw > dm + tol row (and once at construction), so the hot path stays two clock reads', () => {
  const { clock, probe } = setup({ reader: true })
  assert.equal(clock.elapsedRealtimeReads, 1, 'construction')
  for (let i = 0; i < 50; i++) {
    clock.advance(10)
    probe()
  }
  clock.stepWall(-1000)
  probe()
  clock.stepWall(100)
  probe()
  assert.equal(clock.elapsedRealtimeReads, 1, 'agree and step-back rows never read it')
  clock.stepWall(5000)
  probe()
  assert.equal(clock.elapsedRealtimeReads, 2)
  clock.suspend(5000)
  probe()
  assert.equal(clock.elapsedRealtimeReads, 3)
  clock.advance(10)
  probe()
  assert.equal(clock.elapsedRealtimeReads, 3)
})

// ---------------------------------------------------------------------------------------------
// Rows: dw > dm + tol, no reader

test("row dw > dm + tol, no reader, policy 'ignore': ambiguous — credited dm, anomaly ambiguous-wall-jump", async () => {
  const { clock, probe, delivered } = setup({ policy: 'ignore' })
  clock.advance(1000)
  clock.suspend(60_000) // wall +61000, monotonic +1000; no reader to tell
  const d = probe()
  near(d.tokens, 1000)
  assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
  const a = find(d, 'ambiguous-wall-jump')
  assert.equal(a.monotonicDeltaMs, 1000)
  assert.equal(a.wallDeltaMs, 61_000)
  assert.equal(a.creditedMs, 1000)
  await tick()
  assert.deepEqual(delivered.map((x) => x.kind), ['ambiguous-wall-jump'])
})

test("row no reader, 'ignore': tol + 1 above is ambiguous (dm = 0, dw = 251; dm = 2000, dw = 2252)", () => {
  {
    const { clock, probe } = setup({ policy: 'ignore' })
    clock.stepWall(251)
    const d = probe()
    assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
    near(d.tokens, 0)
  }
  {
    const { clock, probe } = setup({ policy: 'ignore' })
    clock.advance(2000)
    clock.stepWall(252)
    const d = probe()
    assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
    near(d.tokens, 2000)
  }
})

test("row no reader, policy 'credit': ambiguous — credited dw, anomaly ambiguous-wall-jump", () => {
  const { clock, probe } = setup({ policy: 'credit' })
  clock.advance(1000)
  clock.stepWall(60_000) // dm 1000, dw 61000
  const d = probe()
  near(d.tokens, 61_000)
  assert.deepEqual(kinds(d), ['ambiguous-wall-jump'])
  const a = find(d, 'ambiguous-wall-jump')
  assert.equal(a.creditedMs, 61_000)
  assert.equal(a.monotonicDeltaMs, 1000)
  assert.equal(a.wallDeltaMs, 61_000)
})

test("row no reader, 'credit': at exactly dm + tol it is the agree row (credited dm, not dw)", () => {
  const { clock, probe } = setup({ policy: 'credit' })
  clock.advance(2000)
  clock.stepWall(251)
  const d = probe()
  assert.deepEqual(d.anomalies, [])
  near(d.tokens, 2000)
})

test("row no reader, policy 'refuse': dm is credited, then throw ERR_AMBIGUOUS_WALL_JUMP; no anomaly", async () => {
  const { clock, limiter, delivered } = setup({ policy: 'refuse' })
  clock.advance(1000)
  clock.stepWall(60_000)
  assertThrowsCode(() => limiter.tryConsume(CAP), 'ERR_AMBIGUOUS_WALL_JUMP')
  await tick()
  assert.deepEqual(delivered, [], 'the refuse row raises no anomaly')
  // the next call (no time passes) shows what was credited: dm = 1000, not dw
  const d = limiter.tryConsume(CAP)
  near(d.tokens, 1000)
})

test("row no reader, 'refuse': readings re-anchored, the next call proceeds", () => {
  const { clock, limiter } = setup({ policy: 'refuse' })
  clock.stepWall(3_600_000)
  assertThrowsCode(() => limiter.tryConsume(), 'ERR_AMBIGUOUS_WALL_JUMP')
  const next = limiter.tryConsume(CAP)
  assert.deepEqual(next.anomalies, [], 'the jump is not seen again')
  clock.advance(500)
  const after = limiter.tryConsume(CAP)
  assert.deepEqual(after.anomalies, [])
  near(after.tokens, 500)
})

test("row no reader, 'refuse': tol + 1 throws, tol does not", () => {
  {
    const { clock, limiter } = setup({ policy: 'refuse' })
    clock.stepWall(250)
    assert.equal(limiter.tryConsume(CAP).allowed, false)
  }
  {
    const { clock, limiter } = setup({ policy: 'refuse' })
    clock.stepWall(251)
    assertThrowsCode(() => limiter.tryConsume(CAP), 'ERR_AMBIGUOUS_WALL_JUMP')
  }
})

test("row no reader, 'refuse' applies to status() too (it reconciles like tryConsume)", () => {
  const { clock, limiter } = setup({ policy: 'refuse' })
  clock.advance(700)
  clock.stepWall(10_000)
  assertThrowsCode(() => limiter.status(), 'ERR_AMBIGUOUS_WALL_JUMP')
  near(limiter.status().tokens, 700)
})

test("row no reader, 'refuse': nothing is consumed by the refused call", () => {
  const clock = manualClock({ monotonicMs: 0, wallMs: W0 })
  const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'refuse', clock })
  clock.stepWall(60_000)
  assertThrowsCode(() => limiter.tryConsume(2), 'ERR_AMBIGUOUS_WALL_JUMP')
  near(limiter.status().tokens, 5)
})
