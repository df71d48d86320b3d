'use strict'
// A shared limiter's store answers that wait for a call to claim them: the store answered a
// reservation for a key dropped (maxKeys) while calls waited for it. The first call to wake
// claims the answer (lib/share/driver.js's #claim); what none of them takes goes back to the store.

class UnclaimedAnswers {
  #flights = new Set()
  #giveBacks

  /** `giveBacks`: the limiter's GiveBacks (lib/share/give-backs.js), which sends what goes back. */
  constructor(giveBacks) {
    this.#giveBacks = giveBacks
  }

  /** Keeps a store answer for a key dropped while calls wait for it; what no call claims goes back. */
  keep(flight, key, request, granted, unreserved, recordId) {
    flight.unclaimed = { key, request, granted, unreserved, recordId }
    this.#flights.add(flight)
    // The waiting calls wake in this turn's microtasks; what none of them took goes back after.
    setImmediate(() => this.#sendBack(flight))
  }

  /** A waiting call claims the answer `flight` keeps: `{ request, granted, unreserved, recordId }`. */
  take(flight) {
    const answer = flight.takeUnclaimed()
    this.#flights.delete(flight)
    return answer
  }

  /** Gives back every answer still unclaimed (close()). */
  returnAll() {
    for (const flight of this.#flights) this.#sendBack(flight)
  }

  #sendBack(flight) {
    this.#flights.delete(flight)
    const answer = flight.takeUnclaimed()
    if (answer === undefined) return
    const { key, request, granted, recordId } = answer
    if (granted > 0) this.#giveBacks.send({ key, periodId: request.periodId, units: granted, recordId })
  }
}

module.exports = { UnclaimedAnswers }
