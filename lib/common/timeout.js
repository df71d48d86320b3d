'use strict'
// One way to bound a call in time: `withTimeout(promise, ms, onTimeout, deadline)` settles as
// `promise` does, or with what `onTimeout()` returns (or rejects with what it throws) once the
// deadline expires; a late outcome is ignored. The deadline is a function `(ms, expired) =>
// cancel`, one of three:
//
//   timer         a plain timer from now (a throttle's check in rateLimit)
//   quietTimer    the same, unref'd: it never keeps the process alive (the command line's store
//                 deadline, a shared limiter's wait for its give-backs)
//   storeDeadline a shared limiter's store call: timed from the process's next turn, checked after
//                 the poll phase (see below)

function timer(ms, expired) {
  const handle = setTimeout(expired, ms)
  return () => clearTimeout(handle)
}

function quietTimer(ms, expired) {
  const handle = setTimeout(expired, ms)
  handle.unref()
  return () => clearTimeout(handle)
}

/**
 * Calls `expired()` once a store call has had `ms` of this process's time to answer, unless the
 * returned cancel() is called first. The wait starts when the process next turns to I/O (not
 * inside a burst of calls made in one synchronous loop), and an answer that arrived while the
 * process was busy is read before the time is declared up: the time a busy process keeps an
 * answer waiting is not the store's (unavailable means unavailable). `started()`, if given, runs
 * as the wait starts.
 */
function storeDeadline(ms, expired, started) {
  let cancelled = false
  let handle
  let check
  // (The immediates stay referenced: an unreferenced one waits for the loop's next wake-up. Each
  // keeps the loop for one turn only; the timer, unreferenced, never keeps the process alive.)
  const start = setImmediate(() => {
    started?.()
    handle = setTimeout(() => {
      // An immediate runs after the poll phase has read what the sockets received.
      check = setImmediate(() => cancelled || expired())
    }, ms)
    handle.unref()
  })
  return () => {
    cancelled = true
    clearImmediate(start)
    clearTimeout(handle)
    clearImmediate(check)
  }
}

/** `promise`'s outcome, or `onTimeout()`'s once `deadline(ms, …)` expires first. */
function withTimeout(promise, ms, onTimeout, deadline = timer) {
  return new Promise((resolve, reject) => {
    const cancel = deadline(ms, () => {
      try {
        resolve(onTimeout())
      } catch (error) {
        reject(error)
      }
    })
    promise.then(
      (value) => {
        cancel()
        resolve(value)
      },
      (error) => {
        cancel()
        reject(error)
      },
    )
  })
}

module.exports = { withTimeout, timer, quietTimer, storeDeadline }
