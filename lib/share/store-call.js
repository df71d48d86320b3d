'use strict'
// The one store-call primitive of the package: `sendStoreCall` sends every store call (a shared
// limiter's, quotaAdmin's, a throttle's database calls, rateLimit's throttle checks) and counts its
// round trips, once each; `storeCallWithin` bounds one by a timeout.
//
// On it, a shared limiter's store calls: counted in stats().store (calls, one per round trip;
// errors unless it timed out; timeouts), bounded by share.timeoutMs, abandoned after ten timeouts,
// and tracked until they settle (close() waits for them). `startStoreCall` makes one (a give-back,
// a charge); `flyStoreCall` makes one a key's only store call under way (a quota's reservation, a
// fleet bucket's take or give-back). A `StoreFlight` says how it ended, when it started, and keeps
// the answer for a key dropped while calls wait.

const { QuotaClockError, toPublicError } = require('../native/errors.js')
const { withTimeout, storeDeadline, timer } = require('../common/timeout.js')
const { thrownText } = require('../common/validate.js')

// A flight's outcomes.
const OK = 'ok'
const FAILED = 'failed'
const TIMED_OUT = 'timed-out'
// A flight that timed out is the key's only store call until it settles, or until it is this many
// timeouts old (a client that never settles its promise must not stop the key for good).
const ABANDON_AFTER_TIMEOUTS = 10
const MIN_ABANDON_MS = 1_000

// Every round trip this process made to a store (through sendStoreCall).
const sent = { calls: 0 }

/**
 * Sends one store call, `send(roundTrip)`, and resolves to its answer (a synchronous throw is a
 * rejection). Its round trips are counted in `counter.calls` (when given) and in the process's count
 * (roundTripsSent): the first when the call is sent, each later one as the store reports it
 * (`roundTrip()`, which a store operation calls as it sends each request: EVAL after a NOSCRIPT,
 * MongoDB's create-then-update; lib/share/protocol.js). A call that rides in a StoreBatch (one
 * round trip for calls of several keys) says so while it is sent, `roundTrip.rideIn(batch)`: the
 * batch counts its round trips instead. `counter` NOT_COUNTED: a call to something that counts its
 * own round trips here (a throttle's check), counted nowhere.
 */
function sendStoreCall(send, counter) {
  if (counter === NOT_COUNTED) return sendUncounted(send)
  let trips = 0
  let batched = false
  const roundTrip = () => {
    trips++
    if (trips > 1) count(counter)
  }
  roundTrip.rideIn = (batch) => {
    batched = true
    batch.join(counter)
  }
  const answer = sendUncounted(() => send(roundTrip))
  if (!batched) count(counter)
  return answer
}

/**
 * Store calls of several keys sent as one request (lib/stores/redis-bucket.js): each round trip
 * it makes (`trip()`) counts once in the process's count and once in the counter of every
 * limiter with a call in it, as each limiter's own calls would have needed it.
 */
class StoreBatch {
  #counters = new Set()
  #joined = false

  /** A call counted in `counter` rides in it (sendStoreCall's roundTrip.rideIn). */
  join(counter) {
    this.#joined = true
    if (counter !== undefined) this.#counters.add(counter)
  }

  /** The batch sends a request (counted once a call sent by sendStoreCall rides in it). */
  trip() {
    if (this.#joined) sent.calls++
    for (const counter of this.#counters) counter.calls++
  }
}

// A counter that counts nothing (sendStoreCall).
const NOT_COUNTED = Object.freeze({ calls: 0 })

function sendUncounted(send) {
  try {
    return Promise.resolve(send())
  } catch (error) {
    return Promise.reject(error)
  }
}

function count(counter) {
  sent.calls++
  if (counter !== undefined) counter.calls++
}

/** sendStoreCall bounded by `timeoutMs` (withTimeout, a `deadline` of lib/common/timeout.js): `late()` answers past it. */
function storeCallWithin(send, counter, timeoutMs, late, deadline = timer) {
  return withTimeout(sendStoreCall(send, counter), timeoutMs, late, deadline)
}

/** How many round trips this process made to stores through sendStoreCall (every store call of the package). */
function roundTripsSent() {
  return sent.calls
}

/** The store's reserve call a request of the reservation book describes (`instance`: this limiter's id). */
function reserveArgs(name, instance, key, request) {
  const { periodId, limit, leaseUnits, lacking, charge, held, owned, recordId } = request
  return { name, key, periodId, limit, leaseUnits, lacking, charge, expiresAtMs: request.periodEndMs, instance, held, owned, recordId }
}

class StoreFlight {
  // Settled: OK or FAILED (a late answer after a timeout settles it too).
  settled = false
  outcome = undefined
  // timeoutMs passed before it settled: its waiters were answered TIMED_OUT.
  timedOut = false
  // Why it failed (undefined when it did not, or only timed out).
  error = undefined
  // The answer, for a key dropped while calls wait for it: { key, request, granted, unreserved, recordId }.
  unclaimed = undefined
  // Its waiters' promise: the outcome, or TIMED_OUT after timeoutMs of the process's time.
  done = undefined
  // Resolves once it settled, however late (never rejects).
  finished = undefined
  startedMs = performance.now()
  // When its wait for the store began (storeDeadline: the process's next turn to I/O after the
  // send); undefined while the process has not turned to I/O since.
  timedFromMs = undefined

  /**
   * Waits for `answered` (OK or FAILED; it never rejects unless a native call threw, a bug, taken
   * as a failure) for at most `timeoutMs` (storeDeadline); `onTimedOut()` counts a timeout.
   * `onSettled()` runs once it settles.
   */
  start(answered, timeoutMs, onTimedOut, onSettled) {
    const settled = answered.then(
      (outcome) => this.#settle(outcome, onSettled),
      (error) => {
        this.error = error && typeof error.code === 'string' ? toPublicError(error) : asError(error)
        return this.#settle(FAILED, onSettled)
      },
    )
    this.finished = settled.then(
      () => undefined,
      () => undefined,
    )
    this.done = withTimeout(
      settled,
      timeoutMs,
      () => {
        this.timedOut = true
        onTimedOut()
        return TIMED_OUT
      },
      (ms, expired) => storeDeadline(ms, expired, () => (this.timedFromMs = performance.now())),
    )
  }

  #settle(outcome, onSettled) {
    this.settled = true
    this.outcome = outcome
    onSettled()
    return outcome
  }

  /** The store call failed with `error` (an answer that makes no sense kept as it is). */
  failed(error) {
    this.error = error instanceof QuotaClockError && error.code === 'ERR_STORE_RESPONSE' ? error : asError(error)
    return FAILED
  }

  /** Timed out this long ago, and not settled: no longer the key's only store call. */
  abandoned(timeoutMs) {
    return performance.now() - this.startedMs > Math.max(MIN_ABANDON_MS, ABANDON_AFTER_TIMEOUTS * timeoutMs)
  }

  /** Why the call it waited for did not serve it. */
  why(timeoutMs) {
    return this.error === undefined ? `no answer within share.timeoutMs (${timeoutMs} ms)` : `the store failed: ${thrownText(this.error)}`
  }

  /** The ERR_STORE_UNAVAILABLE of a call refused after waiting `waitedMs` for this flight (0: at once). */
  unavailable(name, why, waitedMs) {
    const waited = waitedMs > 0 ? `after waiting ${Math.round(waitedMs)} ms` : 'at once, as its store call is still unanswered'
    return new QuotaClockError('ERR_STORE_UNAVAILABLE', `quota store of share "${name}" unavailable (${why}); the call was refused ${waited} and consumed nothing`, { cause: this.error })
  }

  /** Takes the answer kept for a dropped key (undefined when there is none). */
  takeUnclaimed() {
    const answer = this.unclaimed
    this.unclaimed = undefined
    return answer
  }
}

/**
 * Makes `call(roundTrip)` (one store call; it may throw) a flight counted in `stats` (calls, one
 * per round trip; errors unless it timed out; timeouts). Its answer goes to
 * `answered(answer, fail, flight)`, which returns OK or `fail(error)`'s outcome (a throw is a
 * failure too); a failure to `failed(error)` first; `onSettled()` runs once it settles.
 */
function startStoreCall({ call, answered, failed = () => {}, timeoutMs, stats, onSettled = () => {} }) {
  const flight = new StoreFlight()
  const promise = sendStoreCall(call, stats)
  const fail = (error) => {
    if (!flight.timedOut) stats.errors++ // (a call is a timeout or an error, never both)
    failed(error)
    return flight.failed(error)
  }
  const answer = (reply) => {
    try {
      return answered(reply, fail, flight)
    } catch (error) {
      return fail(error)
    }
  }
  flight.start(promise.then(answer, fail), timeoutMs, () => stats.timeouts++, onSettled)
  return flight
}

/** startStoreCall for `key`, kept in `flights` as the key's store call under way until it settles. */
function flyStoreCall(flights, key, options) {
  const flight = startStoreCall({
    ...options,
    onSettled: () => {
      if (flights.get(key) === flight) flights.delete(key)
    },
  })
  flights.set(key, flight)
  return flight
}

/** A flight's outcome for close() to wait on: undefined when it succeeded, else its error. */
function outcomeOf(flight, timeoutMs) {
  return flight.done.then((outcome) =>
    outcome === OK ? undefined : (flight.error ?? new QuotaClockError('ERR_STORE_UNAVAILABLE', `no answer within share.timeoutMs (${timeoutMs} ms)`)),
  )
}

/** A thrown value as an Error (a non-Error is wrapped, as its cause). */
function asError(value) {
  if (value instanceof Error) return value
  return new QuotaClockError('ERR_CALLBACK', `quota store threw a non-Error value: ${thrownText(value)}`, { cause: value })
}

module.exports = { sendStoreCall, StoreBatch, storeCallWithin, roundTripsSent, NOT_COUNTED, StoreFlight, startStoreCall, flyStoreCall, outcomeOf, asError, reserveArgs, OK }
