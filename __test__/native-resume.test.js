'use strict'
// A call that needs something only JavaScript can give (a JS clock's readings, a JS
// elapsed-realtime reader's, a key's policy) is stopped before it changes anything and resumed
// once it is brought: every limiter and every call (tryConsume, refund, status) reads each clock
// once per call, in the order monotonic, wall, elapsed realtime, and the reader only when the
// readings disagree; the resumed call decides on the readings first taken.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { QuotaClock, KeyedQuotaClock } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)

/** A JS clock with an elapsed-realtime reader that records each reading. */
function recordingClock() {
  const state = { monotonic: 0, wall: NOON, elapsed: 0, reads: [] }
  const clock = {
    monotonicMs: () => (state.reads.push('monotonic'), state.monotonic),
    wallMs: () => (state.reads.push('wall'), state.wall),
    elapsedRealtimeMs: () => (state.reads.push('elapsed'), state.elapsed),
  }
  return { clock, state }
}

/** Time passes by `ms` on every clock (they agree: no reader needed). */
const advance = (state, ms) => {
  state.monotonic += ms
  state.wall += ms
  state.elapsed += ms
}

/** A host suspend of `ms`: the monotonic clock stops, wall and elapsed realtime go on (the reader is needed). */
const suspend = (state, ms) => {
  state.wall += ms
  state.elapsed += ms
}

const OPTIONS = { capacity: 1000, refillPerSecond: 1, initialTokens: 0, suspendPolicy: 'ignore' }

const limiters = {
  QuotaClock: (clock) => {
    const limiter = new QuotaClock({ ...OPTIONS, clock })
    return { consume: () => limiter.tryConsume(), refund: () => limiter.refund(), status: () => limiter.status() }
  },
  KeyedQuotaClock: (clock) => {
    const limiter = new KeyedQuotaClock({ ...OPTIONS, clock })
    return { consume: () => limiter.tryConsume('k'), refund: () => limiter.refund('k'), status: () => limiter.status('k') }
  },
  'KeyedQuotaClock with a policy': (clock) => {
    let asked = 0
    const limiter = new KeyedQuotaClock({ ...OPTIONS, clock, policy: () => (asked++, { capacity: 1000 }) })
    return { consume: () => limiter.tryConsume('k'), refund: () => limiter.refund('k'), status: () => limiter.status('k'), asked: () => asked }
  },
}

for (const [kind, make] of Object.entries(limiters)) {
  test(`${kind}: each call reads the JS clock once, and its reader only when the readings disagree`, () => {
    const { clock, state } = recordingClock()
    const limiter = make(clock)
    for (const call of ['consume', 'refund', 'status']) {
      advance(state, 1000)
      state.reads.length = 0
      limiter[call]()
      assert.deepEqual(state.reads, ['monotonic', 'wall'], `${call}, clocks agreeing`)
      suspend(state, 60_000)
      state.reads.length = 0
      limiter[call]()
      assert.deepEqual(state.reads, ['monotonic', 'wall', 'elapsed'], `${call}, after a suspend`)
    }
  })

  test(`${kind}: a call resumed after the reader decides on the readings it first took`, () => {
    const { clock, state } = recordingClock()
    const limiter = make(clock)
    limiter.consume() // (a keyed limiter now holds the key, with no tokens)
    advance(state, 2000) // 2 tokens
    suspend(state, 60_000) // 60 more: the reader tells a suspend, which refills
    // The reader moves the JS clock on while it is read: the resumed call must not see that.
    const reader = clock.elapsedRealtimeMs
    clock.elapsedRealtimeMs = () => {
      const value = reader()
      state.monotonic += 100_000
      state.wall += 100_000
      return value
    }
    const decision = limiter.consume()
    assert.equal(decision.allowed, true)
    assert.equal(decision.tokens, 61, '2 + 60 tokens, one taken; none from the 100 s the reader moved the clock on')
  })
}

test('a keyed limiter asks the policy once for a key it does not hold, then reads the clock', () => {
  const { clock, state } = recordingClock()
  const limiter = limiters['KeyedQuotaClock with a policy'](clock)
  advance(state, 1000)
  state.reads.length = 0
  limiter.status()
  assert.equal(limiter.asked(), 1, 'status of a key not held asks its policy, not holding the key')
  limiter.consume()
  assert.equal(limiter.asked(), 2, 'the first tryConsume asks again and holds the key')
  limiter.consume()
  assert.equal(limiter.asked(), 2, 'a held key is not asked again')
  assert.deepEqual(state.reads, ['monotonic', 'wall', 'monotonic', 'wall', 'monotonic', 'wall'])
})
