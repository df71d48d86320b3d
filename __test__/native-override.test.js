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

/** The error's own message line (not the causes chained below it). */
const message = (stderr) => stderr.split('\n').find((line) => line.includes('no native binary for')) ?? stderr

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

