'use strict'
// quota-clock-source/koa, /hono and /nestjs: each adapter passes the behavioural cases the Express
// middleware and the Fastify plugin pass (helpers/http-cases.js), on real servers driven by fetch;
// NestJS's @RateLimit on controllers and handlers; every framework and @opentelemetry/api an
// optional peer, a missing one named.

const { defineCases } = require('./helpers/http-cases.js')

for (const kind of ['Koa', 'Hono', 'NestJS (Express)', 'NestJS (Fastify)']) defineCases(kind)

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { QuotaClock, manualClock } = require('..')

const NOON = Date.UTC(2024, 0, 15, 12)
const limiterOn = (options = {}) => new QuotaClock({ capacity: 5, refillPerSecond: 0.5, suspendPolicy: 'ignore', clock: manualClock({ wallMs: NOON }), ...options })

describe('NestJS: @RateLimit on a controller or a handler', () => {
  require('reflect-metadata')
  const { Module, Controller, Get, HttpException } = require('@nestjs/common')
  const { NestFactory } = require('@nestjs/core')
  const { RateLimitGuard, RateLimit, RateLimitException } = require('quota-clock-source/nestjs')
  const apps = []
  after(async () => {
    for (const app of apps) await app.close()
  })

  function method(Class, name, decorators) {
    const descriptor = Object.getOwnPropertyDescriptor(Class.prototype, name)
    Object.defineProperty(Class.prototype, name, Reflect.decorate(decorators, Class.prototype, name, descriptor) ?? descriptor)
  }

  async function appWith(guard, controllers) {
    class AppModule {}
    Reflect.decorate([Module({ controllers })], AppModule)
    const app = await NestFactory.create(AppModule, { logger: false, abortOnError: false })
    app.useGlobalGuards(guard)
    await app.listen(0, '127.0.0.1')
    apps.push(app)
    const url = await app.getUrl()
    return (route) => fetch(url + route)
  }

  it("a handler's options over the controller's over the guard's (fields merged), and @RateLimit(false) turns limiting off", async () => {
    const guardLimiter = limiterOn({ capacity: 10 })
    const own = limiterOn({ capacity: 1 })
    class Api {
      plain() {
        return 'plain'
      }
      costly() {
        return 'costly'
      }
      health() {
        return 'ok'
      }
      login() {
        return 'login'
      }
    }
    method(Api, 'plain', [Get('plain')])
    method(Api, 'costly', [Get('costly'), RateLimit({ cost: () => 4 })])
    method(Api, 'health', [Get('health'), RateLimit(false)])
    method(Api, 'login', [Get('login'), RateLimit({ limiter: own })])
    Reflect.decorate([Controller('api'), RateLimit({ name: 'api' })], Api)
    class Open {
      index() {
        return 'open'
      }
      limited() {
        return 'limited'
      }
    }
    method(Open, 'index', [Get()])
    method(Open, 'limited', [Get('limited'), RateLimit({ cost: () => 2 })])
    Reflect.decorate([Controller('open'), RateLimit(false)], Open)
    const get = await appWith(new RateLimitGuard({ limiter: guardLimiter }), [Api, Open])

    const plain = await get('/api/plain')
    assert.equal(plain.status, 200)
    assert.equal(plain.headers.get('ratelimit'), '"api-burst";r=9;t=2', "the controller's name on the guard's limiter")
    const costly = await get('/api/costly')
    assert.equal(costly.headers.get('ratelimit'), '"api-burst";r=5;t=10', "the handler's cost, the controller's name")
    for (let i = 0; i < 3; i++) assert.equal((await get('/api/health')).headers.get('ratelimit'), null)
    assert.equal((await get('/open')).headers.get('ratelimit'), null, '@RateLimit(false) on the controller')
    assert.equal((await get('/open/limited')).headers.get('ratelimit'), '"burst";r=3;t=14', "a handler's own options over its controller's false")
    assert.equal((await get('/api/login')).status, 200)
    const denied = await get('/api/login')
    assert.equal(denied.status, 429, "the handler's own limiter")
    assert.equal(denied.headers.get('retry-after'), '2')
    assert.deepEqual((await denied.json())['violated-policies'], ['api-burst'])
    assert.equal(guardLimiter.status().tokens, 3, "the handler with its own limiter took nothing from the guard's")
  })

  it('a denial is a RateLimitException (an HttpException, status 429, the problem as its response) that filters see; onLimited may throw its own', async () => {
    const exception = new RateLimitException({ status: 429 })
    assert.ok(exception instanceof HttpException)
    assert.equal(exception.getStatus(), 429)
    assert.deepEqual(exception.getResponse(), { status: 429 })
    const guard = new RateLimitGuard({ limiter: limiterOn({ capacity: 1 }), onLimited: (request, response, info) => new HttpException({ custom: info.violated }, 429) })
    class Own {
      index() {
        return 'x'
      }
    }
    method(Own, 'index', [Get()])
    Reflect.decorate([Controller('own')], Own)
    const get = await appWith(guard, [Own])
    await get('/own')
    const denied = await get('/own')
    assert.equal(denied.status, 429)
    assert.deepEqual(await denied.json(), { custom: ['burst'] })
    assert.equal(denied.headers.get('retry-after'), '2')
  })

  it('@RateLimit refuses anything but options or false, and options bad on their own, where it is applied; bad guard options throw when the guard is made', () => {
    for (const bad of [true, 'off', null, 5]) assert.throws(() => RateLimit(bad), (err) => err.code === 'ERR_INVALID_OPTION')
    for (const [bad, named] of [
      [{ keyGenerator: () => 'x' }, /keyGenerator/],
      [{ mode: 'x' }, /mode/],
      [{ key: 'ip' }, /key must be a function/],
      [{ onLimited: 1 }, /onLimited/],
    ]) {
      assert.throws(() => RateLimit(bad), (err) => err.code === 'ERR_INVALID_OPTION' && named.test(err.message), JSON.stringify(Object.keys(bad)))
    }
    assert.doesNotThrow(() => RateLimit({ cost: () => 2, mode: 'shadow', name: 'n' }))
    assert.throws(() => new RateLimitGuard({ limiter: limiterOn(), keyGenerator: () => 'k' }), (err) => err.code === 'ERR_INVALID_OPTION' && /keyGenerator/.test(err.message))
  })
})

describe('from an app that installed the package without the frameworks', () => {
  const ROOT = path.resolve(__dirname, '..')
  let app
  before(() => {
    // What npm would install: the files `npm pack` ships, and this build's binary beside them; no peer.
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-peers-'))
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
    const packed = spawnSync(npm, ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: ROOT, encoding: 'utf8', shell: process.platform === 'win32' })
    assert.equal(packed.status, 0, packed.stderr)
    const files = JSON.parse(packed.stdout)[0].files.map((f) => f.path)
    for (const subpath of ['koa', 'hono', 'nestjs', 'otel']) {
      for (const ext of ['js', 'mjs', 'd.ts']) assert.ok(files.includes(`lib/${subpath}.${ext}`), `npm pack ships lib/${subpath}.${ext}`)
    }
    app = path.join(work, 'app')
    const packageDir = path.join(app, 'node_modules', 'quota-clock-source')
    for (const file of [...files, ...fs.readdirSync(ROOT).filter((f) => f.endsWith('.node'))]) {
      fs.mkdirSync(path.dirname(path.join(packageDir, file)), { recursive: true })
      fs.copyFileSync(path.join(ROOT, file), path.join(packageDir, file))
    }
  })
  after(() => fs.rmSync(path.dirname(app), { recursive: true, force: true }))

  it('each adapter, and registerOtelMetrics, throws ERR_MISSING_PEER_DEPENDENCY naming the package to install; the main entry, /http and /shared load', () => {
    fs.writeFileSync(
      path.join(app, 'peers.js'),
      `const seen = {}
      for (const [subpath, use] of [['koa'], ['hono'], ['nestjs'], ['otel', (m) => m.registerOtelMetrics({ limiters: { a: new (require('quota-clock-source').QuotaClock)({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' }) } })]]) {
        try { const m = require('quota-clock-source/' + subpath); if (use) use(m); seen[subpath] = 'loaded' } catch (err) { seen[subpath] = [err.code, err.message] }
      }
      for (const entry of ['quota-clock-source', 'quota-clock-source/http', 'quota-clock-source/shared']) seen[entry] = Object.keys(require(entry)).length > 0
      console.log(JSON.stringify(seen))`,
    )
    const result = spawnSync(process.execPath, ['peers.js'], { cwd: app, encoding: 'utf8', timeout: 30_000 })
    assert.equal(result.status, 0, result.stderr)
    const seen = JSON.parse(result.stdout)
    for (const [subpath, peer] of [['koa', 'koa'], ['hono', 'hono'], ['nestjs', '@nestjs/common'], ['otel', '@opentelemetry/api']]) {
      const [code, message] = seen[subpath]
      assert.equal(code, 'ERR_MISSING_PEER_DEPENDENCY', subpath)
      assert.ok(message.includes(`npm install ${peer}`), message)
    }
    assert.equal(seen['quota-clock-source'], true)
    assert.equal(seen['quota-clock-source/http'], true)
    assert.equal(seen['quota-clock-source/shared'], true)
  })
})

describe('Hono without @hono/node-server (app.request): headers on the Context, appended by a second rateLimit', () => {
  const { Hono } = require('hono')
  const { rateLimit } = require('quota-clock-source/hono')

  it('an allowed and a denied request carry the items of both rateLimits, each once; without key the default key names what it needs', async () => {
    const app = new Hono()
    app.use(rateLimit({ limiter: limiterOn({ capacity: 10 }), name: 'global' }))
    app.use(rateLimit({ limiter: limiterOn({ capacity: 1 }), name: 'route' }))
    app.get('/', (c) => c.text(`allowed ${c.get('rateLimit').allowed}`))
    const allowed = await app.request('/')
    assert.equal(await allowed.text(), 'allowed true')
    assert.equal(allowed.headers.get('ratelimit'), '"global-burst";r=9;t=2, "route-burst";r=0;t=2')
    const denied = await app.request('/')
    assert.equal(denied.status, 429)
    assert.equal(denied.headers.get('content-type'), 'application/problem+json')
    assert.equal(denied.headers.get('ratelimit-policy'), '"global-burst";q=10;w=20, "route-burst";q=1;w=2')
    assert.equal(denied.headers.get('retry-after'), '2')

    const { KeyedQuotaClock } = require('..')
    const keyedApp = new Hono()
    keyedApp.onError((err, c) => c.json({ code: err.code, message: err.message }, 500))
    keyedApp.use(rateLimit({ limiter: new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' }) }))
    keyedApp.get('/', (c) => c.text('never'))
    const failed = await keyedApp.request('/')
    assert.equal(failed.status, 500)
    const body = await failed.json()
    assert.equal(body.code, 'ERR_INVALID_ARG')
    assert.match(body.message, /@hono\/node-server/)
  })

  it("onLimited gets Hono's c and the info, second and third, so that both (c, info) and (c, res, info) read it", async () => {
    const seen = []
    for (const onLimited of [(c, info) => c.json({ violated: info.violated }, 429), (c, res, info) => c.json({ violated: info.violated }, 429)]) {
      const app = new Hono()
      app.use(rateLimit({ limiter: limiterOn({ capacity: 1 }), name: 'api', onLimited }))
      app.get('/', (c) => c.text('ok'))
      await app.request('/')
      const denied = await app.request('/')
      assert.equal(denied.status, 429)
      seen.push(await denied.json())
    }
    assert.deepEqual(seen, [{ violated: ['api-burst'] }, { violated: ['api-burst'] }])
  })
})
