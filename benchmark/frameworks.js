'use strict'
// `npm run bench:frameworks`: what a rate limiter costs a hello-world Koa, Hono (@hono/node-server)
// and NestJS (Express platform) app, ours beside each framework's popular limiter and no limiter.
//
// For each framework: no limiter; a no-op middleware (for Nest a guard: the layer any limiter costs
// the framework); the same layer setting two fixed headers the way ours sets its two (the
// framework's own cost of writing them, before any decision: the floor under ours); its popular limiter (koa-ratelimit 6 with its memory driver,
// hono-rate-limiter with its memory store and draft-7 headers, @nestjs/throttler 6 as a global
// guard), each keyed by the client address with a limit no run reaches; ours (draft-11 headers,
// a KeyedQuotaClock keyed by the default client key), and ours with `headers: false` (the decision
// alone). autocannon on 127.0.0.1, many short rounds,
// the cases shuffled in each (the machine is shared and noisy: every comparison is paired within a
// round); each case's server runs in a child process of its own, as an application runs one
// framework with one limiter, and reports process.cpuUsage(), so each case's server CPU per
// request is measured, and its extra over the same framework's no-limiter case.
// BENCH_FRAMEWORKS_PROCESSES=one runs every server in one child instead: there the code the cases
// share (each framework's own, and our decision core under three adapters and two header settings)
// sees every case's objects, which slows each case by what the others happen to be.
// The figure that counts: ours' extra CPU per request ÷ the peer's, per framework, paired per round.
//
// BENCH_FRAMEWORKS_ROUNDS, BENCH_FRAMEWORKS_SECONDS and BENCH_FRAMEWORKS_CONNECTIONS override the
// defaults; the whole run takes about five minutes.

const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const os = require('node:os')

const ROUNDS = Number(process.env.BENCH_FRAMEWORKS_ROUNDS || 10)
const SECONDS = Number(process.env.BENCH_FRAMEWORKS_SECONDS || 1.5)
const CONNECTIONS = Number(process.env.BENCH_FRAMEWORKS_CONNECTIONS || 10)
const TARGET_RATIO = 0.5
const HUGE = 1e9 // a limit no run reaches: every request is allowed, and asserted to be

const FRAMEWORKS = {
  Koa: { peer: 'koa-ratelimit 6 (memory driver)' },
  Hono: { peer: 'hono-rate-limiter (memory store, draft-7 headers)' },
  'NestJS (Express)': { peer: '@nestjs/throttler 6 (global guard)' },
}
// BENCH_FRAMEWORKS_ONLY=Hono (a framework's name) runs that framework's cases alone.
const ONLY = process.env.BENCH_FRAMEWORKS_ONLY
const ONE_PROCESS = process.env.BENCH_FRAMEWORKS_PROCESSES === 'one'
for (const name of Object.keys(FRAMEWORKS)) if (ONLY !== undefined && ONLY !== name) delete FRAMEWORKS[name]
// A no-op middleware (a guard, for Nest) is the layer any limiter costs the framework, shown for reference.
// The two headers ours writes in these runs, fixed: a request leaves the key as the last one did.
const FIXED_POLICY = '"burst";q=1000000000;w=1'
const FIXED_LIMIT = '"burst";r=999999999;t=1'
const TWO_HEADERS = 'two fixed headers'
const CASES = Object.entries(FRAMEWORKS).flatMap(([framework, { peer }]) =>
  ['no limiter', 'no-op middleware', TWO_HEADERS, peer, 'ours', 'ours, headers: false'].map((limiter) => ({ framework, limiter, name: `${framework}: ${limiter}` })),
)

const keyed = () => {
  const { KeyedQuotaClock } = require('..')
  return new KeyedQuotaClock({ capacity: HUGE, refillPerSecond: HUGE, suspendPolicy: 'ignore' })
}

// ---------------------------------------------------------------------------------------------
// The servers (the child process)

function koaServer(limiter) {
  const http = require('node:http')
  const Koa = require('koa')
  const app = new Koa()
  if (limiter.startsWith('ours')) app.use(require('../lib/koa.js').rateLimit({ limiter: keyed(), headers: limiter === 'ours' && 'draft-11' }))
  else if (limiter === 'no-op middleware') app.use((ctx, next) => next())
  else if (limiter === TWO_HEADERS) {
    app.use((ctx, next) => {
      ctx.res.setHeader('RateLimit-Policy', FIXED_POLICY)
      ctx.res.setHeader('RateLimit', FIXED_LIMIT)
      return next()
    })
  } else if (limiter !== 'no limiter') app.use(require('koa-ratelimit')({ driver: 'memory', db: new Map(), duration: 60_000, max: HUGE, id: (ctx) => ctx.ip }))
  app.use((ctx) => {
    ctx.body = 'Hello World!'
  })
  return http.createServer(app.callback())
}

function honoServer(limiter) {
  const { Hono } = require('hono')
  const { createAdaptorServer } = require('@hono/node-server')
  const app = new Hono()
  if (limiter.startsWith('ours')) app.use(require('../lib/hono.js').rateLimit({ limiter: keyed(), headers: limiter === 'ours' && 'draft-11' }))
  else if (limiter === 'no-op middleware') app.use((c, next) => next())
  else if (limiter === TWO_HEADERS) {
    app.use((c, next) => {
      c.env.outgoing.setHeader('RateLimit-Policy', FIXED_POLICY)
      c.env.outgoing.setHeader('RateLimit', FIXED_LIMIT)
      return next()
    })
  } else if (limiter !== 'no limiter') {
    const { rateLimiter } = require('hono-rate-limiter')
    app.use(rateLimiter({ windowMs: 60_000, limit: HUGE, standardHeaders: 'draft-7', keyGenerator: (c) => c.env.incoming.socket.remoteAddress }))
  }
  app.get('/', (c) => c.text('Hello World!'))
  return createAdaptorServer({ fetch: app.fetch })
}

async function nestServer(limiter) {
  require('reflect-metadata')
  const { Module, Controller, Get } = require('@nestjs/common')
  const { NestFactory, APP_GUARD } = require('@nestjs/core')
  class HelloController {
    hello() {
      return 'Hello World!'
    }
  }
  const descriptor = Object.getOwnPropertyDescriptor(HelloController.prototype, 'hello')
  Reflect.decorate([Get()], HelloController.prototype, 'hello', descriptor)
  Reflect.decorate([Controller()], HelloController)
  const imports = []
  const providers = []
  if (limiter.startsWith('ours')) {
    const { RateLimitGuard } = require('../lib/nestjs.js')
    providers.push({ provide: APP_GUARD, useValue: new RateLimitGuard({ limiter: keyed(), headers: limiter === 'ours' && 'draft-11' }) })
  } else if (limiter === 'no-op middleware') {
    providers.push({ provide: APP_GUARD, useValue: { canActivate: () => true } })
  } else if (limiter === TWO_HEADERS) {
    const canActivate = (context) => {
      const res = context.switchToHttp().getResponse()
      res.setHeader('RateLimit-Policy', FIXED_POLICY)
      res.setHeader('RateLimit', FIXED_LIMIT)
      return true
    }
    providers.push({ provide: APP_GUARD, useValue: { canActivate } })
  } else if (limiter !== 'no limiter') {
    const { ThrottlerModule, ThrottlerGuard } = require('@nestjs/throttler')
    imports.push(ThrottlerModule.forRoot([{ ttl: 60_000, limit: HUGE }]))
    providers.push({ provide: APP_GUARD, useClass: ThrottlerGuard })
  }
  class AppModule {}
  Reflect.decorate([Module({ imports, controllers: [HelloController], providers })], AppModule)
  const app = await NestFactory.create(AppModule, { logger: false })
  await app.init()
  return app.getHttpServer()
}

async function serverMain(names) {
  const ports = {}
  for (const { framework, limiter, name } of CASES.filter((c) => names.includes(c.name))) {
    const server = framework === 'Koa' ? koaServer(limiter) : framework === 'Hono' ? honoServer(limiter) : await nestServer(limiter)
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    ports[name] = server.address().port
  }
  process.send({ ports })
  process.on('message', (message) => {
    if (message === 'cpu') process.send({ cpu: process.cpuUsage() })
    if (message === 'exit') process.exit(0)
  })
}

// ---------------------------------------------------------------------------------------------
// The load (the parent)

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (sorted.length - 1) * q
  const low = Math.floor(at)
  return sorted[low] + (sorted[Math.ceil(at)] - sorted[low]) * (at - low)
}
const median = (values) => quantile(values, 0.5)
const spread = (values, digits = 2) => `${quantile(values, 0.25).toFixed(digits)}–${quantile(values, 0.75).toFixed(digits)}`
const range = (values, digits = 2) => `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`

function shuffled(items) {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j], out[i]]
  }
  return out
}

function ask(child, message, field) {
  return new Promise((resolve) => {
    const onMessage = (reply) => {
      if (reply[field] === undefined) return
      child.off('message', onMessage)
      resolve(reply[field])
    }
    child.on('message', onMessage)
    if (message !== undefined) child.send(message)
  })
}

async function load(url, seconds) {
  const autocannon = require('autocannon')
  const result = await autocannon({ url, connections: CONNECTIONS, duration: seconds })
  assert.equal(result.errors, 0, `${url}: ${result.errors} errors`)
  assert.equal(result.non2xx, 0, `${url}: ${result.non2xx} responses were not 2xx`)
  return result
}

/** Each case answers hello; ours with its RateLimit header, the peers with theirs. */
async function checkAnswers(url) {
  for (const { limiter, name } of CASES) {
    const response = await fetch(url(name))
    assert.equal(response.status, 200, name)
    assert.equal(await response.text(), 'Hello World!', name)
    if (limiter === 'ours') {
      assert.equal(response.headers.get('ratelimit-policy'), FIXED_POLICY, name)
      assert.equal(response.headers.get('ratelimit'), FIXED_LIMIT, name)
    }
    if (limiter === TWO_HEADERS) assert.equal(response.headers.get('ratelimit'), FIXED_LIMIT, name)
    if (limiter.startsWith('koa-ratelimit')) assert.ok(response.headers.get('x-ratelimit-remaining'), name)
    if (limiter.startsWith('hono-rate-limiter')) assert.ok(response.headers.get('ratelimit'), name)
    if (limiter.startsWith('@nestjs/throttler')) assert.ok(response.headers.get('x-ratelimit-remaining'), name)
  }
}

async function main() {
  console.log(`Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0].model}`)
  const groups = ONE_PROCESS ? [CASES.map((c) => c.name)] : CASES.map((c) => [c.name])
  const children = groups.map((names) => fork(__filename, ['--server', JSON.stringify(names)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }))
  try {
    const ports = {}
    const childOf = {}
    for (const [i, child] of children.entries()) {
      Object.assign(ports, await ask(child, undefined, 'ports'))
      for (const name of groups[i]) childOf[name] = child
    }
    const url = (name) => `http://127.0.0.1:${ports[name]}/`
    await checkAnswers(url)
    for (const { name } of CASES) await load(url(name), 1) // warm-up
    const rounds = []
    for (let round = 0; round < ROUNDS; round++) {
      const results = {}
      for (const { name } of shuffled(CASES)) {
        const before = await ask(childOf[name], 'cpu', 'cpu')
        const result = await load(url(name), SECONDS)
        const after = await ask(childOf[name], 'cpu', 'cpu')
        const requests = result.requests.total
        results[name] = { rps: requests / (result.duration || SECONDS), cpuPerRequest: (after.user + after.system - before.user - before.system) / requests }
      }
      rounds.push(results)
      process.stderr.write(`round ${round + 1}/${ROUNDS}\r`)
    }
    const where = ONE_PROCESS ? 'every server in one process' : 'each server in a process of its own'
    console.log(`\n### Koa, Hono and NestJS hello world (autocannon ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${SECONDS} s per case, ${where})\n`)
    console.log('| framework: limiter | requests/s | server CPU µs/request | extra CPU µs/request vs no limiter (paired, IQR) | vs no-op middleware |')
    console.log('|---|---:|---:|---:|---:|')
    for (const { framework, limiter, name } of CASES) {
      const of = (field) => median(rounds.map((r) => r[name][field]))
      const none = `${framework}: no limiter`
      const extra = rounds.map((r) => r[name].cpuPerRequest - r[none].cpuPerRequest)
      const noop = `${framework}: no-op middleware`
      const overNoop = rounds.map((r) => r[name].cpuPerRequest - r[noop].cpuPerRequest)
      const vsNoop = limiter === 'no limiter' || limiter === 'no-op middleware' ? '' : `${median(overNoop).toFixed(2)} (${spread(overNoop, 2)})`
      console.log(`| ${name} | ${of('rps').toFixed(0)} | ${of('cpuPerRequest').toFixed(1)} | ${limiter === 'no limiter' ? '' : `${median(extra).toFixed(2)} (${spread(extra, 2)})`} | ${vsNoop} |`)
    }
    console.log('')
    // Each case's extra CPU per request over no limiter ÷ the peer's, paired per round.
    const ratios = (framework, peer, limiter) => {
      const none = `${framework}: no limiter`
      return rounds.map((r) => (r[`${framework}: ${limiter}`].cpuPerRequest - r[none].cpuPerRequest) / (r[`${framework}: ${peer}`].cpuPerRequest - r[none].cpuPerRequest))
    }
    for (const [framework, { peer }] of Object.entries(FRAMEWORKS)) {
      const ratio = ratios(framework, peer, 'ours')
      const value = median(ratio)
      console.log(
        `${framework}: ours' extra server CPU per request ÷ ${peer}'s, paired per round: median ${value.toFixed(2)} (IQR ${spread(ratio, 2)}, range ${range(ratio, 2)}); target ≤ ${TARGET_RATIO}: ${value <= TARGET_RATIO ? 'holds' : 'MISSED'}`,
      )
      const floor = ratios(framework, peer, TWO_HEADERS)
      const decision = ratios(framework, peer, 'ours, headers: false')
      console.log(
        `  the same ratio of a ${framework === 'NestJS (Express)' ? 'guard' : 'middleware'} that only sets two fixed headers (the floor under ours): median ${median(floor).toFixed(2)} (IQR ${spread(floor, 2)}); of ours with headers: false: median ${median(decision).toFixed(2)} (IQR ${spread(decision, 2)})`,
      )
    }
  } finally {
    for (const child of children) child.send('exit')
  }
}

if (process.argv[2] === '--server') serverMain(JSON.parse(process.argv[3]))
else
  main().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
