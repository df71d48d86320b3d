'use strict'
// A KeyedQuotaClock's `policy(key)`: what it returns merged with the limiter's defaults and
// type-checked (its values are checked natively, once), for a key met by a call and for every key
// of a snapshot being restored.

const native = require('../native/native.js')
const { callNative } = require('../native/errors.js')
const { normalizePolicy } = require('../limiter/key-limits.js')
const { coded, thrownText } = require('../common/validate.js')

const DEFAULT_CHOICE = 0xffffffff

/** Calls the user's policy for a key and normalizes what it returned. */
function resolvePolicy(policy, key, defaults) {
  const path = `policy(${JSON.stringify(key)})`
  let returned
  try {
    returned = policy(key)
  } catch (error) {
    const wrapped = coded(TypeError, 'ERR_INVALID_OPTION', `${path} threw: ${thrownText(error)}`)
    wrapped.cause = error
    throw wrapped
  }
  if (isThenable(returned)) {
    // Its rejection is handled here: a refused promise must not kill the process later.
    try {
      Promise.resolve(returned).then(undefined, ignore)
    } catch {
      // A thenable whose `then` throws: nothing is pending.
    }
    throw coded(
      TypeError,
      'ERR_INVALID_OPTION',
      `${path} returned a promise; policy must answer synchronously (load the plans before, keep them in a Map, and return the key's KeyPolicy or undefined from it)`,
    )
  }
  return normalizePolicy(returned, path, defaults)
}

function ignore() {}

/** Whether `value` is a promise or any other thenable (a `then` getter that throws: no, and the KeyPolicy check refuses it). */
function isThenable(value) {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false
  if (value instanceof Promise) return true
  try {
    return typeof value.then === 'function'
  } catch {
    return false
  }
}

/** Gives a snapshot's keys their policies (one call per key; equal policies are passed once). */
function assignPolicies(plan, policy, defaults) {
  const inputs = []
  const bySignature = new Map()
  const choices = new Uint32Array(native.snapshotLength(plan))
  const length = native.snapshotLength(plan)
  for (let i = 0; i < length; i++) {
    const key = native.snapshotKeyAt(plan, i)
    const normalized = resolvePolicy(policy, key, defaults)
    const { capacity, refillPerSecond, initialTokens, bucket, quotaLimit, quotaPeriod } = normalized
    if (capacity === defaults.capacity && refillPerSecond === defaults.refillPerSecond && initialTokens === defaults.initialTokens && bucket === defaults.bucket && quotaLimit === defaults.quotaLimit && quotaPeriod === defaults.quotaPeriod) {
      choices[i] = DEFAULT_CHOICE
      continue
    }
    const signature = JSON.stringify([capacity, refillPerSecond, initialTokens, bucket, quotaLimit, quotaPeriod])
    let choice = bySignature.get(signature)
    if (choice === undefined) {
      choice = inputs.length
      inputs.push(normalized)
      bySignature.set(signature, choice)
    }
    choices[i] = choice
  }
  callNative(() => native.snapshotSetPolicies(plan, inputs, choices))
}

module.exports = { resolvePolicy, assignPolicies }
