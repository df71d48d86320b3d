'use strict'

// Starts a real redis-server for the tests, on 127.0.0.1 and a free port, with no persistence
// (`--save '' --appendonly no`), and stops it after.
//
//   const redis = await startRedisServer()  // { host, port, url, pid, stop(), pause(), resume(), kill(), restart() }
//   const cluster = await startRedisServer({ cluster: true })  // a one-node Redis Cluster
//   redis.pause()     SIGSTOP: the server hangs (connections stay open, nothing is answered)
//   redis.resume()    SIGCONT
//   await redis.kill()     SIGKILL: the server is gone (connections drop, the port refuses)
//   await redis.restart()  a new, empty server on the same port
//   await redis.stop()
//
// redis-server is looked up on PATH (REDIS_SERVER_BIN names another). When it is missing and the
// tests run as root, it is installed first with `apt-get update && apt-get install -y
// redis-server` (Debian's package starts no server in a container); otherwise the start rejects,
// saying what to install. Each server runs under a small shell watchdog that kills it as soon as
// this process's end of its stdin pipe closes, so it dies with the test process however that ends.
//
// Run this file directly to install redis-server if needed and check that one starts:
//   node __test__/helpers/redis-server.js

const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')
const { setupErrors, sleep, freePort, withInstallLock, runInstaller, spawnWatched, detach } = require('./test-server.js')

const INSTALL_TIMEOUT_MS = 5 * 60_000
const START_TIMEOUT_MS = 15_000
const STOP_TIMEOUT_MS = 5_000
const START_ATTEMPTS = 3 // a free port can be taken between choosing it and binding it
const INSTALL_LOCK_DIR = path.join(os.tmpdir(), 'qcs-redis-server-install.lock')
const PID_LINE = /^pid (\d+)$/m

// Runs the server in the background, prints its pid, and kills it once stdin reaches EOF.
// (A background job of a non-interactive shell reads /dev/null, so only the shell holds the pipe.)
const WATCHDOG = `"$@" &
pid=$!
echo "pid $pid"
read _ignored
kill -CONT "$pid" 2>/dev/null
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
exit 0
`

const setupError = setupErrors('redis test server')

function onPath(name) {
  const dirs = (process.env.PATH || '').split(path.delimiter).concat(['/usr/bin', '/usr/sbin', '/usr/local/bin', '/usr/local/sbin'])
  for (const dir of dirs) {
    if (!dir) continue
    const file = path.join(dir, name)
    try {
      fs.accessSync(file, fs.constants.X_OK)
      if (fs.statSync(file).isFile()) return file
    } catch {}
  }
  return undefined
}

function aptGet(args) {
  return runInstaller(
    'apt-get',
    args,
    { timeout: INSTALL_TIMEOUT_MS, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } },
    (err, output) => setupError(`apt-get ${args.join(' ')} failed: ${err.message}\n${output}`, err),
  )
}

/** The redis-server executable; installs it with apt-get when it is missing and this runs as root. */
async function ensureRedisServer() {
  if (process.env.REDIS_SERVER_BIN) return process.env.REDIS_SERVER_BIN
  const found = onPath('redis-server')
  if (found) return found
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (!isRoot || !onPath('apt-get')) {
    throw setupError('redis-server is not installed; install it (Debian/Ubuntu: `apt-get install -y redis-server`) or set REDIS_SERVER_BIN')
  }
  return withInstallLock(INSTALL_LOCK_DIR, INSTALL_TIMEOUT_MS, setupError, async () => {
    const again = onPath('redis-server')
    if (again) return again
    await aptGet(['update'])
    await aptGet(['install', '-y', 'redis-server'])
    const installed = onPath('redis-server')
    if (!installed) throw setupError('apt-get installed redis-server, but it is not on PATH')
    return installed
  })
}

/**
 * Sends one inline command to 127.0.0.1:port; resolves to the reply's text once `complete(text)`
 * is true, or undefined on an error reply, a failed connection or after timeoutMs.
 */
function inlineCommand(port, command, complete, timeoutMs) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    let reply = ''
    const done = (text) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(text)
    }
    const timer = setTimeout(() => done(undefined), timeoutMs)
    socket.on('connect', () => socket.write(`${command}\r\n`))
    socket.on('data', (chunk) => {
      reply += chunk.toString()
      if (reply.startsWith('-')) done(undefined)
      else if (complete(reply)) done(reply)
    })
    socket.on('error', () => done(undefined))
  })
}

const PROCESS_ID = /^process_id:(\d+)\r?$/m

/** The process_id of the redis-server answering on port (INFO server), or undefined. */
async function answeringPid(port, timeoutMs) {
  const text = await inlineCommand(port, 'INFO server', (reply) => PROCESS_ID.test(reply), timeoutMs)
  return text === undefined ? undefined : Number(PROCESS_ID.exec(text)[1])
}

/** A one-node Redis Cluster: the node takes every slot; resolves once the cluster is ok. */
async function formCluster(port) {
  const deadline = Date.now() + START_TIMEOUT_MS
  const info = () => inlineCommand(port, 'CLUSTER INFO', (reply) => /cluster_slots_assigned:\d+/.test(reply), 1000)
  if (!/cluster_slots_assigned:16384\b/.test((await info()) ?? '')) {
    await inlineCommand(port, 'CLUSTER ADDSLOTSRANGE 0 16383', (reply) => reply.includes('\r\n'), 1000)
  }
  while (Date.now() < deadline) {
    if (/cluster_state:ok\b/.test((await info()) ?? '')) return
    await sleep(50)
  }
  throw setupError(`the one-node cluster on port ${port} did not reach cluster_state:ok`)
}

function spawnServer(serverBin, port, dir, cluster) {
  const args = [
    '-c', WATCHDOG, 'redis-watchdog', serverBin,
    '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
    '--dir', dir, '--loglevel', 'warning', '--protected-mode', 'no',
  ]
  if (cluster) {
    args.push('--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-announce-ip', '127.0.0.1')
  }
  let pid
  let exitedEarly = false
  const server = spawnWatched('/bin/sh', args, {}, {
    onOutput(output) {
      const match = pid === undefined && PID_LINE.exec(output)
      if (match) pid = Number(match[1])
    },
    // The watchdog kills the server once stdin closes; this is if it does not.
    killAfterMs: STOP_TIMEOUT_MS,
    forceKill(child) {
      if (pid !== undefined) signal(pid, 'SIGKILL')
      child.kill('SIGKILL')
    },
    afterExit: () => (pid !== undefined ? waitGone(pid, port) : undefined),
  })
  const { child, output } = server
  child.once('error', (err) => {
    exitedEarly = true
    server.appendOutput(`\ncould not run /bin/sh: ${err.message}`)
  })

  async function ready() {
    const deadline = Date.now() + START_TIMEOUT_MS
    while (Date.now() < deadline) {
      if (exitedEarly || child.exitCode !== null) break
      if (pid !== undefined && !alive(pid)) break
      if (/aborting|address already in use|fatal/i.test(output())) break // it exits, but may linger as a zombie
      if (pid !== undefined && (await answeringPid(port, 500)) === pid) return
      await sleep(25)
    }
    throw setupError(`redis-server did not answer on port ${port}; output:\n${output()}`)
  }

  return { child, ready, stop: server.stop, pid: () => pid, output }
}

function alive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

function signal(pid, name) {
  try {
    process.kill(pid, name)
  } catch {}
}

/** Resolves once pid is gone (a zombie the watchdog has not reaped counts as gone once it stops answering). */
async function waitGone(pid, port) {
  const deadline = Date.now() + STOP_TIMEOUT_MS
  while (Date.now() < deadline && alive(pid)) {
    // A killed child stays a zombie until its shell reaps it: a closed port is enough.
    if (port !== undefined && !(await portOpen(port))) return
    await sleep(20)
  }
}

function portOpen(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    socket.on('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.on('error', () => resolve(false))
  })
}

/**
 * Starts a redis-server on a free loopback port (or the port given) and resolves to its handle;
 * with `cluster: true`, a one-node Redis Cluster holding every slot.
 * Rejects (never skips) when no server can be started.
 */
async function startRedisServer({ port: wantedPort, cluster = false } = {}) {
  const serverBin = await ensureRedisServer()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-redis-'))
  const removeDir = () => fs.rmSync(dir, { recursive: true, force: true })
  process.once('exit', removeDir)

  async function launch(port) {
    const server = spawnServer(serverBin, port, dir, cluster)
    try {
      await server.ready()
      if (cluster) await formCluster(port)
    } catch (err) {
      await server.stop()
      throw err
    }
    detach(server.child)
    return server
  }

  let server
  let port = wantedPort
  let lastError
  for (let attempt = 0; attempt < START_ATTEMPTS && server === undefined; attempt++) {
    port = wantedPort ?? (await freePort())
    try {
      server = await launch(port)
    } catch (err) {
      lastError = err
      if (wantedPort !== undefined) break
    }
  }
  if (server === undefined) {
    removeDir()
    throw lastError
  }

  const handle = {
    host: '127.0.0.1',
    port,
    get url() {
      return `redis://127.0.0.1:${port}`
    },
    get pid() {
      return server.pid()
    },
    /** SIGSTOP: the server stops answering; connections stay open. */
    pause() {
      signal(server.pid(), 'SIGSTOP')
    },
    /** SIGCONT after pause(). */
    resume() {
      signal(server.pid(), 'SIGCONT')
    },
    /** SIGKILL: the server is gone; resolves once its port refuses connections. */
    async kill() {
      const pid = server.pid()
      signal(pid, 'SIGKILL')
      await waitGone(pid, port)
    },
    /** A new, empty server on the same port (after kill() or stop()). */
    async restart() {
      await server.stop()
      const deadline = Date.now() + START_TIMEOUT_MS
      for (;;) {
        try {
          server = await launch(port)
          return
        } catch (err) {
          if (Date.now() > deadline) throw err
          await sleep(100)
        }
      }
    },
    async stop() {
      await server.stop()
      removeDir()
    },
  }
  return handle
}

module.exports = { startRedisServer, ensureRedisServer }

if (require.main === module) {
  ;(async () => {
    const startedAt = Date.now()
    const server = await startRedisServer()
    if ((await answeringPid(server.port, 2000)) !== server.pid) throw setupError('the server started but does not answer INFO')
    console.log(`redis-server listening at ${server.url}, pid ${server.pid} (${Date.now() - startedAt} ms)`)
    await server.stop()
    console.log('redis-server stopped')
  })().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
}
