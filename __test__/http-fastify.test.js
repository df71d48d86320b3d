'use strict'
// quota-clock-source/fastify: the Fastify 5 plugin passes the same behavioural cases as the Express
// middleware (helpers/http-cases.js), on a real socket and through inject; it is the plugin itself
// (and .default), wrapped with fastify-plugin so it applies to every route registered after it;
// routes opt out or get options of their own through config.rateLimit; it works from an app that
// installed the package (CJS, ESM, strict types), and says which peer is missing when one is.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const Fastify = require('fastify')

const { KeyedQuotaClock, QuotaClock, manualClock } = require('..')
const { defineCases } = require('./helpers/http-cases.js')
const { items } = require('./helpers/http-servers.js')

const ROOT = path.resolve(__dirname, '..')
const NOON = Date.UTC(2024, 0, 15, 12)

for (const kind of ['Fastify (socket)', 'Fastify (inject)']) defineCases(kind)

const limiterOn = (options = {}) => new QuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), ...options })

describe('the quota-clock-source/fastify subpath', () => {
  it('require gives the plugin itself, also as .default; import gives it as the default export', async () => {
    const plugin = require('quota-clock-source/fastify')
    assert.equal(typeof plugin, 'function')
    assert.equal(plugin.default, plugin)
    const esm = await import('quota-clock-source/fastify')
    assert.equal(esm.default, plugin)
    assert.equal(plugin[Symbol.for('skip-override')], true, 'wrapped with fastify-plugin')
    assert.equal(plugin[Symbol.for('plugin-meta')].name, 'quota-clock-source')
  })

  it('bad options reject the registration with ERR_INVALID_OPTION', async () => {
    const plugin = require('../lib/fastify.js')
    for (const [options, ErrorClass, pattern] of [
      [{}, TypeError, /limiter or limits is required/],
      [{ limiter: limiterOn(), keyGenerator: () => 'k' }, TypeError, /unknown option 'keyGenerator'/],
      [{ limiter: new Proxy(limiterOn(), {}) }, TypeError, /Proxy/],
    ]) {
      const app = Fastify()
      await assert.rejects(async () => app.register(plugin, options), (err) => err instanceof ErrorClass && err.code === 'ERR_INVALID_OPTION' && pattern.test(err.message))
      await app.close()
    }
  })
})

describe('which routes the plugin limits', () => {
  const plugin = require('../lib/fastify.js')
  const apps = []
  after(async () => {
    for (const app of apps) await app.close()
  })
  async function appWith(options, build) {
    const app = Fastify()
    apps.push(app)
    await app.register(plugin, options)
    await build(app)
    await app.ready()
    return app
  }

  it('every route registered after it, in the same context and in child plugins (fastify-plugin: no encapsulation)', async () => {
    const limiter = limiterOn({ capacity: 2 })
    const app = await appWith({ limiter }, (app) => {
      app.get('/a', async () => 'a')
      app.register(async (child) => child.get('/b', async () => 'b'), { prefix: '/child' })
    })
    assert.equal((await app.inject('/a')).statusCode, 200)
    assert.equal((await app.inject('/child/b')).statusCode, 200)
    const denied = await app.inject('/a')
    assert.equal(denied.statusCode, 429, 'one limiter across both routes')
    assert.equal(denied.headers['content-type'], 'application/problem+json')
  })

  it("config: { rateLimit: false } opts a route out: no headers, nothing taken", async () => {
    const limiter = limiterOn({ capacity: 1 })
    const app = await appWith({ limiter }, (app) => {
      app.get('/', async () => 'limited')
      app.get('/health', { config: { rateLimit: false } }, async () => 'ok')
    })
    for (let i = 0; i < 3; i++) {
      const response = await app.inject('/health')
      assert.equal(response.statusCode, 200)
      assert.equal(response.headers.ratelimit, undefined)
    }
    assert.equal(limiter.status().tokens, 1)
    assert.equal((await app.inject('/')).statusCode, 200)
    assert.equal((await app.inject('/')).statusCode, 429)
  })

  it("config: { rateLimit: { ...options } } gives a route the plugin's options with its own on top", async () => {
    const shared = limiterOn({ capacity: 10 })
    const own = new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }) })
    const app = await appWith({ limiter: shared, name: 'api' }, (app) => {
      app.get('/', async () => 'plain')
      app.get('/search', { config: { rateLimit: { cost: () => 4 } } }, async () => 'search')
      app.get('/login', { config: { rateLimit: { limiter: own, key: (request) => request.headers['x-user'] } } }, async () => 'login')
    })
    const search = await app.inject('/search')
    assert.equal(search.statusCode, 200)
    assert.deepEqual(items({ headers: new Headers(search.headers) }, 'ratelimit'), { 'api-burst': { r: 6, t: 8 } }, "the plugin's limiter and name, the route's cost")
    assert.equal(shared.status().tokens, 6)
    const login = await app.inject({ url: '/login', headers: { 'x-user': 'ann' } })
    assert.equal(login.statusCode, 200)
    assert.equal(login.headers['ratelimit-policy'], '"api-burst";q=1;w=1', "the route's own limiter")
    assert.equal((await app.inject({ url: '/login', headers: { 'x-user': 'ann' } })).statusCode, 429)
    assert.equal(shared.status().tokens, 6, 'the route with its own limiter took nothing from the shared one')
    assert.equal((await app.inject('/')).statusCode, 200)
  })

  it('a route config that is neither false nor options fails the app at ready with ERR_INVALID_OPTION naming the route', async () => {
    for (const rateLimit of [true, 'off', { limiter: {} }, { bogus: 1 }]) {
      const app = Fastify()
      await app.register(plugin, { limiter: limiterOn() })
      app.register(async (child) => child.get('/x', { config: { rateLimit } }, async () => 'x'))
      await assert.rejects(app.ready(), (err) => err.code === 'ERR_INVALID_OPTION' && (typeof rateLimit !== 'object' ? /route \/x/.test(err.message) : true))
      await app.close()
    }
  })

  it('an error of a request goes to the Fastify error handler (done(err)); the default one answers 500', async () => {
    const clock = manualClock({ wallMs: NOON })
    const limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock })
    const app = await appWith({ limiter }, (app) => app.get('/', async () => 'never'))
    clock.set({ monotonicMs: -1 })
    const response = await app.inject('/')
    assert.equal(response.statusCode, 500)
    assert.equal(response.json().code, 'ERR_MONOTONIC_REGRESSION')
  })
})

describe('from an app that installed the package', () => {
  let work
  let packageDir
  before(() => {
    // What npm would install: the files `npm pack` ships, and this build's binary beside them.
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-fastify-'))
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    const packed = spawnSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8', shell: process.platform === 'win32' })
    assert.equal(packed.status, 0, packed.stderr)
    const files = JSON.parse(packed.stdout)[0].files.map((f) => f.path)
    for (const required of ['lib/fastify.js', 'lib/fastify.mjs', 'lib/fastify.d.ts']) assert.ok(files.includes(required), `npm pack ships ${required}`)
    packageDir = path.join(work, 'app', 'node_modules', 'quota-clock-source')
    for (const file of [...files, ...fs.readdirSync(ROOT).filter((f) => f.endsWith('.node'))]) {
      fs.mkdirSync(path.dirname(path.join(packageDir, file)), { recursive: true })
      fs.copyFileSync(path.join(ROOT, file), path.join(packageDir, file))
    }
  })
  after(() => fs.rmSync(work, { recursive: true, force: true }))

  function run(file, source) {
    const app = path.join(work, 'app')
    fs.writeFileSync(path.join(app, file), source)
    return spawnSync(process.execPath, [file], { cwd: app, encoding: 'utf8', timeout: 30_000 })
  }

  it('without fastify-plugin installed, require says so: ERR_MISSING_PEER_DEPENDENCY naming it', () => {
    const result = run('missing.js', `
      try { require('quota-clock-source/fastify'); console.log('loaded') } catch (err) { console.log(JSON.stringify({ code: err.code, message: err.message })) }
      console.log(typeof require('quota-clock-source/http').rateLimit)
    `)
    assert.equal(result.status, 0, result.stderr)
    const [line, httpStill] = result.stdout.trim().split('\n')
    const { code, message } = JSON.parse(line)
    assert.equal(code, 'ERR_MISSING_PEER_DEPENDENCY')
    assert.match(message, /fastify-plugin/)
    assert.match(message, /npm install fastify-plugin/)
    assert.equal(httpStill, 'function', 'the other subpaths do not need it')
  })

  it('with fastify and fastify-plugin installed: CJS and ESM apps answer 429 problems as the middleware does', () => {
    const modules = path.join(work, 'app', 'node_modules')
    for (const name of ['fastify', 'fastify-plugin']) {
      if (!fs.existsSync(path.join(modules, name))) fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(modules, name), 'dir')
    }
    const body = (importLines) => `${importLines}
      const app = Fastify()
      await app.register(plugin, { limiter: new QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' }) })
      app.get('/', async () => 'hello')
      const first = await app.inject('/')
      const second = await app.inject('/')
      console.log(JSON.stringify([first.statusCode, second.statusCode, second.headers['content-type'], second.json()['violated-policies']]))
      await app.close()`
    const cjs = run('app.js', `(async () => {${body(`
      const Fastify = require('fastify'); const plugin = require('quota-clock-source/fastify'); const { QuotaClock } = require('quota-clock-source')`)}
    })()`)
    const esm = run('app.mjs', body(`
      import Fastify from 'fastify'; import plugin from 'quota-clock-source/fastify'; import { QuotaClock } from 'quota-clock-source'`))
    for (const result of [cjs, esm]) {
      assert.equal(result.status, 0, result.stderr)
      assert.deepEqual(JSON.parse(result.stdout), [200, 429, 'application/problem+json', ['burst']])
    }
  })
})

describe('the types, as a strict TypeScript user meets them', () => {
  function tsc(files) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-fastify-types-'))
    const project = path.join(dir, 'tsconfig.json')
    fs.writeFileSync(project, JSON.stringify({ extends: path.join(__dirname, 'types', 'tsconfig.json'), compilerOptions: { types: undefined }, files: files.map((f) => path.join(__dirname, 'types', f)) }))
    const manifestPath = require.resolve('typescript/package.json', { paths: [ROOT] })
    const { bin } = JSON.parse(fs.readFileSync(manifestPath, 'utf8'))
    const tscPath = path.join(path.dirname(manifestPath), typeof bin === 'string' ? bin : bin.tsc)
    const result = spawnSync(process.execPath, [tscPath, '-p', project, '--noEmit', '--strict', '--pretty', 'false'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 })
    fs.rmSync(dir, { recursive: true, force: true })
    return { status: result.status, output: `${result.stdout}${result.stderr}` }
  }

  it('CJS (import = require) and ESM usage compile under --strict, route config included', () => {
    const { status, output } = tsc(['fastify-usage.ts', 'fastify-usage-esm.mts'])
    assert.equal(status, 0, output)
  })

  it("a route config with an option rateLimit does not take does not compile", () => {
    const { status, output } = tsc(['fastify-wrong-option.ts'])
    assert.notEqual(status, 0)
    assert.match(output, /keyGenerator/)
  })
})
