'use strict'
// Process warnings a piece of test code emits.

/** Runs `fn` and resolves to the warnings with `code` it emitted (emitWarning delivers on a later tick). */
async function warningsDuring(code, fn) {
  const seen = []
  const listener = (warning) => {
    if (warning.code === code) seen.push(warning)
  }
  process.on('warning', listener)
  try {
    await fn()
    await new Promise((resolve) => setImmediate(resolve))
  } finally {
    process.off('warning', listener)
  }
  return seen
}

module.exports = { warningsDuring }
