'use strict'

// What `npm install quota-clock-source` gives a user, checked from the packed tarballs: the main
// package (JS face, generated loader, types, no binary) and this host's platform package (the
// .node only), installed into an empty project with no network at all. Runs after `npm run build`
// (npm's pretest), rebuilds nothing, and writes only under os.tmpdir().
//
// The offline install: `npm install --offline` with an empty cache of its own and an unreachable
// registry, given both tarballs. The main package's optionalDependencies on the other platforms'
// packages cannot be fetched (ENOTCACHED); npm drops an optional dependency it cannot fetch, as it
// does one whose os/cpu/libc does not match. This platform's optional dependency is satisfied by
// the platform tarball, installed next to it at the top of node_modules.

const { after, before, describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const NAME = pkg.name
const BINARY_NAME = pkg.napi.binaryName

// napi-rs's platform names (`platformArchABI`) for the Rust targets this package may build.
const PLATFORM_OF_TARGET = {
  'x86_64-unknown-linux-gnu': { id: 'linux-x64-gnu', os: 'linux', cpu: 'x64', libc: 'glibc' },
  'x86_64-unknown-linux-musl': { id: 'linux-x64-musl', os: 'linux', cpu: 'x64', libc: 'musl' },
  'aarch64-unknown-linux-gnu': { id: 'linux-arm64-gnu', os: 'linux', cpu: 'arm64', libc: 'glibc' },
  'aarch64-unknown-linux-musl': { id: 'linux-arm64-musl', os: 'linux', cpu: 'arm64', libc: 'musl' },
  'x86_64-apple-darwin': { id: 'darwin-x64', os: 'darwin', cpu: 'x64' },
  'aarch64-apple-darwin': { id: 'darwin-arm64', os: 'darwin', cpu: 'arm64' },
  'x86_64-pc-windows-msvc': { id: 'win32-x64-msvc', os: 'win32', cpu: 'x64' },
  'aarch64-pc-windows-msvc': { id: 'win32-arm64-msvc', os: 'win32', cpu: 'arm64' },
}
const PUBLIC_EXPORTS = [
  'QuotaClock',
  'KeyedQuotaClock',
  'QuotaClockError',
  'systemClock',
  'hostElapsedRealtime',
  'procUptimeElapsedRealtime',
  'manualClock',
  'periodFor',
  'createThrottle',
  'memoryDb',
]

// The main tarball: exactly these files, plus lib/**/*.js, the command's bin/*.js and a licence file
// (the subpaths' .mjs and .d.ts files, http's, shared's, fastify's, koa's, hono's, nestjs', metrics'
// and otel's, are required files).
const MAIN_REQUIRED_FILES = [
  'package.json', 'README.md', 'index.js', 'index.mjs', 'index.d.ts', 'binding.js', 'binding.d.ts', 'bin/quota-clock-source.js',
  'lib/http.js', 'lib/http.mjs', 'lib/http.d.ts',
  'lib/shared.js', 'lib/shared.mjs', 'lib/shared.d.ts', 'lib/stores/redis.js', 'lib/stores/mongo.js',
  'lib/fastify.js', 'lib/fastify.mjs', 'lib/fastify.d.ts',
  'lib/metrics.js', 'lib/metrics.mjs', 'lib/metrics.d.ts',
  'lib/koa.js', 'lib/koa.mjs', 'lib/koa.d.ts',
  'lib/hono.js', 'lib/hono.mjs', 'lib/hono.d.ts',
  'lib/nestjs.js', 'lib/nestjs.mjs', 'lib/nestjs.d.ts',
  'lib/otel.js', 'lib/otel.mjs', 'lib/otel.d.ts',
]
const MAIN_ALLOWED = [/^lib\/([\w.-]+\/)*[\w.-]+\.js$/, /^bin\/[\w.-]+\.js$/, /^LICEN[CS]E(\.md|\.txt)?$/i]
const NEVER_PACKED = [
  [/\.node$/, 'a native binary (it ships only in the platform packages)'],
  [/^target\//, 'Cargo build output'],
  [/^src\//, 'Rust sources'],
  [/^(Cargo\.(toml|lock)|build\.rs)$/, 'Cargo files'],
  [/^__test__\//, 'tests'],
  [/^benchmark\//, 'benchmarks'],
  [/^examples\//, 'examples'],
  [/^npm\//, 'the platform package folders'],
  [/^\.(ci|github|venv|cargo)\//, 'repository tooling'],
  [/^node_modules\//, 'dependencies'],
  [/\.tgz$/, 'a packed tarball'],
]

function targetPlatforms() {
  return pkg.napi.targets.map((target) => {
    const platform = PLATFORM_OF_TARGET[target]
    assert.ok(platform, `napi.targets has ${target}, which this test does not know: add it to PLATFORM_OF_TARGET`)
    return { target, ...platform }
  })
}

/** This host's platform name as napi-rs spells it (linux-x64-gnu, darwin-arm64, win32-x64-msvc...). */
function hostPlatformId() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform === 'linux') {
    const report = process.report.getReport()
    const header = typeof report === 'string' ? JSON.parse(report).header : report.header
    return `linux-${arch}-${header.glibcVersionRuntime ? 'gnu' : 'musl'}`
  }
  return `${platform}-${arch}`
}

const { npmCommand } = require('./helpers/npm')

/** The environment for child processes: none of the parent npm's settings, no binding override. */
function childEnv() {
  const env = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (/^npm_/i.test(key) || key === 'NAPI_RS_NATIVE_LIBRARY_PATH' || key === 'NODE_OPTIONS' || key === 'NODE_TEST_CONTEXT') continue
    env[key] = value
  }
  return env
}

function run(file, args, options) {
  const result = spawnSync(file, args, { encoding: 'utf8', env: childEnv(), timeout: 60_000, ...options })
  if (result.error) throw new Error(`could not run ${file} ${args.join(' ')}: ${result.error.message}`)
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, output: `${result.stdout}${result.stderr}` }
}

function npm(args, options) {
  const npmCmd = npmCommand()
  return run(npmCmd.file, [...npmCmd.args, ...args], { shell: npmCmd.shell, ...options })
}

/** `npm pack --json` of `dir` into `destination`; returns { tarball, files }. */
function pack(dir, destination) {
  const result = npm(['pack', '--json', '--ignore-scripts', '--pack-destination', destination], { cwd: dir })
  assert.equal(result.status, 0, `npm pack failed in ${dir}:\n${result.output}`)
  const [info] = JSON.parse(result.stdout)
  return { tarball: path.join(destination, info.filename), files: info.files.map((file) => file.path.replaceAll('\\', '/')).sort() }
}

/** Relative module specifiers a source file loads (require, import, export ... from). */
function relativeSpecifiers(source) {
  const found = new Set()
  const patterns = [/\brequire\(\s*(['"])(\.{1,2}\/[^'"]+)\1\s*\)/g, /\b(?:from|import)\s*\(?\s*(['"])(\.{1,2}\/[^'"]+)\1/g]
  for (const pattern of patterns) for (const match of source.matchAll(pattern)) found.add(match[2])
  return [...found]
}

/** Checks a consumer's install: the run's JSON line, or a failure that shows what happened. */
function runJson(file, args, cwd) {
  const result = run(file, args, { cwd })
  assert.equal(result.status, 0, `${[file, ...args].join(' ')} failed in the consumer project:\n${result.output}`)
  const line = result.stdout.trim().split(/\r?\n/).pop()
  return JSON.parse(line)
}

const CJS_CHECK = `'use strict'
const q = require('quota-clock-source')
const clock = q.manualClock()
const limiter = new q.QuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
const decisions = [limiter.tryConsume(), limiter.tryConsume(), limiter.tryConsume()]
console.log(JSON.stringify({
  resolved: require.resolve('quota-clock-source'),
  keys: Object.keys(q),
  decisions,
  nativeFiles: Object.keys(require.cache).filter((file) => file.endsWith('.node')),
}))
`

// quota-clock-source/shared from the installed copy: both faces, one set of functions, and stores
// made from stand-ins of the clients' shapes (no Redis or MongoDB package is installed here).
const SHARED_CJS_CHECK = `'use strict'
const shared = require('quota-clock-source/shared')
const ioredisShaped = { isCluster: false, call: async () => [1, 0] }
const dbShaped = { databaseName: 'app', collection: () => ({}) }
console.log(JSON.stringify({
  resolved: require.resolve('quota-clock-source/shared'),
  keys: Object.keys(shared),
  kinds: [shared.redisStore(ioredisShaped).kind, shared.mongoStore(dbShaped).kind],
  refused: (() => { try { shared.redisStore({}) } catch (error) { return error.code } })(),
}))
`

const SHARED_ESM_CHECK = `import { createRequire } from 'node:module'
import { redisStore, mongoStore, quotaAdmin } from 'quota-clock-source/shared'
import * as namespace from 'quota-clock-source/shared'
import defaultExport from 'quota-clock-source/shared'

const cjs = createRequire(import.meta.url)('quota-clock-source/shared')
console.log(JSON.stringify({
  resolved: import.meta.resolve('quota-clock-source/shared'),
  named: Object.keys(namespace).filter((name) => name !== 'default'),
  sameObjects: defaultExport === cjs && redisStore === cjs.redisStore && mongoStore === cjs.mongoStore && quotaAdmin === cjs.quotaAdmin,
}))
`

const ESM_CHECK = `import { createRequire } from 'node:module'
import { QuotaClock, manualClock, QuotaClockError } from 'quota-clock-source'
import * as namespace from 'quota-clock-source'
import defaultExport from 'quota-clock-source'

const cjs = createRequire(import.meta.url)('quota-clock-source')
const limiter = new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'credit', clock: manualClock() })
const decisions = [limiter.tryConsume(), limiter.tryConsume()]
const named = Object.keys(namespace).filter((name) => name !== 'default')
console.log(JSON.stringify({
  resolved: import.meta.resolve('quota-clock-source'),
  named,
  undefinedNamed: named.filter((name) => namespace[name] === undefined),
  cjsKeys: Object.keys(cjs),
  sameObjects: defaultExport === cjs && QuotaClock === cjs.QuotaClock && QuotaClockError === cjs.QuotaClockError,
  decisions,
}))
`

describe('packaging', () => {
  const host = hostPlatformId()
  const hostTarget = targetPlatforms().find((platform) => platform.id === host)
  const platformPackage = `${NAME}-${host}`
  const binaryFile = `${BINARY_NAME}.${host}.node`
  let work
  let main
  let platform
  let consumer
  let install
  let bare
  let bareInstall

  before(() => {
    assert.ok(hostTarget, `this host is ${host}, which is not in package.json napi.targets (${pkg.napi.targets.join(', ')}): no platform package to test`)
    for (const generated of ['binding.js', 'binding.d.ts', binaryFile]) {
      assert.ok(fs.existsSync(path.join(ROOT, generated)), `${generated} is missing: run \`npm run build\` first (npm test does)`)
    }
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-packaging-'))
    const tarballs = path.join(work, 'tarballs')
    fs.mkdirSync(tarballs)

    main = pack(ROOT, tarballs)

    // The committed npm/<platform> folder plus the built binary, in a copy: the repository's
    // folder stays free of build output (as `napi artifacts` would fill it in CI).
    const platformDir = path.join(work, 'platform-package')
    fs.cpSync(path.join(ROOT, 'npm', host), platformDir, { recursive: true })
    fs.copyFileSync(path.join(ROOT, binaryFile), path.join(platformDir, binaryFile))
    platform = pack(platformDir, tarballs)

    const npmrc = path.join(work, 'npmrc')
    fs.writeFileSync(npmrc, '')
    const offline = (cwd, tarballPaths) =>
      npm(
        [
          'install',
          '--offline',
          '--no-audit',
          '--no-fund',
          '--cache',
          path.join(work, 'empty-cache'),
          '--userconfig',
          npmrc,
          '--registry',
          'http://127.0.0.1:9/',
          ...tarballPaths,
        ],
        { cwd },
      )
    const project = (dir) => {
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: path.basename(dir), version: '1.0.0', private: true }))
      return dir
    }

    consumer = project(path.join(work, 'consumer'))
    install = offline(consumer, [main.tarball, platform.tarball])
    fs.writeFileSync(path.join(consumer, 'cjs-check.js'), CJS_CHECK)
    fs.writeFileSync(path.join(consumer, 'esm-check.mjs'), ESM_CHECK)
    fs.writeFileSync(path.join(consumer, 'shared-cjs-check.js'), SHARED_CJS_CHECK)
    fs.writeFileSync(path.join(consumer, 'shared-esm-check.mjs'), SHARED_ESM_CHECK)

    // A user whose install skipped the platform package (or whose platform has none).
    bare = project(path.join(work, 'no-platform-package'))
    bareInstall = offline(bare, [main.tarball])
  })

  after(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true })
  })

  describe('package.json and npm/<platform>', () => {
    test('files, exports, main and types describe the JS face, the loader and the types', () => {
      assert.deepEqual([...pkg.files].sort(), ['README.md', 'bin/', 'binding.d.ts', 'binding.js', 'index.d.ts', 'index.js', 'index.mjs', 'lib/'].sort())
      assert.deepEqual(pkg.bin, { 'quota-clock-source': 'bin/quota-clock-source.js' })
      assert.equal(pkg.main, 'index.js')
      assert.equal(pkg.types, 'index.d.ts')
      assert.deepEqual(pkg.exports['.'], { types: './index.d.ts', import: './index.mjs', require: './index.js' })
      assert.equal(Object.keys(pkg.exports['.'])[0], 'types', 'the types condition must come first')
      assert.equal(pkg.exports['./package.json'], './package.json')
      assert.deepEqual(pkg.exports['./shared'], { types: './lib/shared.d.ts', import: './lib/shared.mjs', require: './lib/shared.js' })
      assert.equal(Object.keys(pkg.exports['./shared'])[0], 'types', 'the types condition must come first')
      assert.ok(pkg.engines && pkg.engines.node, 'engines.node is missing')
      assert.ok(pkg.repository && pkg.repository.url, 'repository is missing (provenance needs it)')
      assert.ok(Array.isArray(pkg.keywords) && pkg.keywords.length > 0)
    })

    test('optionalDependencies name one package per target, pinned to exactly this version', () => {
      const expected = Object.fromEntries(targetPlatforms().map(({ id }) => [`${NAME}-${id}`, pkg.version]))
      assert.deepEqual(pkg.optionalDependencies, expected)
    })

    test('each target has a committed npm/<platform> package with os, cpu and libc', () => {
      const platforms = targetPlatforms()
      const dirs = fs.readdirSync(path.join(ROOT, 'npm')).filter((entry) => fs.statSync(path.join(ROOT, 'npm', entry)).isDirectory())
      assert.deepEqual(dirs.sort(), platforms.map(({ id }) => id).sort())
      for (const { id, os: osName, cpu, libc } of platforms) {
        const dir = path.join(ROOT, 'npm', id)
        const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'))
        const binary = `${BINARY_NAME}.${id}.node`
        assert.equal(manifest.name, `${NAME}-${id}`)
        assert.equal(manifest.version, pkg.version, `npm/${id} is at ${manifest.version}: run \`napi version\``)
        assert.equal(manifest.main, binary)
        assert.deepEqual(manifest.files, [binary])
        assert.deepEqual(manifest.os, [osName])
        assert.deepEqual(manifest.cpu, [cpu])
        if (libc) assert.deepEqual(manifest.libc, [libc])
        else assert.equal(manifest.libc, undefined)
        assert.equal(manifest.license, pkg.license)
        assert.ok(fs.existsSync(path.join(dir, 'README.md')), `npm/${id}/README.md is missing`)
      }
    })

    test('the ES module entry exports the same names as the CommonJS entry', async () => {
      const cjs = require('../index.js')
      const esm = await import('../index.mjs')
      const named = Object.keys(esm).filter((name) => name !== 'default')
      const cjsNames = Object.keys(cjs)
      const onlyEsm = named.filter((name) => !cjsNames.includes(name))
      const onlyCjs = cjsNames.filter((name) => !named.includes(name))
      assert.deepEqual({ onlyEsm, onlyCjs }, { onlyEsm: [], onlyCjs: [] }, 'index.mjs (onlyEsm) and index.js (onlyCjs) export different names')
      assert.deepEqual(named.sort(), [...PUBLIC_EXPORTS].sort(), 'the public exports are not the expected list')
      assert.equal(esm.default, cjs)
      for (const name of named) assert.equal(esm[name], cjs[name], `${name} differs between the entry points`)
    })
  })

  describe('the packed tarballs', () => {
    test('the main tarball holds the JS face, the loader, the types, lib/ and bin/, and nothing else', () => {
      for (const file of main.files) {
        const never = NEVER_PACKED.find(([pattern]) => pattern.test(file))
        assert.equal(never, undefined, `the main tarball holds ${file}: ${never && never[1]}`)
        assert.ok(MAIN_REQUIRED_FILES.includes(file) || MAIN_ALLOWED.some((pattern) => pattern.test(file)), `stray file in the main tarball: ${file}`)
      }
      for (const file of MAIN_REQUIRED_FILES) assert.ok(main.files.includes(file), `the main tarball lacks ${file}`)
    })

    test('every relative module the packed JS loads is packed too', () => {
      const sources = main.files.filter((file) => /\.(c|m)?js$/.test(file) && file !== 'binding.js') // the loader's local requires are optional fallbacks
      for (const file of sources) {
        for (const specifier of relativeSpecifiers(fs.readFileSync(path.join(ROOT, file), 'utf8'))) {
          const base = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier))
          const candidates = [base, `${base}.js`, `${base}/index.js`]
          assert.ok(candidates.some((candidate) => main.files.includes(candidate)), `${file} loads '${specifier}', which is not in the tarball`)
        }
      }
    })

    test('the platform tarball holds only its binary, package.json and README.md', () => {
      assert.deepEqual(platform.files, ['README.md', 'package.json', binaryFile].sort())
    })
  })

  describe('installed from the tarballs with no network', () => {
    test('npm installs both tarballs offline; the other platforms are skipped', () => {
      assert.equal(install.status, 0, `offline install failed:\n${install.output}`)
      const modules = path.join(consumer, 'node_modules')
      const installed = JSON.parse(fs.readFileSync(path.join(modules, NAME, 'package.json'), 'utf8'))
      assert.equal(installed.version, pkg.version)
      assert.ok(fs.existsSync(path.join(modules, platformPackage, binaryFile)), `${platformPackage}/${binaryFile} is not installed`)
      for (const { id } of targetPlatforms()) {
        if (id !== host) assert.ok(!fs.existsSync(path.join(modules, `${NAME}-${id}`)), `${NAME}-${id} was installed on ${host}`)
      }
      assert.ok(!fs.existsSync(path.join(modules, NAME, 'node_modules')), 'the main package got nested dependencies')
    })

    test("require('quota-clock-source') loads the binary from the platform package and makes a limiter", () => {
      const result = runJson(process.execPath, ['cjs-check.js'], consumer)
      assert.equal(result.resolved, path.join(fs.realpathSync(consumer), 'node_modules', NAME, 'index.js'))
      assert.deepEqual(result.nativeFiles.map((file) => path.relative(fs.realpathSync(consumer), file).split(path.sep).join('/')), [
        `node_modules/${platformPackage}/${binaryFile}`,
      ])
      assert.deepEqual(
        result.decisions.map((decision) => decision.allowed),
        [true, true, false],
      )
      assert.equal(result.decisions[2].retryAfterBasis, 'monotonic-refill')
      assert.ok(result.decisions[2].retryAfterMs > 0)
    })

    test("import { QuotaClock } from 'quota-clock-source' uses index.mjs, with the CommonJS names and objects", () => {
      const result = runJson(process.execPath, ['esm-check.mjs'], consumer)
      assert.ok(result.resolved.endsWith(`/node_modules/${NAME}/index.mjs`), `the import resolved to ${result.resolved}`)
      const onlyEsm = result.named.filter((name) => !result.cjsKeys.includes(name))
      const onlyCjs = result.cjsKeys.filter((name) => !result.named.includes(name))
      assert.deepEqual({ onlyEsm, onlyCjs }, { onlyEsm: [], onlyCjs: [] }, 'the installed ESM (onlyEsm) and CommonJS (onlyCjs) entries export different names')
      assert.deepEqual(result.undefinedNamed, [], 'index.mjs exports names that index.js does not')
      assert.ok(result.sameObjects, 'the ES module entry exports other objects than the CommonJS entry')
      assert.deepEqual(
        result.decisions.map((decision) => decision.allowed),
        [true, false],
      )
    })

    test("require('quota-clock-source/shared') and its import load the installed lib/shared.js, one set of functions", () => {
      const required = runJson(process.execPath, ['shared-cjs-check.js'], consumer)
      assert.equal(required.resolved, path.join(fs.realpathSync(consumer), 'node_modules', NAME, 'lib', 'shared.js'))
      assert.deepEqual(required.keys.sort(), ['mongoStore', 'quotaAdmin', 'redisStore'])
      assert.deepEqual(required.kinds, ['redis', 'mongo'])
      assert.equal(required.refused, 'ERR_INVALID_OPTION')
      const imported = runJson(process.execPath, ['shared-esm-check.mjs'], consumer)
      assert.ok(imported.resolved.endsWith(`/node_modules/${NAME}/lib/shared.mjs`), `the import resolved to ${imported.resolved}`)
      assert.deepEqual(imported.named.sort(), ['mongoStore', 'quotaAdmin', 'redisStore'])
      assert.ok(imported.sameObjects, 'the ES module face of quota-clock-source/shared exports other objects than the CommonJS one')
    })

    test('npm links the quota-clock-source command, and it runs from the installed package', () => {
      const bin = path.join(consumer, 'node_modules', '.bin', process.platform === 'win32' ? 'quota-clock-source.cmd' : 'quota-clock-source')
      assert.ok(fs.existsSync(bin), 'node_modules/.bin/quota-clock-source is missing')
      const script = path.join(consumer, 'node_modules', NAME, 'bin', 'quota-clock-source.js')
      if (process.platform !== 'win32') assert.equal(fs.realpathSync(bin), fs.realpathSync(script))
      assert.match(fs.readFileSync(script, 'utf8'), /^#!\/usr\/bin\/env node\r?\n/)
      const periods = run(process.execPath, [script, 'periods', '--unit', 'month', '--zone', 'America/Los_Angeles', '--from', '2024-03-15T00:00:00Z', '--count', '1', '--json'], { cwd: consumer })
      assert.equal(periods.status, 0, periods.output)
      assert.deepEqual(JSON.parse(periods.stdout), [
        { id: '2024-03', startMs: Date.UTC(2024, 2, 1, 8), endMs: Date.UTC(2024, 3, 1, 7), startKind: 'exact', timeZone: 'America/Los_Angeles' },
      ])
      const names = run(process.execPath, [script, 'simulate', '--list', '--json'], { cwd: consumer })
      assert.equal(names.status, 0, names.output)
      assert.ok(JSON.parse(names.stdout).includes('step-back'))
      // The consumer has no Redis client installed: the command names the package to install.
      const usage = run(process.execPath, [script, 'usage', '--redis', 'redis://127.0.0.1:1', '--name', 'api', '--key', 'acme', '--period', '2026-12'], { cwd: consumer })
      assert.equal(usage.status, 1, usage.output)
      assert.match(usage.stderr, /^quota-clock-source usage: --redis needs ioredis or redis, .*npm install ioredis.*\(ERR_MISSING_PEER_DEPENDENCY\)\n$/)
    })

    test('the installed types compile strictly in the consumer project', () => {
      const types = path.join(consumer, 'types')
      fs.mkdirSync(types)
      const files = ['usage.ts', 'usage-esm.mts', 'shared-usage.ts', 'shared-usage-esm.mts']
      for (const file of files) fs.copyFileSync(path.join(__dirname, 'types', file), path.join(types, file))
      fs.writeFileSync(path.join(types, 'tsconfig.json'), JSON.stringify({ extends: path.join(__dirname, 'types', 'tsconfig.json'), files }))
      const manifest = require.resolve('typescript/package.json', { paths: [ROOT] })
      const { bin } = JSON.parse(fs.readFileSync(manifest, 'utf8'))
      const tsc = path.join(path.dirname(manifest), typeof bin === 'string' ? bin : bin.tsc)
      const result = run(process.execPath, [tsc, '-p', path.join(types, 'tsconfig.json'), '--noEmit', '--strict', '--pretty', 'false', '--explainFiles'], {
        cwd: types,
      })
      assert.equal(result.status, 0, `tsc failed against the installed package:\n${result.output}`)
      assert.match(result.output, new RegExp(`node_modules/${NAME}/index\\.d\\.ts\\r?\\n\\s+Imported via '${NAME}'`))
      assert.match(result.output, new RegExp(`node_modules/${NAME}/lib/shared\\.d\\.ts\\r?\\n\\s+Imported via '${NAME}/shared'`))
    })
  })

  describe('installed without a platform package', () => {
    test('the offline install still succeeds (every platform package is optional)', () => {
      assert.equal(bareInstall.status, 0, `offline install of the main tarball alone failed:\n${bareInstall.output}`)
      assert.ok(!fs.existsSync(path.join(bare, 'node_modules', platformPackage)))
    })

    for (const [kind, args] of [
      ['require', ['-e', "require('quota-clock-source')"]],
      ['import', ['--input-type=module', '-e', "await import('quota-clock-source')"]],
    ]) {
      test(`${kind} fails with an error that names the platform and says what to do`, () => {
        const result = run(process.execPath, args, { cwd: bare })
        assert.notEqual(result.status, 0, `${kind} succeeded with no binary installed:\n${result.output}`)
        // The error's own message, not the causes napi-rs chains below it.
        const message = result.stderr.split(/\r?\n\s*\[?cause\]?:/)[0]
        assert.ok(message.includes(host), `the error does not name the platform (${host}):\n${message}`)
        assert.ok(message.includes(platformPackage), `the error does not name the package to install (${platformPackage}):\n${message}`)
        assert.match(message, /npm (install|i)\b/, `the error does not say what to run:\n${message}`)
      })
    }
  })
})
