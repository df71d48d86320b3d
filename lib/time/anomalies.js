'use strict'
// Anomaly delivery to onAnomaly handlers. Each limiter with a handler gets a listener id; one
// threadsafe function per module instance delivers { listener, anomaly } and `listeners` routes
// it to the limiter, referred to weakly (so a handler that refers to its own limiter does not keep it
// alive), whose handler gets it. Ids are never reused: an anomaly still queued for a collected
// limiter is dropped rather than delivered to a newer one. An anomaly is the native object as
// made (src/napi/anomaly.rs: the fields every kind has, then those of its kind); the JS face
// lists none of its fields.

const native = require('../native/native.js')
const { REGISTRY } = require('../native/registry.js')
const { warn } = require('../native/errors.js')
const { thrownText, own } = require('../common/validate.js')

// At most this many deliveries wait per thread (the native side drops and counts the rest).
const MAX_WAITING_DELIVERIES = 10_000

const listeners = new Map()
const handlers = new WeakMap()
let nextListener = 1
const listenerIds = new FinalizationRegistry((listener) => listeners.delete(listener))

/** Gives a limiter a listener id for its onAnomaly handler; both are referred to weakly. */
function registerListener(limiter, onAnomaly) {
  const listener = nextListener++
  handlers.set(limiter, onAnomaly)
  listeners.set(listener, new WeakRef(limiter))
  listenerIds.register(limiter, listener)
  return listener
}

function handlerFailed(how, error, anomaly) {
  warn(`quota-clock-source: the onAnomaly handler ${how}: ${thrownText(error)} (anomaly: ${anomaly.kind}: ${anomaly.detail})`, 'QUOTA_CLOCK_ON_ANOMALY_THREW')
}

/** Calls the user's handler; a throw, or a promise it returns that rejects, becomes a process warning, never a crash. */
function deliverSafely(onAnomaly, anomaly) {
  let returned
  try {
    returned = onAnomaly(anomaly)
  } catch (error) {
    handlerFailed('threw', error, anomaly)
    return
  }
  if ((typeof returned === 'object' && returned !== null) || typeof returned === 'function') {
    // An async handler (or any thenable): its rejection must not become an unhandled one.
    Promise.resolve(returned).then(undefined, (error) => handlerFailed('returned a promise that rejected', error, anomaly))
  }
}

function dispatch(delivery) {
  const { listener, anomaly } = delivery
  const dropped = own(delivery, 'dropped')
  const limiter = listeners.get(listener)?.deref()
  if (limiter !== undefined) deliverSafely(handlers.get(limiter), anomaly)
  if (dropped != null) {
    warn(
      `quota-clock-source: ${dropped} anomaly deliveries to onAnomaly were dropped: more than ${MAX_WAITING_DELIVERIES} were waiting on this thread (the event loop did not run while they piled up). Each is still on its decision.anomalies.`,
      'QUOTA_CLOCK_ANOMALIES_DROPPED',
    )
  }
}

// The native side holds the dispatcher weakly (so that it never keeps this module alive). A
// function only the native side refers to would be collected: registerListener holds it, and the
// limiter classes hold registerListener.
native.registryOnAnomaly(REGISTRY, dispatch)
registerListener.dispatch = dispatch

module.exports = { registerListener }
