'use strict'
// A child process of benchmark/fleet-scale.js: one instance of a service limiting per client
// address with a fleet bucket (`share.bucket`) on its own ioredis connection. Messages:
//   { op: 'hold', from, count }   consumes once on each of `count` keys (`ip:<from + i>`), 500 at a
//                                 time -> { op: 'held', ms }
//   { op: 'traffic', perSecond }  then consumes on keys drawn at random from those held, at that
//                                 rate, until 'stop' -> (nothing)
//   { op: 'stop' }                -> { op: 'stopped', calls, admitted, errors, stats }
// Every reply goes to the parent with process.send.

const Redis = require('ioredis')
const { KeyedQuotaClock } = require('..')
const { redisStore } = require('../lib/shared.js')

const config = JSON.parse(process.argv[2])
const client = new Redis(config.url, { maxRetriesPerRequest: null })
const limiter = new KeyedQuotaClock({
  capacity: 100,
  refillPerSecond: 100 / 900, // the docs' recipe: 100 requests per 15 minutes per address
  suspendPolicy: 'ignore',
  maxKeys: config.maxKeys,
  share: { store: redisStore(client, { prefix: 'scale:' }), name: config.name, bucket: true, leaseMs: config.leaseMs, timeoutMs: 10_000 },
})
let held = { from: 0, count: 0 }
let timer
const counts = { calls: 0, admitted: 0, errors: 0 }

function consume(key) {
  counts.calls++
  return limiter.consume(key).then(
    (decision) => {
      if (decision.allowed) counts.admitted++
    },
    () => counts.errors++,
  )
}

process.on('message', async (message) => {
  if (message.op === 'hold') {
    const started = performance.now()
    held = { from: message.from, count: message.count }
    for (let i = 0; i < message.count; i += 500) {
      const batch = []
      for (let j = i; j < Math.min(i + 500, message.count); j++) batch.push(consume(`ip:${message.from + j}`))
      await Promise.all(batch)
    }
    process.send({ op: 'held', ms: performance.now() - started })
  } else if (message.op === 'traffic') {
    Object.assign(counts, { calls: 0, admitted: 0, errors: 0 })
    const every = 1000 / message.perSecond
    let next = performance.now()
    const tick = () => {
      const now = performance.now()
      while (next <= now) {
        consume(`ip:${held.from + Math.floor(Math.random() * held.count)}`)
        next += every
      }
      timer = setTimeout(tick, Math.max(1, next - performance.now()))
    }
    tick()
  } else if (message.op === 'stop') {
    clearTimeout(timer)
    process.send({ op: 'stopped', ...counts, stats: limiter.stats().store })
    client.disconnect()
    process.exit(0)
  }
})
process.send({ op: 'ready' })
