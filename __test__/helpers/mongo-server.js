'use strict'

// Starts a MongoDB wire-compatible server for the tests: SecantusDB (a Python package serving the
// MongoDB wire protocol on WiredTiger) from a virtualenv at the repository root, on 127.0.0.1 and
// a free port, with in-memory storage. No mongod is needed.
//
// Its TTL monitor runs every 60 s, as mongod's does; the `[storage] ttl_sweep_seconds` setting of
// 0.7.0b3 is accepted but not passed to the server, so the tests do not wait for TTL deletions.
//
//   const server = await startMongoServer()   // { uri, serverPid(), stop() }
//   ...
//   await server.stop()
//
// The server runs under a small Python watchdog that stops it as soon as this process's end of
// its stdin pipe closes, so it dies with the test process however that ends (failure, timeout,
// signal), and never keeps `node --test` waiting.
//
// THROTTLE_TEST_MONGODB_URI=mongodb://... uses an existing server instead (a real mongod, say).
// Run this file directly to install the virtualenv and check that the server starts:
//   node __test__/helpers/mongo-server.js

const { spawn, execFile } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { promisify } = require('node:util')

const execFileAsync = promisify(execFile)

const SECANTUSDB_REQUIREMENT = 'secantusdb==0.7.0b3'
const REPO_ROOT = path.resolve(__dirname, '..', '..')
const VENV_DIR = path.join(REPO_ROOT, '.venv')
const VENV_LOCK_DIR = path.join(REPO_ROOT, '.venv.lock')
const BIN_DIR = path.join(VENV_DIR, process.platform === 'win32' ? 'Scripts' : 'bin')
const VENV_PYTHON = path.join(BIN_DIR, process.platform === 'win32' ? 'python.exe' : 'python')
const SERVER_BIN = path.join(BIN_DIR, process.platform === 'win32' ? 'secantusd-py.exe' : 'secantusd-py')
const INSTALL_TIMEOUT_MS = 5 * 60_000
const START_TIMEOUT_MS = 30_000
const STOP_TIMEOUT_MS = 5_000
const LISTENING = /listening on \S+:(\d+)/
const START_ATTEMPTS = 3 // a free port can be taken between choosing it and binding it

// Runs the server as a child and stops it (SIGTERM, then SIGKILL) when stdin reaches EOF.
const WATCHDOG = `
import subprocess, sys, threading
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL)
def stop_at_eof():
    sys.stdin.buffer.read()
    server.terminate()
    try:
        server.wait(${STOP_TIMEOUT_MS / 1000})
    except subprocess.TimeoutExpired:
        server.kill()
threading.Thread(target=stop_at_eof, daemon=True).start()
sys.exit(server.wait())
`

function setupError(message, cause) {
  const err = new Error(`MongoDB test server: ${message}`, cause === undefined ? undefined : { cause })
  err.code = 'ERR_TEST_SERVER'
  return err
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

// One installer at a time, across processes: `mkdir` is atomic.
async function withVenvLock(fn) {
  const deadline = Date.now() + INSTALL_TIMEOUT_MS
  for (;;) {
    try {
      fs.mkdirSync(VENV_LOCK_DIR)
      break
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
      const age = Date.now() - fs.statSync(VENV_LOCK_DIR, { throwIfNoEntry: false })?.mtimeMs
      if (age > INSTALL_TIMEOUT_MS) fs.rmSync(VENV_LOCK_DIR, { recursive: true, force: true }) // left by a killed installer
      if (Date.now() > deadline) throw setupError(`timed out waiting for ${VENV_LOCK_DIR} to be released`)
      await sleep(500)
    }
  }
  try {
    return await fn()
  } finally {
    fs.rmSync(VENV_LOCK_DIR, { recursive: true, force: true })
  }
}

async function run(command, args, what) {
  try {
    await execFileAsync(command, args, { cwd: REPO_ROOT, timeout: INSTALL_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 })
  } catch (err) {
    const output = `${err.stdout ?? ''}${err.stderr ?? ''}`.trim().split('\n').slice(-15).join('\n')
    throw setupError(`${what} failed (${command} ${args.join(' ')}): ${err.message}\n${output}`, err)
  }
}

/** Creates `.venv/` with SecantusDB unless it is already there; resolves to the server's path. */
async function ensureVenv() {
  if (fs.existsSync(SERVER_BIN)) return SERVER_BIN
  return withVenvLock(async () => {
    if (fs.existsSync(SERVER_BIN)) return SERVER_BIN
    if (!fs.existsSync(VENV_PYTHON)) {
      const python = process.platform === 'win32' ? 'python' : 'python3'
      await run(python, ['-m', 'venv', VENV_DIR], 'creating the virtualenv (on Debian/Ubuntu this needs the python3-venv package)')
    }
    await run(VENV_PYTHON, ['-m', 'pip', 'install', '--disable-pip-version-check', '--quiet', SECANTUSDB_REQUIREMENT], `installing ${SECANTUSDB_REQUIREMENT}`)
    if (!fs.existsSync(SERVER_BIN)) throw setupError(`${SECANTUSDB_REQUIREMENT} installed but ${SERVER_BIN} is missing`)
    return SERVER_BIN
  })
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

function spawnServer(serverBin, port, configPath) {
  const args = [
    '-c', WATCHDOG, serverBin,
    '--host', '127.0.0.1', '--port', String(port), '--storage-path', ':memory:',
    '--config', configPath,
  ]
  const child = spawn(VENV_PYTHON, args, {
    cwd: os.tmpdir(),
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  })
  let output = ''
  let settled = false
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }))
    child.once('error', () => resolve({ code: null, signal: null })) // never spawned: no 'exit' may follow
  })
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(setupError(`no "listening" line within ${START_TIMEOUT_MS} ms; output:\n${output}`)), START_TIMEOUT_MS)
    function finish(err) {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (err) reject(err)
      else resolve()
    }
    function onData(chunk) {
      output = (output + chunk.toString()).slice(-8192)
      if (LISTENING.test(output)) finish()
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', onData)
    child.once('error', (err) => finish(setupError(`could not run ${VENV_PYTHON}`, err)))
    exited.then(({ code, signal }) => finish(setupError(`exited early (code ${code}, signal ${signal}); output:\n${output}`)))
  })
  let stopping
  function stop() {
    stopping ??= (async () => {
      child.stdin.end() // the watchdog stops the server
      // This timer also keeps the event loop alive until the child's exit is seen.
      const timer = setTimeout(() => child.kill('SIGKILL'), 2 * STOP_TIMEOUT_MS)
      await exited
      clearTimeout(timer)
    })()
    return stopping
  }
  return { child, ready, stop, output: () => output }
}

/**
 * Starts a server and resolves to `{ uri, stop }` (`stop()` resolves once the server is gone),
 * or uses THROTTLE_TEST_MONGODB_URI. Rejects (never skips) when the server cannot be started.
 */
async function startMongoServer() {
  if (process.env.THROTTLE_TEST_MONGODB_URI) {
    return { uri: process.env.THROTTLE_TEST_MONGODB_URI, stop: async () => {} }
  }
  const serverBin = await ensureVenv()
  const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'throttle-test-server-'))
  const configPath = path.join(configDir, 'secantusd.toml')
  // An empty configuration: naming one turns off the search for secantusd.toml in the working
  // and home directories, so no local file can change the server the tests run against.
  fs.writeFileSync(configPath, '# test server: built-in defaults\n')
  const removeConfig = () => fs.rmSync(configDir, { recursive: true, force: true })
  process.once('exit', removeConfig)
  let lastError
  for (let attempt = 0; attempt < START_ATTEMPTS; attempt++) {
    const port = await freePort()
    const server = spawnServer(serverBin, port, configPath)
    try {
      await server.ready
    } catch (err) {
      await server.stop()
      lastError = err
      if (/address already in use|Errno 98|EADDRINUSE/i.test(server.output())) continue
      break
    }
    // The server must not keep the event loop alive: if the tests end without stop(), the
    // process exits, the stdin pipe closes, and the watchdog stops the server.
    for (const handle of [server.child, server.child.stdin, server.child.stdout, server.child.stderr]) handle.unref()
    return {
      uri: `mongodb://127.0.0.1:${port}/?directConnection=true`,
      /** The server process's pid (the watchdog's child; Linux only), for SIGSTOP/SIGCONT in tests. */
      serverPid() {
        const children = fs.readFileSync(`/proc/${server.child.pid}/task/${server.child.pid}/children`, 'utf8').trim().split(/\s+/)
        return Number(children[0])
      },
      async stop() {
        await server.stop()
        removeConfig()
      },
    }
  }
  removeConfig()
  throw lastError
}

module.exports = { startMongoServer, ensureVenv }

if (require.main === module) {
  ;(async () => {
    const startedAt = Date.now()
    const server = await startMongoServer()
    console.log(`server listening at ${server.uri} (${Date.now() - startedAt} ms)`)
    await server.stop()
    console.log('server stopped')
  })().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
}
