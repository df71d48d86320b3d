'use strict'
// whatever a JS clock does (throw anything at all, throw an error that is its own
// cause, run with the stack nearly exhausted, create limiters while it is read), the caller gets
// QuotaClockError ERR_CLOCK_READING with what was thrown as `cause`, and the process lives on.
// Every case runs in a child process: before these fixes some of them killed it (exit 139).
const test = require('node:test')
const assert = require('node:assert/strict')
const { runScript, runScriptRepeatedly } = require('./helpers/child.js')

// Shared by the child scripts: a clock whose `method` throws `thrown()` once armed, and a probe
// that records how a call ended.
const PRELUDE = `
const { QuotaClock, QuotaClockError, manualClock, systemClock } = require(ROOT)
const NOON = Date.UTC(2024, 0, 15, 12)
const base = { capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' }
function outcome(fn, thrown) {
  try {
    fn()
    return { threw: false }
  } catch (error) {
    return {
      threw: true,
      quotaClockError: error instanceof QuotaClockError,
      code: error && error.code,
      causeIsThrown: thrown === undefined ? null : error !== null && typeof error === 'object' && Object.is(error.cause, thrown),
      messageLength: String(error && error.message).length,
    }
  }
}
function armedClock(method, thrown) {
  let t = 0
  const state = { armed: false }
  const clock = {
    monotonicMs() { if (state.armed && method === 'monotonicMs') throw thrown(); return t },
    wallMs() { if (state.armed && method === 'wallMs') throw thrown(); return NOON + t },
    elapsedRealtimeMs() { if (state.armed && method === 'elapsedRealtimeMs') throw thrown(); return t },
    // The wall runs ahead of the monotonic clock, so the elapsed-realtime reader is consulted.
    jump() { t += 1000 },
  }
  return { clock, state }
}
/** Every way a throwing clock method is met: construction, tryConsume, status. */
function allOutcomes(makeThrown) {
  const out = []
  for (const method of ['monotonicMs', 'wallMs', 'elapsedRealtimeMs']) {
    const atConstruction = armedClock(method, () => holder.value)
    const holder = { value: makeThrown() }
    atConstruction.state.armed = true
    out.push({ method, when: 'construction', ...outcome(() => new QuotaClock({ ...base, clock: atConstruction.clock }), holder.value) })
    for (const call of ['tryConsume', 'status']) {
      const { clock, state } = armedClock(method, () => holder.value)
      const limiter = new QuotaClock({ ...base, clock })
      state.armed = true
      if (method === 'elapsedRealtimeMs') clock.wallMs = () => NOON + 3_600_000
      out.push({ method, when: call, ...outcome(() => limiter[call](), holder.value) })
      state.armed = false
      clock.wallMs = () => NOON
      out.push({ method, when: call + ' afterwards', works: outcome(() => limiter.tryConsume()).threw === false })
    }
  }
  return out
}
`

function assertAllClockReadingErrors(results, { cause = true } = {}) {
  for (const r of results) {
    if ('works' in r) {
      assert.ok(r.works, `the limiter works again after ${r.method} threw in ${r.when.replace(' afterwards', '')}`)
      continue
    }
    assert.ok(r.threw, `${r.method} in ${r.when} threw`)
    assert.ok(r.quotaClockError, `${r.method} in ${r.when}: a QuotaClockError (${JSON.stringify(r)})`)
    assert.equal(r.code, 'ERR_CLOCK_READING', `${r.method} in ${r.when}`)
    if (cause) assert.equal(r.causeIsThrown, true, `${r.method} in ${r.when}: what was thrown is the cause`)
    assert.ok(r.messageLength < 2_000, `${r.method} in ${r.when}: a readable message (${r.messageLength} characters)`)
  }
}

test('a clock that throws an error whose cause is itself: ERR_CLOCK_READING with it as cause (was a segfault)', () => {
  const { result } = runScript(`${PRELUDE}
    console.log(JSON.stringify(allOutcomes(() => { const e = new Error('x'); e.cause = e; return e })))`)
  assertAllClockReadingErrors(result)
})

test('a clock that throws an error with a cause chain 10,000 deep, or a cycle of two', () => {
  const { result } = runScript(`${PRELUDE}
    const deep = () => { let e = new Error('root'); for (let i = 0; i < 10000; i++) e = new Error('level ' + i, { cause: e }); return e }
    const pair = () => { const a = new Error('a'); const b = new Error('b', { cause: a }); a.cause = b; return a }
    console.log(JSON.stringify([...allOutcomes(deep), ...allOutcomes(pair)]))`)
  assertAllClockReadingErrors(result)
})

test('a clock that throws a Symbol, null, undefined, a 5 MB string, a number or a hostile object: ERR_CLOCK_READING, what was thrown as cause', () => {
  const { result } = runScript(`${PRELUDE}
    const values = {
      symbol: () => Symbol('boom'),
      null: () => null,
      undefined: () => undefined,
      hugeString: () => 'x'.repeat(5 * 1024 * 1024),
      number: () => 42,
      hostile: () => ({ get message() { throw new Error('no') }, toString() { throw new Error('no') }, [Symbol.toPrimitive]() { throw new Error('no') } }),
      revokedProxy: () => { const p = Proxy.revocable({}, {}); p.revoke(); return p.proxy },
      errorWithThrowingMessage: () => { const e = new Error('x'); Object.defineProperty(e, 'message', { get() { throw e } }); return e },
    }
    const out = {}
    for (const [name, make] of Object.entries(values)) {
      // A primitive cannot be compared as an object: check the cause with Object.is on the error.
      out[name] = allOutcomes(make).map((r) => r)
    }
    // For primitives, the cause is checked by identity too (Object.is works for them).
    console.log(JSON.stringify(out))`)
  for (const [name, results] of Object.entries(result)) {
    for (const r of results) {
      if ('works' in r) continue
      assert.equal(r.code, 'ERR_CLOCK_READING', `${name} from ${r.method} in ${r.when}: ${JSON.stringify(r)}`)
      assert.ok(r.quotaClockError, `${name}: a QuotaClockError`)
      assert.ok(r.messageLength < 2_000, `${name}: the message stays short (${r.messageLength})`)
    }
    assertAllClockReadingErrors(results, { cause: false })
  }
  // Identity of primitive causes (Object.is on the thrown value).
  const { result: causes } = runScript(`${PRELUDE}
    const out = {}
    for (const [name, value] of [['symbol', Symbol('s')], ['null', null], ['undefined', undefined], ['number', 42], ['string', 'x'.repeat(5 << 20)]]) {
      const { clock, state } = armedClock('monotonicMs', () => value)
      const limiter = new QuotaClock({ ...base, clock })
      state.armed = true
      try { limiter.tryConsume(); out[name] = 'no throw' } catch (error) { out[name] = error.code === 'ERR_CLOCK_READING' && 'cause' in error && Object.is(error.cause, value) }
    }
    console.log(JSON.stringify(out))`)
  assert.deepEqual(causes, { symbol: true, null: true, undefined: true, number: true, string: true })
})

test('tryConsume on a JS clock with the JS stack nearly exhausted always throws, and the limiter works afterwards (10 runs; was a segfault in most)', () => {
  const runs = runScriptRepeatedly(
    10,
    `${PRELUDE}
    let t = 0
    const clock = { monotonicMs: () => t, wallMs: () => NOON + t }
    const limiter = new QuotaClock({ ...base, capacity: 1e9, clock })
    const kinds = new Set()
    for (let round = 0; round < 20; round++) {
      function walk(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) { limiter.tryConsume(); t += 0.001; walk(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) }
      try { walk(1, 2, 3, 4, 5, 6, 7, 8, 9, 10) } catch (error) { kinds.add(error instanceof RangeError ? 'RangeError' : error && error.code) }
      // And with the status() call and the reader path.
      function walkStatus(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) { limiter.status(); walkStatus(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9) }
      try { walkStatus(1, 2, 3, 4, 5, 6, 7, 8, 9, 10) } catch (error) { kinds.add(error instanceof RangeError ? 'RangeError' : error && error.code) }
    }
    const after = limiter.tryConsume()
    console.log(JSON.stringify({ kinds: [...kinds], worksAfter: after.allowed === true }))`,
  )
  for (const { result } of runs) {
    assert.ok(result.worksAfter, 'the limiter works after the stack overflowed')
    for (const kind of result.kinds) assert.ok(kind === 'RangeError' || kind === 'ERR_CLOCK_READING', `a stack overflow or a clock-reading error, not ${kind}`)
  }
})

test('a limiter created inside a clock reading (at construction, in tryConsume, in status) is created and works', () => {
  const { result } = runScript(`${PRELUDE}
    const made = []
    let t = 0
    const clock = {
      monotonicMs() { const inner = new QuotaClock(base); made.push(inner.tryConsume().allowed); return t },
      wallMs: () => NOON + t,
    }
    const outer = new QuotaClock({ ...base, clock })
    const decision = outer.tryConsume()
    outer.status()
    console.log(JSON.stringify({ made, allowed: decision.allowed }))`)
  assert.deepEqual(result, { made: [true, true, true], allowed: true })
})

test('a re-entrant call on the same limiter from its clock fails with ERR_CLOCK_READING and changes nothing', () => {
  const { result } = runScript(`${PRELUDE}
    let t = 0, limiter = null, inner = null
    const clock = { monotonicMs: () => t, wallMs() { if (limiter && !inner) { try { limiter.tryConsume() } catch (e) { inner = e.code } } return NOON + t } }
    limiter = new QuotaClock({ ...base, clock })
    const first = limiter.tryConsume()
    const second = limiter.tryConsume()
    console.log(JSON.stringify({ inner, tokens: [first.tokens, second.tokens] }))`)
  assert.deepEqual(result, { inner: 'ERR_CLOCK_READING', tokens: [4, 3] })
})

test('a Proxy of a manual clock, or an object made from its prototype, as clock: TypeError ERR_INVALID_OPTION naming clock', () => {
  const { result } = runScript(`${PRELUDE}
    const proto = Object.getPrototypeOf(manualClock())
    const out = []
    for (const clock of [new Proxy(manualClock(), {}), Object.create(proto), new Proxy(Object.create(proto), {})]) {
      try { new QuotaClock({ ...base, clock }); out.push('constructed') } catch (error) { out.push([error.constructor.name, error.code, /clock/.test(error.message)]) }
    }
    // Its methods called on something that is not a manual clock: coded too.
    const fake = Object.create(proto)
    for (const call of [() => fake.advance(1), () => fake.monotonicMs(), () => fake.elapsedRealtimeReads, () => fake.set({ wallMs: 1 })]) {
      try { call(); out.push('no throw') } catch (error) { out.push([error.constructor.name, error.code]) }
    }
    console.log(JSON.stringify(out))`)
  assert.deepEqual(result.slice(0, 3), [
    ['TypeError', 'ERR_INVALID_OPTION', true],
    ['TypeError', 'ERR_INVALID_OPTION', true],
    ['TypeError', 'ERR_INVALID_OPTION', true],
  ])
  for (const r of result.slice(3)) assert.deepEqual(r, ['TypeError', 'ERR_INVALID_ARG'])
})
