'use strict'

// The IPC side of the test workers (helpers/shared-worker.js, helpers/fleet-worker.js): each
// message `{ id, op, ...args }` from the parent runs `commands[op](message)` and is answered
// `{ id, ...reply }` (a throw: `{ id, error }`); `{ ready: true }` is sent once they are served.
// Every worker also answers, for its limiter: status { key } -> { status }, stats -> { stats },
// close -> { closed: true } or { error }, exit (quits the client and exits, no close()).

/** What the parent learns of an error: its code, message, cause's message and name. */
function errorInfo(error) {
  return {
    code: error && error.code,
    message: error && String(error.message),
    cause: error && error.cause ? String(error.cause.message ?? error.cause) : undefined,
    name: error && error.name,
  }
}

function serveCommands(limiter, quit, commands) {
  Object.assign(commands, {
    async status({ key }) {
      return { status: limiter.status(key) }
    },
    async stats() {
      return { stats: limiter.stats() }
    },
    async close() {
      try {
        await limiter.close()
        return { closed: true }
      } catch (error) {
        return { error: errorInfo(error) }
      }
    },
    async exit() {
      await quit()
      process.exit(0)
    },
  })
  process.on('message', async (message) => {
    let reply
    try {
      reply = await commands[message.op](message)
    } catch (error) {
      reply = { error: errorInfo(error) }
    }
    process.send({ id: message.id, ...reply }, () => {}) // (a parent gone: nothing to tell)
  })
  process.send({ ready: true })
}

module.exports = { errorInfo, serveCommands }
