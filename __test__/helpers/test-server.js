'use strict'

// What the test-server helpers (redis-server.js, mongo-server.js) share: a free loopback port, an
// install lock across processes, running an installer, and a server process under a watchdog
// that stops it when this process's end of its stdin pipe closes.

const { spawn, execFile } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const { promisify } = require('node:util')

const execFileAsync = promisify(execFile)

const OUTPUT_KEPT = 8192
const FAILURE_LINES = 15

/** A maker of ERR_TEST_SERVER errors whose message starts with `${what}: `. */
function setupErrors(what) {
  return function setupError(message, cause) {
    const err = new Error(`${what}: ${message}`, cause === undefined ? undefined : { cause })
    err.code = 'ERR_TEST_SERVER'
    return err
  }
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.unref()
    probe.on('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

/**
 * Runs fn holding lockDir, one installer at a time across processes (`mkdir` is atomic); a lock
 * older than timeoutMs was left by a killed installer and is taken over.
 */
async function withInstallLock(lockDir, timeoutMs, setupError, fn) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      fs.mkdirSync(lockDir)
      break
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
      const age = Date.now() - (fs.statSync(lockDir, { throwIfNoEntry: false })?.mtimeMs ?? Date.now())
      if (age > timeoutMs) fs.rmSync(lockDir, { recursive: true, force: true }) // left by a killed installer
      if (Date.now() > deadline) throw setupError(`timed out waiting for ${lockDir} to be released`)
      await sleep(500)
    }
  }
  try {
    return await fn()
  } finally {
    fs.rmSync(lockDir, { recursive: true, force: true })
  }
}

/** Runs an installer; on failure throws `failure(err, output)`, output its last lines. */
async function runInstaller(command, args, options, failure) {
  try {
    await execFileAsync(command, args, options)
  } catch (err) {
    const output = `${err.stdout ?? ''}${err.stderr ?? ''}`.trim().split('\n').slice(-FAILURE_LINES).join('\n')
    throw failure(err, output)
  }
}

/**
 * Spawns a server's watchdog (command, args) with stdin, stdout and stderr piped, keeping the last
 * output; `onOutput(output)` sees it after each chunk. `stop()` closes stdin (the watchdog stops
 * the server), calls `forceKill(child)` if the watchdog has not exited within killAfterMs, then
 * `afterExit()`; it is the same promise however often it is called. `exited` resolves to
 * `{ code, signal }` once the watchdog exits or could not be spawned (both null then).
 */
function spawnWatched(command, args, spawnOptions, { onOutput, killAfterMs, forceKill, afterExit }) {
  const child = spawn(command, args, { ...spawnOptions, stdio: ['pipe', 'pipe', 'pipe'] })
  let output = ''
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
    child.once('error', () => resolve({ code: null, signal: null })) // never spawned: no 'exit' may follow
  })
  const onData = (chunk) => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT)
    onOutput(output)
  }
  child.stdout.on('data', onData)
  child.stderr.on('data', onData)
  let stopping
  function stop() {
    stopping ??= (async () => {
      child.stdin.end()
      const timer = setTimeout(() => forceKill(child), killAfterMs)
      await exited
      clearTimeout(timer)
      if (afterExit !== undefined) await afterExit()
    })()
    return stopping
  }
  return {
    child,
    exited,
    stop,
    output: () => output,
    appendOutput(text) {
      output += text
    },
  }
}

/**
 * Lets the event loop end with the server running: if the tests end without stop(), the process
 * exits, the stdin pipe closes, and the watchdog stops the server.
 */
function detach(child) {
  for (const handle of [child, child.stdin, child.stdout, child.stderr]) handle.unref()
}

module.exports = { setupErrors, sleep, freePort, withInstallLock, runInstaller, spawnWatched, detach }
