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

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setupErrors, freePort, withInstallLock, runInstaller, spawnWatched, detach } = require('./test-server.js')

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

const setupError = setupErrors('MongoDB test server')

function run(command, args, what) {
  return runInstaller(command, args, { cwd: REPO_ROOT, timeout: INSTALL_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 }, (err, output) =>
    setupError(`${what} failed (${command} ${args.join(' ')}): ${err.message}\n${output}`, err),
  )
}

/** Creates `.venv/` with SecantusDB unless it is already there; resolves to the server's path. */
async function ensureVenv() {
  if (fs.existsSync(SERVER_BIN)) return SERVER_BIN
  return withInstallLock(VENV_LOCK_DIR, INSTALL_TIMEOUT_MS, setupError, async () => {
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

function spawnServer(serverBin, port, configPath) {
  const args = [
    '-c', WATCHDOG, serverBin,
    '--host', '127.0.0.1', '--port', String(port), '--storage-path', ':memory:',
    '--config', configPath,
  ]
  let listening = () => {}
  const server = spawnWatched(VENV_PYTHON, args, { cwd: os.tmpdir(), env: { ...process.env, PYTHONUNBUFFERED: '1' } }, {
    onOutput: (output) => {
      if (LISTENING.test(output)) listening()
    },
    // The watchdog stops the server once stdin closes; this timer also keeps the event loop
    // alive until the child's exit is seen.
    killAfterMs: 2 * STOP_TIMEOUT_MS,
    forceKill: (child) => child.kill('SIGKILL'),
  })
  const { child, exited, output } = server
  let settled = false
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(setupError(`no "listening" line within ${START_TIMEOUT_MS} ms; output:\n${output()}`)), START_TIMEOUT_MS)
    function finish(err) {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (err) reject(err)
      else resolve()
    }
    listening = () => finish()
    child.once('error', (err) => finish(setupError(`could not run ${VENV_PYTHON}`, err)))
    exited.then(({ code, signal }) => finish(setupError(`exited early (code ${code}, signal ${signal}); output:\n${output()}`)))
  })
  return { child, ready, stop: server.stop, output }
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
    detach(server.child)
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
