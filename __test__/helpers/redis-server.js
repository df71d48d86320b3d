'use strict'

// Starts a real redis-server for the tests, on 127.0.0.1 and a free port, with no persistence
// (`--save '' --appendonly no`), and stops it after.
//
//   const redis = await startRedisServer()  // { host, port, url, pid, stop(), pause(), resume(), kill(), restart() }
//   const cluster = await startRedisServer({ cluster: true })  // a one-node Redis Cluster
//   const three = await startRedisCluster()  // three nodes joined by redis-cli --cluster create:
//                                            // { nodes: [handle × 3], rootNodes, stop(), kill() }
//   const stepped = await startRedisServer({ fakeTime: true })  // its wall clock steppable:
//   stepped.stepClock(ms)   moves the server's wall clock (TIME, expiries) by ms from now on
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
// fakeTime runs the server with a small LD_PRELOAD library that adds an offset to the wall clock
// (clock_gettime of CLOCK_REALTIME and CLOCK_REALTIME_COARSE, gettimeofday, time) and leaves the
// monotonic clocks alone, so only what the server reads as wall time (TIME, expiries) moves. The
// offset, in ns, is 8 bytes of a file the library maps once and reads at every call. The library
// is compiled from CLOCK_SHIFT_C below with the C compiler (`cc`) on first use. (Debian's
// libfaketime cannot do this for Debian's redis-server: its lazy initialization and jemalloc's own
// clock_gettime at start recurse into each other and the server never starts, as `LD_PRELOAD=
// libfaketime.so.1:libjemalloc.so.2 FAKETIME=+1d date` shows too.)
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

/** `find()`'s answer; when there is none, installs Debian's `pkg` with apt-get (as root) first. */
async function ensureInstalled(what, pkg, find) {
  const found = find()
  if (found) return found
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0
  if (!isRoot || !onPath('apt-get')) throw setupError(`${what} is not installed; install it (Debian/Ubuntu: \`apt-get install -y ${pkg}\`)`)
  return withInstallLock(INSTALL_LOCK_DIR, INSTALL_TIMEOUT_MS, setupError, async () => {
    const again = find()
    if (again) return again
    await aptGet(['update'])
    await aptGet(['install', '-y', pkg])
    const installed = find()
    if (!installed) throw setupError(`apt-get installed ${pkg}, but ${what} is not found`)
    return installed
  })
}

/** The redis-server executable; installs it with apt-get when it is missing and this runs as root. */
async function ensureRedisServer() {
  if (process.env.REDIS_SERVER_BIN) return process.env.REDIS_SERVER_BIN
  return ensureInstalled('redis-server', 'redis-server', () => onPath('redis-server'))
}

const CLOCK_SHIFT_C = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* Only raw system calls and getenv: nothing that allocates or reads a clock (no recursion). */
static volatile const int64_t *shift_ns;
static volatile int looked;

static int64_t shift(void) {
  if (!looked) {
    const char *path = getenv("QCS_CLOCK_SHIFT_FILE");
    if (path) {
      long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
      if (fd >= 0) {
        long at = syscall(SYS_mmap, 0, 8, PROT_READ, MAP_SHARED, fd, 0);
        syscall(SYS_close, fd);
        if (at != -1) shift_ns = (const int64_t *)at;
      }
    }
    looked = 1;
  }
  return shift_ns ? *shift_ns : 0;
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
  long result = syscall(SYS_clock_gettime, clock, ts);
  if (result == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
    int64_t ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec + shift();
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
  }
  return (int)result;
}

int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return -1;
  if (tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  if (tz) ((int *)tz)[0] = ((int *)tz)[1] = 0;
  return 0;
}

time_t time(time_t *out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
`

/** The clock-shifting library, compiled once per source into the temp directory. */
async function ensureClockShift() {
  const hash = require('node:crypto').createHash('sha1').update(CLOCK_SHIFT_C).digest('hex').slice(0, 12)
  const lib = path.join(os.tmpdir(), `qcs-clock-shift-${hash}.so`)
  if (fs.existsSync(lib)) return lib
  const compiler = onPath('cc') ?? onPath('gcc') ?? onPath('clang')
  if (compiler === undefined) throw setupError('a C compiler (cc) is needed to build the clock-shifting library for fakeTime')
  const source = path.join(os.tmpdir(), `qcs-clock-shift-${hash}-${process.pid}.c`)
  const partial = `${lib}.${process.pid}`
  fs.writeFileSync(source, CLOCK_SHIFT_C)
  try {
    await runInstaller(compiler, ['-shared', '-fPIC', '-O2', '-o', partial, source], { timeout: START_TIMEOUT_MS }, (err, output) =>
      setupError(`compiling the clock-shifting library failed: ${err.message}\n${output}`, err),
    )
    fs.renameSync(partial, lib)
  } finally {
    fs.rmSync(source, { force: true })
  }
  return lib
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

function spawnServer(serverBin, port, dir, cluster, fakeTime) {
  const preload = fakeTime === undefined ? [] : ['/usr/bin/env', `LD_PRELOAD=${fakeTime.lib}`, `QCS_CLOCK_SHIFT_FILE=${fakeTime.file}`]
  const args = [
    '-c', WATCHDOG, 'redis-watchdog', ...preload, serverBin,
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
async function startRedisServer({ port: wantedPort, cluster = false, fakeTime = false, joinLater = false } = {}) {
  const serverBin = await ensureRedisServer()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-redis-'))
  const removeDir = () => fs.rmSync(dir, { recursive: true, force: true })
  process.once('exit', removeDir)
  let offsetMs = 0
  const faked = fakeTime ? { lib: await ensureClockShift(), file: path.join(dir, 'clock-shift') } : undefined
  // Written in place (the server maps the file): 8 bytes, the offset in ns.
  const writeOffset = () => {
    const bytes = Buffer.alloc(8)
    bytes.writeBigInt64LE(BigInt(Math.round(offsetMs * 1e6)))
    const fd = fs.openSync(faked.file, fs.existsSync(faked.file) ? 'r+' : 'w')
    try {
      fs.writeSync(fd, bytes, 0, 8, 0)
    } finally {
      fs.closeSync(fd)
    }
  }
  if (faked) writeOffset()

  async function launch(port) {
    const server = spawnServer(serverBin, port, dir, cluster || joinLater, faked)
    try {
      await server.ready()
      if (cluster && !joinLater) await formCluster(port)
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
    /** (fakeTime) Moves the server's wall clock by ms (negative: back), from its next reading on. */
    stepClock(ms) {
      if (!faked) throw new Error('stepClock needs startRedisServer({ fakeTime: true })')
      offsetMs += ms
      writeOffset()
    },
  }
  return handle
}

/** Resolves once every port answers CLUSTER INFO with cluster_state:ok. */
async function clusterOk(ports) {
  const deadline = Date.now() + START_TIMEOUT_MS
  const ok = async (port) => /cluster_state:ok\b/.test((await inlineCommand(port, 'CLUSTER INFO', (reply) => /cluster_state:\w+/.test(reply), 1000)) ?? '')
  while (Date.now() < deadline) {
    if ((await Promise.all(ports.map(ok))).every(Boolean)) return
    await sleep(100)
  }
  throw setupError(`the Redis Cluster on ports ${ports.join(', ')} did not reach cluster_state:ok on every node`)
}

/**
 * A real three-node Redis Cluster: three `redis-server --cluster-enabled yes` on loopback ports,
 * joined by `redis-cli --cluster create ... --cluster-replicas 0 --cluster-yes` (the slots split
 * in three); resolves once every node says cluster_state:ok. `rootNodes` is what both clients take.
 */
async function startRedisCluster() {
  const nodes = await Promise.all([0, 1, 2].map(() => startRedisServer({ joinLater: true })))
  const ports = nodes.map((node) => node.port)
  try {
    const cli = await ensureInstalled('redis-cli', 'redis-tools', () => onPath('redis-cli'))
    await runInstaller(cli, ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'], { timeout: START_TIMEOUT_MS }, (err, output) =>
      setupError(`redis-cli --cluster create failed: ${err.message}\n${output}`, err),
    )
    await clusterOk(ports)
  } catch (err) {
    await Promise.allSettled(nodes.map((node) => node.stop()))
    throw err
  }
  return {
    nodes,
    ports,
    host: '127.0.0.1',
    rootNodes: ports.map((port) => ({ host: '127.0.0.1', port })),
    stop: () => Promise.all(nodes.map((node) => node.stop())),
    kill: () => Promise.all(nodes.map((node) => node.kill())),
  }
}

module.exports = { startRedisServer, startRedisCluster, ensureRedisServer, inlineCommand }

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
