'use strict'
// The installed TypeScript compiler, run with this Node on every OS.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..', '..')
const TYPES_DIR = path.join(ROOT, '__test__', 'types')

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

/**
 * `tsc --noEmit --strict` on `files` of __test__/types, through a throwaway tsconfig that extends
 * __test__/types/tsconfig.json (with `compilerOptions` added), run from the repository root with
 * the `extra` flags; returns { status, output }.
 */
function checkTypeFiles(files, { compilerOptions, extra = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-type-files-'))
  try {
    const project = path.join(dir, 'tsconfig.json')
    const config = { extends: path.join(TYPES_DIR, 'tsconfig.json'), files: files.map((file) => path.join(TYPES_DIR, file)) }
    if (compilerOptions !== undefined) config.compilerOptions = compilerOptions
    fs.writeFileSync(project, JSON.stringify(config))
    const result = spawnSync(process.execPath, [tscScript(), '-p', project, '--noEmit', '--strict', '--pretty', 'false', ...extra], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    if (result.error) throw result.error
    return { status: result.status, output: `${result.stdout}${result.stderr}` }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

module.exports = { tscScript, runTsc, checkTypeFiles }
