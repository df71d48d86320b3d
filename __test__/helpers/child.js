'use strict'
// Runs a script in a child Node process (crash cases must not take the test runner down) and
// returns what it printed. The script may require `ROOT` (the package) and print one JSON line.
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const ROOT = path.join(__dirname, '..', '..')

/** Runs `script` (`ROOT` is defined in it) and asserts a clean exit; returns the last stdout line parsed as JSON (or null). */
function runScript(script, { args = [], timeout = 60_000, env } = {}) {
  const source = `'use strict'; const ROOT = ${JSON.stringify(ROOT)};\n${script}`
  const child = spawnSync(process.execPath, [...args, '-e', source], {
    encoding: 'utf8',
    timeout,
    maxBuffer: 64 << 20,
    env: env === undefined ? process.env : { ...process.env, ...env },
  })
  const where = `status ${child.status}, signal ${child.signal}\nstdout: ${String(child.stdout).slice(-2000)}\nstderr: ${String(child.stderr).slice(-3000)}`
  assert.equal(child.signal, null, `the child process was killed by ${child.signal} (a crash):\n${where}`)
  assert.equal(child.status, 0, `the child process failed:\n${where}`)
  const lines = child.stdout.trim().split('\n')
  const last = lines[lines.length - 1]
  return { result: last ? JSON.parse(last) : null, stderr: child.stderr, stdout: child.stdout }
}

/** Runs the script `runs` times (cases that crash only in some runs). */
function runScriptRepeatedly(runs, script, options) {
  const results = []
  for (let run = 0; run < runs; run++) results.push(runScript(script, options))
  return results
}

module.exports = { ROOT, runScript, runScriptRepeatedly }
