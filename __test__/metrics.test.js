'use strict'
// quota-clock-source/metrics: registerMetrics puts prom-client collectors on a registry that read
// each limiter's stats() at scrape time. Real decisions on manual clocks, a real prom-client
// registry, a real node:http scrape, CJS and ESM loads in child processes, and strict types.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const client = require('prom-client')
const { QuotaClock, KeyedQuotaClock, manualClock } = require('..')
const { registerMetrics } = require('../lib/metrics.js')
const { runScript, ROOT } = require('./helpers/child.js')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')

const DAY = 86_400_000
const NOON = Date.UTC(2024, 0, 15, 12)
const UTC_DAY = { unit: 'day', timeZone: 'UTC' }
const KINDS = ['wall-step-back', 'wall-step-forward', 'suspend', 'ambiguous-wall-jump', 'period-regression', 'period-skip', 'store-clock-step']

/** The samples of a Prometheus text exposition: 'name{labels}' → value. */
function samples(text) {
  const out = new Map()
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue
    const at = line.lastIndexOf(' ')
    out.set(line.slice(0, at), Number(line.slice(at + 1)))
  }
  return out
}

/** A QuotaClock and a KeyedQuotaClock on one manual clock, after a few real decisions. */
function scene() {
  const clock = manualClock({ monotonicMs: 0, wallMs: NOON })
  const site = new QuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock, quota: { limit: 100, period: UTC_DAY } })
  const tenants = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock, maxKeys: 2 })
  for (let i = 0; i < 3; i++) site.tryConsume() // 2 allowed, 1 denied
  tenants.tryConsume('a')
  tenants.tryConsume('a') // denied
  tenants.tryConsume('b')
  clock.advance(5000) // both tenants idle again
  tenants.tryConsume('c') // evicts one
  clock.advance(1000)
  clock.stepWall(-DAY) // back across midnight
  site.tryConsume() // wall-step-back and period-regression, allowed
  return { clock, site, tenants }
}

const isOptionError = (Class, pattern) => (error) => error instanceof Class && error.code === 'ERR_INVALID_OPTION' && pattern.test(error.message)

describe('registerMetrics on a prom-client registry', () => {
  test('the registry has the decisions, anomalies, keys and evictions of every limiter, with their labels and values', async () => {
    const { site, tenants } = scene()
    const register = new client.Registry()
    registerMetrics({ register, limiters: { site, tenants } })
    const text = await register.metrics()
    assert.match(text, /^# TYPE quota_clock_decisions_total counter$/m)
    assert.match(text, /^# TYPE quota_clock_anomalies_total counter$/m)
    assert.match(text, /^# TYPE quota_clock_keys gauge$/m)
    assert.match(text, /^# TYPE quota_clock_evictions_total counter$/m)
    const values = samples(text)
    const expected = new Map([
      ['quota_clock_decisions_total{limiter="site",result="allowed"}', 3],
      ['quota_clock_decisions_total{limiter="site",result="denied"}', 1],
      ['quota_clock_decisions_total{limiter="tenants",result="allowed"}', 3],
      ['quota_clock_decisions_total{limiter="tenants",result="denied"}', 1],
      ['quota_clock_decisions_total{limiter="tenants",result="blocked"}', 0],
      ['quota_clock_blocks_total{limiter="site"}', 0],
      ['quota_clock_blocks_total{limiter="tenants"}', 0],
      ['quota_clock_keys{limiter="site"}', 1],
      ['quota_clock_keys{limiter="tenants"}', 2],
      ['quota_clock_evictions_total{limiter="site"}', 0],
      ['quota_clock_evictions_total{limiter="tenants"}', 1],
    ])
    for (const name of ['site', 'tenants']) {
      for (const kind of KINDS) {
        const raisedBySite = name === 'site' && (kind === 'wall-step-back' || kind === 'period-regression')
        expected.set(`quota_clock_anomalies_total{limiter="${name}",kind="${kind}"}`, raisedBySite ? 1 : 0)
      }
    }
    assert.deepEqual(values, expected)
    assert.doesNotMatch(text, /quota_clock_store_calls_total/, 'no store metric without a shared limiter')
  })

  test('a KeyedQuotaClock\'s blocks: quota_clock_blocks_total, and result="blocked" apart from result="denied"', async () => {
    const clock = manualClock({ wallMs: Date.UTC(2024, 0, 15, 12) })
    const login = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock, block: { after: 2, withinMs: 60_000, forMs: 60_000 } })
    login.tryConsume('a') // allowed
    login.tryConsume('a') // denied
    login.tryConsume('a') // denied, and the block starts: blocked
    login.tryConsume('a') // blocked
    login.block('b', 1000)
    const register = new client.Registry()
    registerMetrics({ register, limiters: { login } })
    const values = samples(await register.metrics())
    assert.equal(values.get('quota_clock_decisions_total{limiter="login",result="allowed"}'), 1)
    assert.equal(values.get('quota_clock_decisions_total{limiter="login",result="denied"}'), 1)
    assert.equal(values.get('quota_clock_decisions_total{limiter="login",result="blocked"}'), 2)
    assert.equal(values.get('quota_clock_blocks_total{limiter="login"}'), 2)
  })

  test('values are read at scrape time: later decisions show in the next scrape', async () => {
    const { site, tenants, clock } = scene()
    const register = new client.Registry()
    registerMetrics({ register, limiters: { site, tenants } })
    const before = samples(await register.metrics())
    clock.advance(10_000)
    site.tryConsume()
    tenants.tryConsume('d')
    tenants.tryConsume('d')
    const after = samples(await register.metrics())
    assert.equal(after.get('quota_clock_decisions_total{limiter="site",result="allowed"}'), before.get('quota_clock_decisions_total{limiter="site",result="allowed"}') + 1)
    assert.equal(after.get('quota_clock_decisions_total{limiter="tenants",result="denied"}'), before.get('quota_clock_decisions_total{limiter="tenants",result="denied"}') + 1)
    assert.equal(after.get('quota_clock_evictions_total{limiter="tenants"}'), 2)
    assert.equal(after.get('quota_clock_keys{limiter="tenants"}'), 2)
    // Scraping again without a decision repeats the totals (counters are not added up twice).
    assert.deepEqual(samples(await register.metrics()), after)
  })

  test('the metrics names agree with what stats() says', async () => {
    const { site, tenants } = scene()
    const register = new client.Registry()
    registerMetrics({ register, limiters: { site, tenants } })
    const values = samples(await register.metrics())
    for (const [name, limiter] of Object.entries({ site, tenants })) {
      const stats = limiter.stats()
      assert.equal(values.get(`quota_clock_decisions_total{limiter="${name}",result="allowed"}`), stats.allowed)
      assert.equal(values.get(`quota_clock_decisions_total{limiter="${name}",result="denied"}`), stats.denied)
      assert.equal(values.get(`quota_clock_keys{limiter="${name}"}`), stats.keys)
      assert.equal(values.get(`quota_clock_evictions_total{limiter="${name}"}`), stats.evicted)
      for (const kind of KINDS) assert.equal(values.get(`quota_clock_anomalies_total{limiter="${name}",kind="${kind}"}`), stats.anomalies[kind])
    }
  })

  test("register defaults to prom-client's global registry, and unregister() takes the collectors off it", async () => {
    const { site } = scene()
    const registered = registerMetrics({ limiters: { site } })
    try {
      assert.equal(client.register.getSingleMetric('quota_clock_decisions_total'), registered.collectors.decisions)
      assert.match(await client.register.metrics(), /quota_clock_decisions_total\{limiter="site",result="allowed"\} 3/)
    } finally {
      registered.unregister()
    }
    for (const name of ['quota_clock_decisions_total', 'quota_clock_anomalies_total', 'quota_clock_keys', 'quota_clock_evictions_total', 'quota_clock_blocks_total']) {
      assert.equal(client.register.getSingleMetric(name), undefined, name)
    }
    registered.unregister() // a second call does nothing
  })

  test('it returns the collectors it made, and unregister() leaves other metrics alone', async () => {
    const { site } = scene()
    const register = new client.Registry()
    const mine = new client.Counter({ name: 'app_requests_total', help: 'requests', registers: [register] })
    mine.inc(5)
    const registered = registerMetrics({ register, limiters: { site } })
    assert.deepEqual(Object.keys(registered.collectors).sort(), ['anomalies', 'blocks', 'decisions', 'evictions', 'keys'])
    assert.ok(registered.collectors.keys instanceof client.Gauge)
    assert.ok(registered.collectors.decisions instanceof client.Counter)
    registered.unregister()
    assert.equal((await register.metrics()).trim(), '# HELP app_requests_total requests\n# TYPE app_requests_total counter\napp_requests_total 5')
    // And the names are free again.
    registerMetrics({ register, limiters: { site } }).unregister()
  })

  test('a registry that already has these metrics is refused, and the first registration stays', async () => {
    const { site, tenants } = scene()
    const register = new client.Registry()
    const first = registerMetrics({ register, limiters: { site } })
    assert.throws(() => registerMetrics({ register, limiters: { tenants } }), isOptionError(RangeError, /already has a metric named quota_clock_decisions_total/))
    assert.equal(register.getSingleMetric('quota_clock_decisions_total'), first.collectors.decisions)
    assert.doesNotMatch(await register.metrics(), /tenants/)
  })

  test('an OpenMetrics registry shows the same names (prom-client adds _total there itself)', async () => {
    const { site } = scene()
    const register = new client.Registry(client.Registry.OPENMETRICS_CONTENT_TYPE)
    registerMetrics({ register, limiters: { site } })
    const text = await register.metrics()
    assert.match(text, /^quota_clock_decisions_total\{limiter="site",result="allowed"\} 3$/m)
    assert.match(text, /^quota_clock_evictions_total\{limiter="site"\} 0$/m)
    assert.doesNotMatch(text, /_total_total/)
  })

  test('a node:http /metrics endpoint serves the registry as Prometheus scrapes it', async () => {
    const { site, tenants } = scene()
    const register = new client.Registry()
    registerMetrics({ register, limiters: { site, tenants } })
    const server = http.createServer(async (req, res) => {
      if (req.url !== '/metrics') {
        res.writeHead(404).end()
        return
      }
      res.writeHead(200, { 'Content-Type': register.contentType })
      res.end(await register.metrics())
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const response = await fetch(`http://127.0.0.1:${server.address().port}/metrics`)
      assert.equal(response.status, 200)
      assert.match(response.headers.get('content-type'), /^text\/plain; version=0\.0\.4/)
      const values = samples(await response.text())
      assert.equal(values.get('quota_clock_decisions_total{limiter="tenants",result="allowed"}'), 3)
      assert.equal(values.get('quota_clock_keys{limiter="tenants"}'), 2)
    } finally {
      await new Promise((resolve) => server.close(resolve))
    }
  })
})

describe('registerMetrics refuses bad options with ERR_INVALID_OPTION and registers nothing', () => {
  const { site } = scene()
  const cases = [
    ['not an object', undefined, TypeError, /options must be an object/],
    ['an unknown key', { limiters: { site }, prefix: 'app_' }, TypeError, /unknown option 'prefix'/],
    ['limiters missing', {}, TypeError, /limiters must be an object/],
    ['limiters an array', { limiters: [site] }, TypeError, /limiters must be an object/],
    ['no limiter', { limiters: {} }, RangeError, /at least one limiter/],
    ['a plain object', { limiters: { fake: { tryConsume: () => ({ allowed: true }), stats: () => ({}) } } }, TypeError, /limiters\.fake must be a QuotaClock or a KeyedQuotaClock/],
    ['a Proxy of a limiter', { limiters: { proxied: new Proxy(site, {}) } }, TypeError, /limiters\.proxied/],
    ['an Object.create of the prototype', { limiters: { made: Object.create(QuotaClock.prototype) } }, TypeError, /limiters\.made/],
    ['an Object.create of the keyed prototype', { limiters: { made: Object.create(KeyedQuotaClock.prototype) } }, TypeError, /limiters\.made/],
    ['a register that is not a registry', { register: {}, limiters: { site } }, TypeError, /register must be a prom-client Registry/],
    ['a limiters getter that throws', { limiters: Object.defineProperty({}, 'boom', { enumerable: true, get: () => { throw new Error('no') } }) }, TypeError, /limiters could not be read: no/],
  ]
  for (const [what, options, Class, pattern] of cases) {
    test(what, async () => {
      const register = new client.Registry()
      const withRegister = options && typeof options === 'object' && !('register' in options) && 'limiters' in options ? { ...options, register } : options
      assert.throws(() => registerMetrics(withRegister), isOptionError(Class, pattern))
      assert.deepEqual(register.getMetricsAsArray(), [])
    })
  }
})

describe('loading quota-clock-source/metrics', () => {
  test('CommonJS and ES module faces load by package name and share one registerMetrics', () => {
    const script = `
      const cjs = require('quota-clock-source/metrics')
      import('quota-clock-source/metrics').then((esm) => {
        console.log(JSON.stringify({ cjs: Object.keys(cjs), esm: Object.keys(esm).sort(), same: esm.registerMetrics === cjs.registerMetrics && esm.default === cjs }))
      })`
    const child = spawnSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
    assert.equal(child.status, 0, child.stderr)
    assert.deepEqual(JSON.parse(child.stdout), { cjs: ['registerMetrics'], esm: ['default', 'registerMetrics'], same: true })
  })

  test('package.json exports the subpath (types first) and ships its files', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
    assert.deepEqual(pkg.exports['./metrics'], { types: './lib/metrics.d.ts', import: './lib/metrics.mjs', require: './lib/metrics.js' })
    assert.equal(Object.keys(pkg.exports['./metrics'])[0], 'types')
    assert.ok(pkg.files.includes('lib/'), 'lib/ (with metrics.js, metrics.mjs, metrics.d.ts) is published')
    assert.equal(pkg.peerDependenciesMeta['prom-client'].optional, true)
    assert.equal(pkg.dependencies?.['prom-client'], undefined, 'prom-client is not a runtime dependency')
  })

  test('without prom-client installed, registerMetrics throws a coded error that names it, and the main entry point still works', () => {
    // A resolution hook hides prom-client, as an app that never installed it sees the package.
    const { result } = runScript(`
      const Module = require('node:module')
      const resolve = Module._resolveFilename
      Module._resolveFilename = function (request, ...rest) {
        if (request === 'prom-client' || request.startsWith('prom-client/')) {
          const error = new Error("Cannot find module '" + request + "'")
          error.code = 'MODULE_NOT_FOUND'
          throw error
        }
        return resolve.call(this, request, ...rest)
      }
      const { QuotaClock } = require(ROOT)
      const { registerMetrics } = require(ROOT + '/lib/metrics.js')
      const limiter = new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })
      let caught
      try { registerMetrics({ limiters: { api: limiter } }) } catch (error) { caught = error }
      console.log(JSON.stringify({ isError: caught instanceof Error, code: caught.code, message: caught.message, cause: caught.cause && caught.cause.code, allowed: limiter.tryConsume().allowed }))
    `)
    assert.equal(result.isError, true)
    assert.equal(result.code, 'ERR_MISSING_PEER_DEPENDENCY')
    assert.match(result.message, /prom-client/)
    assert.match(result.message, /npm install prom-client/)
    assert.equal(result.cause, 'MODULE_NOT_FOUND')
    assert.equal(result.allowed, true)
  })

  test('an app folder without prom-client gets the same error (a copy of the package, no node_modules)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-no-prom-'))
    try {
      const pkgDir = path.join(dir, 'node_modules', 'quota-clock-source')
      fs.mkdirSync(pkgDir, { recursive: true })
      for (const entry of ['package.json', 'index.js', 'binding.js', 'lib']) fs.cpSync(path.join(ROOT, entry), path.join(pkgDir, entry), { recursive: true })
      for (const file of fs.readdirSync(ROOT).filter((name) => name.endsWith('.node'))) fs.copyFileSync(path.join(ROOT, file), path.join(pkgDir, file))
      const script = `
        const { registerMetrics } = require('quota-clock-source/metrics')
        const { QuotaClock } = require('quota-clock-source')
        try {
          registerMetrics({ limiters: { api: new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' }) } })
          console.log('registered')
        } catch (error) { console.log(JSON.stringify({ code: error.code, message: error.message })) }`
      const child = spawnSync(process.execPath, ['-e', script], { cwd: dir, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_PATH: '' } })
      assert.equal(child.status, 0, child.stderr)
      const result = JSON.parse(child.stdout.trim())
      assert.equal(result.code, 'ERR_MISSING_PEER_DEPENDENCY')
      assert.match(result.message, /prom-client/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})

// A linked install (`npm install ../quota-clock-source` makes a symlink): the package's own folder
// has a prom-client of its own (a dev dependency), and the application has another. registerMetrics
// without `register` must use the application's, found from its main module, then the
// working directory.
describe('registerMetrics in an application that links the package', () => {
  /** A temporary app folder: node_modules/quota-clock-source a symlink to this package, and (withPromClient) a copy of prom-client. */
  function linkedApp(t, { withPromClient = true } = {}) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-linked-app-'))
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }))
    const modules = path.join(dir, 'node_modules')
    fs.mkdirSync(modules)
    fs.symlinkSync(ROOT, path.join(modules, 'quota-clock-source'), 'dir')
    if (withPromClient) {
      // A copy, not a symlink: a symlink would resolve to the package's own copy.
      fs.cpSync(path.join(ROOT, 'node_modules', 'prom-client'), path.join(modules, 'prom-client'), { recursive: true })
      for (const dependency of ['tdigest', 'bintrees', '@opentelemetry']) fs.symlinkSync(path.join(ROOT, 'node_modules', dependency), path.join(modules, dependency), 'dir')
    }
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'linked-app', private: true }))
    const app = `
      const client = require('prom-client')
      const { QuotaClock } = require('quota-clock-source')
      const { registerMetrics } = require('quota-clock-source/metrics')
      const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })
      limiter.tryConsume()
      const own = require(require.resolve('prom-client', { paths: [require('node:fs').realpathSync(require.resolve('quota-clock-source'))] }))
      registerMetrics({ limiters: { api: limiter } })
      ;(async () => console.log(JSON.stringify({ apps: await client.register.metrics(), own: await own.register.metrics(), twoCopies: own !== client })))()
    `
    fs.writeFileSync(path.join(dir, 'server.js'), `'use strict'\n${app}`)
    return dir
  }

  const run = (args, cwd) => spawnSync(process.execPath, args, { cwd, encoding: 'utf8', timeout: 60_000, env: { ...process.env, NODE_PATH: '' } })

  test("the series go to the default registry of the application's prom-client (found from its main module), not the package's own copy", (t) => {
    const dir = linkedApp(t)
    const child = run([path.join(dir, 'server.js')], os.tmpdir()) // the working directory is elsewhere
    assert.equal(child.status, 0, child.stderr)
    const result = JSON.parse(child.stdout.trim())
    assert.equal(result.twoCopies, true, 'the app and the package have two copies of prom-client')
    assert.match(result.apps, /quota_clock_decisions_total\{limiter="api",result="allowed"\} 1/)
    assert.doesNotMatch(result.own, /quota_clock/)
  })

  test('an ES module application, started from elsewhere: from its main module too', (t) => {
    const dir = linkedApp(t)
    fs.writeFileSync(
      path.join(dir, 'server.mjs'),
      `import client from 'prom-client'
      import { QuotaClock } from 'quota-clock-source'
      import { registerMetrics } from 'quota-clock-source/metrics'
      const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })
      limiter.tryConsume()
      registerMetrics({ limiters: { api: limiter } })
      console.log(JSON.stringify({ apps: await client.register.metrics() }))`,
    )
    const child = run([path.join(dir, 'server.mjs')], os.tmpdir())
    assert.equal(child.status, 0, child.stderr)
    assert.match(JSON.parse(child.stdout.trim()).apps, /quota_clock_decisions_total\{limiter="api",result="allowed"\} 1/)
  })

  test('without a main module (node -e), from the working directory', (t) => {
    const dir = linkedApp(t)
    const child = run(['-e', fs.readFileSync(path.join(dir, 'server.js'), 'utf8').replace("'use strict'", '')], dir)
    assert.equal(child.status, 0, child.stderr)
    assert.match(JSON.parse(child.stdout.trim()).apps, /quota_clock_decisions_total\{limiter="api",result="allowed"\} 1/)
  })

  test("an application without prom-client gets ERR_MISSING_PEER_DEPENDENCY naming `register`, even though the package's folder has one; with `register` it works", (t) => {
    const dir = linkedApp(t, { withPromClient: false })
    const script = `
      const { QuotaClock } = require('quota-clock-source')
      const { registerMetrics } = require('quota-clock-source/metrics')
      const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })
      let caught
      try { registerMetrics({ limiters: { api: limiter } }) } catch (error) { caught = { code: error.code, message: error.message } }
      // An app that passes its registry (here one made by the package's copy, as a stand-in) needs no resolution.
      const own = require(require.resolve('prom-client', { paths: [require('node:fs').realpathSync(require.resolve('quota-clock-source'))] }))
      const register = new own.Registry()
      registerMetrics({ register, limiters: { api: limiter } })
      ;(async () => console.log(JSON.stringify({ caught, passed: await register.metrics() })))()
    `
    fs.writeFileSync(path.join(dir, 'server.js'), script)
    const child = run([path.join(dir, 'server.js')], dir)
    assert.equal(child.status, 0, child.stderr)
    const { caught, passed } = JSON.parse(child.stdout.trim())
    assert.equal(caught?.code, 'ERR_MISSING_PEER_DEPENDENCY')
    assert.match(caught.message, /prom-client/)
    assert.match(caught.message, /`register`/)
    assert.match(passed, /quota_clock_decisions_total/)
  })
})

describe('quota-clock-source/metrics types (tsc --noEmit --strict)', () => {
  test('strict TypeScript use of registerMetrics and stats() compiles, CommonJS and ES module files', () => {
    const manifestPath = require.resolve('typescript/package.json', { paths: [ROOT] })
    const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'))
    const tsc = path.join(path.dirname(manifestPath), typeof manifest.bin === 'string' ? manifest.bin : manifest.bin.tsc)
    const typesDir = path.join(__dirname, 'types')
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-metrics-types-'))
    const project = path.join(dir, 'tsconfig.json')
    fs.writeFileSync(project, JSON.stringify({ extends: path.join(typesDir, 'tsconfig.json'), files: ['metrics-usage.ts', 'metrics-usage-esm.mts'].map((file) => path.join(typesDir, file)) }))
    try {
      const result = spawnSync(process.execPath, [tsc, '-p', project, '--noEmit', '--strict', '--pretty', 'false', '--explainFiles'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 })
      const output = `${result.stdout}${result.stderr}`
      assert.equal(result.status, 0, output)
      assert.match(output, /^lib\/metrics\.d\.ts\r?\n\s+Imported via 'quota-clock-source\/metrics' from file '__test__\/types\/metrics-usage\.ts'/m)
      assert.match(output, /Imported via 'quota-clock-source\/metrics' from file '__test__\/types\/metrics-usage-esm\.mts'/)
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('every runtime export of the subpath is declared', () => {
    const declarations = fs.readFileSync(path.join(ROOT, 'lib', 'metrics.d.ts'), 'utf8')
    const names = Object.keys(require('../lib/metrics.js'))
    assert.deepEqual(names, ['registerMetrics'])
    for (const name of names) assert.match(declarations, new RegExp(`export function ${name}\\b`))
  })
})

describe('a shared limiter', () => {
  test('quota_clock_store_calls_total{limiter, outcome} reports its store calls as ok, error and timeout', async () => {
    const t = testStore()
    const { site } = scene()
    const { limiter: tenants } = sharedLimiter(t, { leaseUnits: 1, timeoutMs: 30 }, { capacity: 100, quota: { limit: 1000, period: UTC_DAY } })
    // The limiter's own timers do not keep the process alive: this one does, while a call waits on a hung store.
    const keepAlive = setInterval(() => {}, 1000)
    try {
      const register = new client.Registry()
      const { collectors } = registerMetrics({ register, limiters: { site, tenants } })
      assert.ok(collectors.storeCalls instanceof client.Counter)
      await tenants.consume('a') // one store call, answered
      t.control.mode = 'hang'
      await assert.rejects(tenants.consume('c'), { code: 'ERR_STORE_UNAVAILABLE' }) // no answer within timeoutMs
      // The call's deadline and the driver's timeout count fire at the same timeoutMs: wait for the count.
      for (const deadline = Date.now() + 10_000; tenants.stats().store.timeouts === 0 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 5))
      t.control.mode = 'fail'
      await assert.rejects(tenants.consume('b'), { code: 'ERR_STORE_UNAVAILABLE' }) // an error
      const store = tenants.stats().store
      assert.deepEqual([store.errors, store.timeouts], [1, 1])
      const values = samples(await register.metrics())
      assert.equal(values.get('quota_clock_store_calls_total{limiter="tenants",outcome="ok"}'), store.calls - 2)
      assert.ok(store.calls - 2 >= 1)
      assert.equal(values.get('quota_clock_store_calls_total{limiter="tenants",outcome="error"}'), 1)
      assert.equal(values.get('quota_clock_store_calls_total{limiter="tenants",outcome="timeout"}'), 1)
      assert.equal(values.get('quota_clock_decisions_total{limiter="tenants",result="allowed"}'), 1)
      assert.equal([...values.keys()].filter((name) => name.includes('store_calls') && name.includes('"site"')).length, 0, 'a limiter that is not shared has no store series')
    } finally {
      t.control.mode = 'ok'
      t.release()
      await tenants.close()
      clearInterval(keepAlive)
    }
  })

  test('without a shared limiter there is no store metric', async () => {
    const { site, tenants } = scene()
    const register = new client.Registry()
    const { collectors } = registerMetrics({ register, limiters: { site, tenants } })
    assert.equal(collectors.storeCalls, undefined)
    assert.doesNotMatch(await register.metrics(), /quota_clock_store_calls_total/)
  })
})

// One limiter that cannot be read must not empty the scrape: it is left out, warned
// once with QUOTA_CLOCK_METRICS_SKIPPED, and the others are collected.
describe('a limiter that cannot be read is left out of the scrape; the others are collected', () => {
  const { zonePath } = require('./helpers/zone.js')
  const { warningsDuring } = require('./helpers/warnings.js')
  const zoneLimiter = () => new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', zone: { path: zonePath('metrics') } })
  const cases = [
    ['a zone limiter after close()', 'closed', (limiter) => limiter.close()],
    ['a limiter whose stats() throws', 'stats\\(\\) threw', (limiter) => (limiter.stats = () => { throw new Error('boom') })],
    ['a limiter whose stats() throws a non-Error', 'stats\\(\\) threw', (limiter) => (limiter.stats = () => { throw null })],
    ['a limiter whose stats() answers a negative count', 'not counters', (limiter) => (limiter.stats = () => ({ ...scene().site.stats(), allowed: -1 }))],
    ['a limiter whose stats() answers NaN anomalies', 'not counters', (limiter) => (limiter.stats = () => ({ ...scene().site.stats(), anomalies: { suspend: NaN } }))],
    ['a limiter whose stats() answers a string', 'not counters', (limiter) => (limiter.stats = () => 'fine')],
  ]
  for (const [label, why, spoil] of cases) {
    test(label, { skip: process.platform !== 'linux' && label.includes('zone') }, async () => {
      const { site, tenants } = scene()
      const bad = label.includes('zone') ? zoneLimiter() : new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' })
      bad.tryConsume('x')
      const register = new client.Registry()
      registerMetrics({ register, limiters: { site, bad, tenants } })
      await spoil(bad)
      let first
      let second
      const warnings = await warningsDuring('QUOTA_CLOCK_METRICS_SKIPPED', async () => {
        first = samples(await register.metrics())
        second = samples(await register.metrics())
      })
      for (const values of [first, second]) {
        assert.equal(values.get('quota_clock_decisions_total{limiter="site",result="allowed"}'), 3)
        assert.equal(values.get('quota_clock_keys{limiter="tenants"}'), tenants.stats().keys)
        assert.deepEqual([...values.keys()].filter((name) => name.includes('"bad"')), [])
      }
      assert.equal(warnings.length, 1, 'warned once, not at every scrape')
      assert.match(warnings[0].message, new RegExp(`"bad".*${why}`))
    })
  }

  test('stats() on a closed zone limiter answers the counters it had', { skip: process.platform !== 'linux' }, () => {
    const limiter = zoneLimiter()
    limiter.tryConsume('a')
    limiter.tryConsume('b')
    const before = limiter.stats()
    limiter.close()
    assert.deepEqual(limiter.stats(), before)
    assert.equal(before.allowed, 2)
    assert.throws(() => limiter.tryConsume('a'))
    assert.deepEqual(limiter.stats(), before)
  })
})

test('after unregister() the registry no longer holds the limiters: they are collected like any other', () => {
  const { result } = runScript(
    `
    const client = require('prom-client')
    const { KeyedQuotaClock } = require(ROOT)
    const { registerMetrics } = require(ROOT + '/lib/metrics.js')
    const register = new client.Registry()
    const other = new client.Registry() // alive to the end, as the global registry would be
    const collected = []
    const finalizers = new FinalizationRegistry((name) => collected.push(name))
    let registered
    ;(() => {
      const kept = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })
      const dropped = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' })
      finalizers.register(kept, 'kept')
      finalizers.register(dropped, 'dropped')
      registerMetrics({ register, limiters: { kept } })
      registered = registerMetrics({ register: other, limiters: { dropped } })
    })()
    registered.unregister()
    registered = undefined
    ;(async () => {
      for (let i = 0; i < 20 && collected.length === 0; i++) {
        globalThis.gc()
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      console.log(JSON.stringify({ collected, stillScraped: (await register.metrics()).includes('limiter="kept"'), otherEmpty: other.getMetricsAsArray().length === 0 }))
    })()
    `,
    { args: ['--expose-gc'] },
  )
  assert.deepEqual(result, { collected: ['dropped'], stillScraped: true, otherEmpty: true })
})
