'use strict'
// Installing without a registry: a copy of the package with no binary beside it and no platform
// package fails to load with an error that says how to install from a clone or a tarball and names
// NAPI_RS_NATIVE_LIBRARY_PATH; with that variable holding the path of a built .node, the package
// loads it and works; and `npm install <folder>` of a built checkout works with no registry at all.
// Each case runs in a child process, in a project under os.tmpdir().

const { before, after, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { npmCommand } = require('./helpers/npm')

const ROOT = path.resolve(__dirname, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const builtBinary = fs.readdirSync(ROOT).find((file) => file.startsWith(`${pkg.napi.binaryName}.`) && file.endsWith('.node'))

const CHECK = `
const { QuotaClock } = require('quota-clock-source')
const limiter = new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })
console.log(JSON.stringify([limiter.tryConsume().allowed, limiter.tryConsume().allowed]))
`

let project
before(() => {
  assert.ok(builtBinary, 'no built .node at the package root: run `npm run build:probes` first')
  project = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-no-binary-'))
  const copy = path.join(project, 'node_modules', pkg.name)
  fs.mkdirSync(copy, { recursive: true })
  // What the package's tarball holds (package.json "files"), without any .node file.
  for (const entry of ['package.json', ...pkg.files]) {
    fs.cpSync(path.join(ROOT, entry), path.join(copy, entry), { recursive: true, filter: (source) => !source.endsWith('.node') })
  }
  fs.writeFileSync(path.join(project, 'check.js'), CHECK)
})
after(() => {
  if (project) fs.rmSync(project, { recursive: true, force: true })
})

function run(env) {
  const base = { ...process.env }
  for (const key of ['NAPI_RS_NATIVE_LIBRARY_PATH', 'NODE_OPTIONS', 'NODE_TEST_CONTEXT']) delete base[key]
  return spawnSync(process.execPath, ['check.js'], { cwd: project, env: { ...base, ...env }, encoding: 'utf8', timeout: 30_000 })
}

/** The error's own message (its lines from the first, up to the stack). */
function message(stderr) {
  const lines = stderr.split('\n')
  const first = lines.findIndex((line) => line.includes('no native binary for'))
  if (first === -1) return stderr
  const end = lines.findIndex((line, at) => at > first && /^\s+at /.test(line))
  return lines.slice(first, end === -1 ? undefined : end).join(' ')
}

/** napi-rs's name for this platform, as lib/native/native.js computes it. */
function hostPlatform() {
  if (process.platform === 'win32') return `win32-${process.arch}-msvc`
  if (process.platform !== 'linux') return `${process.platform}-${process.arch}`
  return `linux-${process.arch}-${process.report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl'}`
}

test('installed without its platform package, what Node prints is at most 20 lines: the package to install and the command', () => {
  const result = run({})
  assert.notEqual(result.status, 0, result.stdout)
  const printed = result.stderr.trimEnd().split('\n')
  assert.ok(printed.length <= 20, `${printed.length} lines:\n${result.stderr}`)
  const platformPackage = `${pkg.name}-${hostPlatform()}`
  if (process.platform === 'linux' && process.arch === 'x64') assert.equal(platformPackage, 'quota-clock-source-linux-x64-gnu')
  assert.ok(message(result.stderr).includes(`npm install ${platformPackage}@${pkg.version}`), result.stderr)
  assert.doesNotMatch(result.stderr, /wasm32-wasi|github\.com\/npm/, 'the loader\'s causes are not printed by default')
})

test("the loader's own errors stay reachable: error.details, and printed with QUOTA_CLOCK_DEBUG_LOAD=1", () => {
  const probe = path.join(project, 'details.js')
  fs.writeFileSync(
    probe,
    `try { require('quota-clock-source') } catch (error) {
  console.log(JSON.stringify({ code: error.code, details: error.details instanceof Error, detailsMessage: String(error.details && error.details.message), enumerable: Object.keys(error) }))
}`,
  )
  const base = { ...process.env }
  for (const key of ['NAPI_RS_NATIVE_LIBRARY_PATH', 'NODE_OPTIONS', 'NODE_TEST_CONTEXT', 'QUOTA_CLOCK_DEBUG_LOAD']) delete base[key]
  const caught = spawnSync(process.execPath, [probe], { cwd: project, env: base, encoding: 'utf8', timeout: 30_000 })
  const seen = JSON.parse(caught.stdout)
  assert.equal(seen.code, 'ERR_NATIVE_BINDING_NOT_FOUND')
  assert.equal(seen.details, true)
  assert.match(seen.detailsMessage, /native binding/)
  assert.deepEqual(seen.enumerable, ['code'])
  const debug = run({ QUOTA_CLOCK_DEBUG_LOAD: '1' })
  assert.notEqual(debug.status, 0)
  assert.match(debug.stderr, /\[?cause\]?: Error: (Cannot find|Failed to load) native binding/)
})

test('with no binary, the error says how to install without a registry and names NAPI_RS_NATIVE_LIBRARY_PATH', () => {
  const result = run({})
  assert.notEqual(result.status, 0, result.stdout)
  assert.match(result.stderr, /code: 'ERR_NATIVE_BINDING_NOT_FOUND'/)
  const text = message(result.stderr)
  assert.match(text, /npm install <folder>/)
  assert.match(text, /npm pack/)
  assert.match(text, /npm run build/)
  assert.match(text, new RegExp(`NAPI_RS_NATIVE_LIBRARY_PATH to the absolute path of the ${pkg.napi.binaryName}\\.[\\w-]+\\.node`))
})

test('NAPI_RS_NATIVE_LIBRARY_PATH pointing at a built .node loads it, and the limiter works', () => {
  const result = run({ NAPI_RS_NATIVE_LIBRARY_PATH: path.join(ROOT, builtBinary) })
  assert.equal(result.status, 0, result.stderr)
  assert.deepEqual(JSON.parse(result.stdout), [true, false])
})

test('NAPI_RS_NATIVE_LIBRARY_PATH pointing at nothing: the error says the variable is set and did not load', () => {
  const missing = path.join(project, 'nowhere', 'missing.node')
  const result = run({ NAPI_RS_NATIVE_LIBRARY_PATH: missing })
  assert.notEqual(result.status, 0, result.stdout)
  assert.match(result.stderr, /code: 'ERR_NATIVE_BINDING_NOT_FOUND'/)
  assert.ok(message(result.stderr).includes(`NAPI_RS_NATIVE_LIBRARY_PATH is set to ${JSON.stringify(missing)}, which did not load`), result.stderr)
})

test('npm install <folder> of a built checkout, with no registry: the app loads the binary beside binding.js', () => {
  const app = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-folder-install-'))
  try {
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }))
    fs.writeFileSync(path.join(app, 'npmrc'), '')
    fs.writeFileSync(path.join(app, 'check.js'), CHECK)
    const npm = npmCommand()
    const env = { ...process.env }
    for (const key of Object.keys(env)) if (/^npm_/i.test(key) || ['NAPI_RS_NATIVE_LIBRARY_PATH', 'NODE_OPTIONS', 'NODE_TEST_CONTEXT'].includes(key)) delete env[key]
    const flags = ['--offline', '--no-audit', '--no-fund', '--ignore-scripts', '--cache', path.join(app, 'cache'), '--userconfig', path.join(app, 'npmrc'), '--registry', 'http://127.0.0.1:9/']
    const install = spawnSync(npm.file, [...npm.args, 'install', ...flags, ROOT], { cwd: app, env, shell: npm.shell, encoding: 'utf8', timeout: 120_000 })
    assert.equal(install.status, 0, `${install.stdout}${install.stderr}`)
    const result = spawnSync(process.execPath, ['check.js'], { cwd: app, env, encoding: 'utf8', timeout: 30_000 })
    assert.equal(result.status, 0, result.stderr)
    assert.deepEqual(JSON.parse(result.stdout), [true, false])
  } finally {
    fs.rmSync(app, { recursive: true, force: true })
  }
})

