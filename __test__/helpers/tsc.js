'use strict'
// The installed TypeScript compiler, run with this Node on every OS.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..', '..')

/** The installed TypeScript compiler's CLI script. */
function tscScript() {
  let manifestPath
  try {
    manifestPath = require.resolve('typescript/package.json', { paths: [ROOT] })
  } catch (error) {
    throw new Error('TypeScript is not installed: run `npm install` (it is a devDependency)', { cause: error })
  }
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'))
  const bin = typeof manifest.bin === 'string' ? manifest.bin : manifest.bin.tsc
  return path.join(path.dirname(manifestPath), bin)
}

/** Runs tsc with `args` in `cwd`; returns { status, output }. */
function runTsc(args, cwd = ROOT) {
  const result = spawnSync(process.execPath, [tscScript(), ...args], { cwd, encoding: 'utf8', timeout: 120_000 })
  if (result.error) throw result.error
  return { status: result.status, output: `${result.stdout}${result.stderr}` }
}

module.exports = { tscScript, runTsc }
