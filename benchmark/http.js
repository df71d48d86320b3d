'use strict'
// `npm run bench:http`: what a rate limiting middleware costs a hello-world Express app.
//
// 1. Micro-benchmark: each middleware alone on a fake request and response, in ns per request
//    minus a no-op middleware. Every case runs behind the same awaited harness (the limiters of
//    express-rate-limit and rate-limiter-flexible are asynchronous); rounds are interleaved and
//    ratios are paired within a round.
// 2. End to end: autocannon on 127.0.0.1 against Express 5 with no limiter, with express-rate-limit
//    v8 (memory store, keyed by IP, draft-8 headers), with rate-limiter-flexible's memory limiter
//    (headers as its README's Express example sets them), and with ours (draft-11 headers). Many
//    short rounds, the case order shuffled in each; requests/s, p99 latency and the server's CPU
//    time per request (the server runs in a child process, which reports process.cpuUsage()), each
//    compared with the no-limiter case of the same round.
//
// A no-op middleware is measured end to end too: any middleware costs Express a router layer.
//
// BENCH_HTTP_ROUNDS, BENCH_HTTP_SECONDS, BENCH_HTTP_CONNECTIONS, BENCH_HTTP_MICRO_ROUNDS and
// BENCH_HTTP_MICRO_ITERATIONS override the defaults; the whole run takes about two minutes.

const assert = require('node:assert/strict')
const { fork } = require('node:child_process')
const os = require('node:os')

const ROUNDS = Number(process.env.BENCH_HTTP_ROUNDS || 10)
const SECONDS = Number(process.env.BENCH_HTTP_SECONDS || 1.5)
const CONNECTIONS = Number(process.env.BENCH_HTTP_CONNECTIONS || 10)
const MICRO_ROUNDS = Number(process.env.BENCH_HTTP_MICRO_ROUNDS || 15)
const MICRO_ITERATIONS = Number(process.env.BENCH_HTTP_MICRO_ITERATIONS || 20_000)
const TARGET_MICRO_RATIO = 0.25

const HUGE = 1e9 // limits no benchmark reaches (and header values of a realistic size): every request is allowed, and asserted to be

// ---------------------------------------------------------------------------------------------
// The middlewares, shared by both parts

function middlewares() {
  const { KeyedQuotaClock } = require('..')
  const { rateLimit } = require('../lib/http.js')
  const { rateLimit: expressRateLimit } = require('express-rate-limit')
  const { RateLimiterMemory } = require('rate-limiter-flexible')
  const { serializeList } = require('structured-headers')

  const flexible = new RateLimiterMemory({ points: HUGE, duration: 60 })
  const keyed = () => new KeyedQuotaClock({ capacity: HUGE, refillPerSecond: HUGE, suspendPolicy: 'ignore' })
  const monthly = new KeyedQuotaClock({
    capacity: HUGE,
    refillPerSecond: HUGE,
    suspendPolicy: 'ignore',
    quota: { limit: Number.MAX_SAFE_INTEGER, period: { unit: 'month', timeZone: 'America/Los_Angeles' } },
  })
  const ours = rateLimit({ limiter: keyed() })
  return {
    'no limiter': (req, res, next) => next(),
    // End to end, any middleware costs a router layer: this is that cost alone.
    'no-op middleware': (req, res, next) => next(),
    'express-rate-limit 8 (draft-8 headers)': expressRateLimit({ windowMs: 60_000, limit: HUGE, standardHeaders: 'draft-8', legacyHeaders: false }),
    'rate-limiter-flexible 11 memory (X-RateLimit-* headers)': (req, res, next) => {
      flexible.consume(req.ip).then(
        (result) => {
          res.setHeader('Retry-After', String(Math.ceil(result.msBeforeNext / 1000)))
          res.setHeader('X-RateLimit-Limit', String(HUGE))
          res.setHeader('X-RateLimit-Remaining', String(result.remainingPoints))
          res.setHeader('X-RateLimit-Reset', new Date(Date.now() + result.msBeforeNext).toISOString())
          next()
        },
        () => {
          res.statusCode = 429
          res.end('Too Many Requests')
        },
      )
    },
    'ours (draft-11 headers)': ours,
    'ours, headers: false': rateLimit({ limiter: keyed(), headers: false }),
    'ours, per-client burst + per-tenant monthly quota': rateLimit({
      limits: [
        { limiter: keyed(), name: 'client' },
        { limiter: monthly, key: () => 'tenant-1', name: 'tenant' },
      ],
    }),
    // What serializing the RateLimit list with structured-headers on every request would add.
    'ours + serializeList of the RateLimit items per request': (req, res, next) => {
      ours(req, res, () => {
        res.setHeader('RateLimit', serializeList([['burst', new Map([['r', 999], ['t', 1]])], ['month', new Map([['r', 99_999], ['t', 1_209_600]])]]))
        next()
      })
    },
  }
}

const END_TO_END_CASES = [
  'no limiter',
  'no-op middleware',
  'express-rate-limit 8 (draft-8 headers)',
  'rate-limiter-flexible 11 memory (X-RateLimit-* headers)',
  'ours (draft-11 headers)',
  'ours, headers: false',
]
const PEER = 'express-rate-limit 8 (draft-8 headers)'
const OURS = 'ours (draft-11 headers)'

// ---------------------------------------------------------------------------------------------
// Statistics

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (sorted.length - 1) * q
  const low = Math.floor(at)
  return sorted[low] + (sorted[Math.ceil(at)] - sorted[low]) * (at - low)
}
const median = (values) => quantile(values, 0.5)
const spread = (values, digits = 2) => `${quantile(values, 0.25).toFixed(digits)}–${quantile(values, 0.75).toFixed(digits)}`

function shuffled(items) {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j], out[i]]
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// 1. Micro-benchmark

const { fakeRequest, fakeResponse, microCase } = require('./fake-http.js')

async function checkAllows(name, middleware) {
  const res = fakeResponse()
  let passed = false
  await new Promise((resolve) => {
    middleware(fakeRequest(0), res, () => {
      passed = true
      resolve()
    })
    setTimeout(resolve, 1000)
  })
  assert.ok(passed, `${name}: the request did not pass`)
  assert.equal(res.statusCode, 200, name)
  if (name.startsWith('ours') && !name.includes('headers: false')) {
    assert.match(String(res.headers.get('ratelimit')), /^"[\w-]*burst";r=\d+;t=\d+/, `${name}: no RateLimit header`)
    assert.match(String(res.headers.get('ratelimit-policy')), /^"[\w-]*burst";q=\d+;w=\d+/, `${name}: no RateLimit-Policy header`)
  }
  if (name.startsWith('express-rate-limit')) assert.ok(res.headers.has('ratelimit'), `${name}: no RateLimit header`)
}

async function micro() {
  const cases = middlewares()
  const names = Object.keys(cases).filter((name) => name !== 'no-op middleware') // the harness's no-op is 'no limiter'
  for (const name of names) await checkAllows(name, cases[name])
  for (const name of names) await microCase(cases[name], MICRO_ITERATIONS) // warm-up
  const rounds = []
  for (let round = 0; round < MICRO_ROUNDS; round++) {
    const times = {}
    for (const name of shuffled(names)) times[name] = await microCase(cases[name], MICRO_ITERATIONS)
    rounds.push(times)
  }
  const net = (name) => rounds.map((times) => times[name] - times['no limiter'])
  const ratio = (name) => rounds.map((times) => (times[name] - times['no limiter']) / (times[PEER] - times['no limiter']))
  console.log(`\n### Middleware alone (fake req/res, ${MICRO_ROUNDS} interleaved rounds of ${MICRO_ITERATIONS} requests over 100 client addresses)\n`)
  console.log('| middleware | ns per request | minus no-op | × express-rate-limit (paired) |')
  console.log('|---|---:|---:|---:|')
  for (const name of names) {
    const total = median(rounds.map((times) => times[name]))
    if (name === 'no limiter') {
      console.log(`| ${name} (the harness) | ${total.toFixed(0)} | | |`)
      continue
    }
    console.log(`| ${name} | ${total.toFixed(0)} | ${median(net(name)).toFixed(0)} | ${median(ratio(name)).toFixed(3)} (${spread(ratio(name), 3)}) |`)
  }
  const ours = median(ratio(OURS))
  console.log(`\nTarget: ours with headers ≤ ${TARGET_MICRO_RATIO}× express-rate-limit's per-request cost: ${ours <= TARGET_MICRO_RATIO ? 'holds' : 'MISSED'} (${ours.toFixed(3)}×, interquartile ${spread(ratio(OURS), 3)})`)
}

// ---------------------------------------------------------------------------------------------
// 2. End to end

function serverMain() {
  const http = require('node:http')
  const express = require('express')
  const cases = middlewares()
  const ports = {}
  let pending = END_TO_END_CASES.length
  for (const name of END_TO_END_CASES) {
    const app = express()
    if (name !== 'no limiter') app.use(cases[name])
    app.get('/', (req, res) => res.send('Hello World!'))
    const server = http.createServer(app)
    server.listen(0, '127.0.0.1', () => {
      ports[name] = server.address().port
      if (--pending === 0) process.send({ ports })
    })
  }
  process.on('message', (message) => {
    if (message === 'cpu') process.send({ cpu: process.cpuUsage() })
    if (message === 'exit') process.exit(0)
  })
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

async function endToEnd() {
  const child = fork(__filename, ['--server'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  try {
    const ports = await ask(child, undefined, 'ports')
    const url = (name) => `http://127.0.0.1:${ports[name]}/`
    for (const name of END_TO_END_CASES) {
      const response = await fetch(url(name))
      assert.equal(response.status, 200, name)
      assert.equal(await response.text(), 'Hello World!')
      if (name === OURS) assert.match(String(response.headers.get('ratelimit')), /^"burst";r=\d+;t=\d+$/)
      if (name === PEER) assert.ok(response.headers.get('ratelimit'), 'express-rate-limit sends RateLimit')
      await load(url(name), 1) // warm-up
    }
    const rounds = []
    for (let round = 0; round < ROUNDS; round++) {
      const results = {}
      for (const name of shuffled(END_TO_END_CASES)) {
        const before = await ask(child, 'cpu', 'cpu')
        const result = await load(url(name), SECONDS)
        const after = await ask(child, 'cpu', 'cpu')
        const requests = result.requests.total
        const cpuMicros = after.user + after.system - before.user - before.system
        results[name] = { rps: requests / (result.duration || SECONDS), p99: result.latency.p99, cpuPerRequest: cpuMicros / requests }
      }
      rounds.push(results)
      process.stderr.write(`round ${round + 1}/${ROUNDS}\r`)
    }
    console.log(`\n### End to end (Express 5 hello world, autocannon ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${SECONDS} s per case)\n`)
    console.log('| middleware | requests/s | p99 ms | server CPU µs/request | throughput lost vs none (paired, IQR) | extra CPU µs/request vs none (paired, IQR) | vs no-op middleware |')
    console.log('|---|---:|---:|---:|---:|---:|---:|')
    for (const name of END_TO_END_CASES) {
      const of = (field) => median(rounds.map((r) => r[name][field]))
      if (name === 'no limiter') {
        console.log(`| ${name} | ${of('rps').toFixed(0)} | ${of('p99').toFixed(1)} | ${of('cpuPerRequest').toFixed(1)} | | | |`)
        continue
      }
      const lost = rounds.map((r) => (1 - r[name].rps / r['no limiter'].rps) * 100)
      const extra = rounds.map((r) => r[name].cpuPerRequest - r['no limiter'].cpuPerRequest)
      const overNoop = rounds.map((r) => r[name].cpuPerRequest - r['no-op middleware'].cpuPerRequest)
      const vsNoop = name === 'no-op middleware' ? '' : `${median(overNoop).toFixed(2)} (${spread(overNoop, 2)})`
      console.log(
        `| ${name} | ${of('rps').toFixed(0)} | ${of('p99').toFixed(1)} | ${of('cpuPerRequest').toFixed(1)} | ${median(lost).toFixed(1)} % (${spread(lost, 1)}) | ${median(extra).toFixed(2)} (${spread(extra, 2)}) | ${vsNoop} |`,
      )
    }
    for (const base of ['no limiter', 'no-op middleware']) {
      const ratio = rounds.map((r) => (r[OURS].cpuPerRequest - r[base].cpuPerRequest) / (r[PEER].cpuPerRequest - r[base].cpuPerRequest))
      console.log(
        `\nOurs' extra server CPU per request ÷ express-rate-limit's, over "${base}", paired per round: median ${median(ratio).toFixed(2)} (IQR ${spread(ratio, 2)}, min–max ${Math.min(...ratio).toFixed(2)}–${Math.max(...ratio).toFixed(2)})`,
      )
    }
  } finally {
    child.send('exit')
  }
}

async function main() {
  console.log(`Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0].model}`)
  await micro()
  await endToEnd()
}

if (process.argv[2] === '--server') serverMain()
else
  main().catch((err) => {
    console.error(err)
    process.exitCode = 1
  })
