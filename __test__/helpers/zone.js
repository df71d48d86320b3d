'use strict'
// Zone files for tests: a fresh path in shared memory (removed at exit), and child processes
// that open the same zone (helpers/zone-worker.js).
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawn, spawnSync } = require('node:child_process')

const WORKER = path.join(__dirname, 'zone-worker.js')
const DIR = fs.mkdtempSync(path.join(fs.existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), 'qcs-zone-test-'))
process.on('exit', () => fs.rmSync(DIR, { recursive: true, force: true }))

let next = 0
/** A path where no zone is yet. */
function zonePath(name = 'zone') {
  return path.join(DIR, `${name}-${next++}`)
}

/** Runs the worker to its end; returns its JSON lines (asserting a clean exit). */
function runWorker(options, mode, ...args) {
  const child = spawnSync(process.execPath, [WORKER, JSON.stringify(options), mode, ...args.map(String)], { encoding: 'utf8', timeout: 60_000 })
  if (child.status !== 0) throw new Error(`worker failed (status ${child.status}, signal ${child.signal}): ${child.stderr}`)
  return child.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line))
}

/** Starts a worker; resolves with its JSON lines when it exits. */
function startWorker(options, mode, ...args) {
  const child = spawn(process.execPath, [WORKER, JSON.stringify(options), mode, ...args.map(String)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk) => (stdout += chunk))
  child.stderr.on('data', (chunk) => (stderr += chunk))
  child.done = new Promise((resolve) => {
    child.on('exit', (status, signal) => resolve({ status, signal, stderr, lines: stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line)) }))
  })
  child.ready = new Promise((resolve) => {
    const check = () => (stdout.includes('"ready"') ? resolve() : undefined)
    child.stdout.on('data', check)
    child.on('exit', resolve)
  })
  return child
}

// Byte offsets in a zone file's header (docs/zone.md "The file"; checked by the Rust tests).
const HEADER = { checksum: 168, bootId: 176, bootIdBytes: 48, takeovers: 256 }

module.exports = { DIR, HEADER, zonePath, runWorker, startWorker }
