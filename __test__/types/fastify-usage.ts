// quota-clock-source/fastify as a strict TypeScript user writes it (compiled by __test__/http-fastify.test.js).
import Fastify from 'fastify'
import fastifyRateLimit = require('quota-clock-source/fastify')
import { KeyedQuotaClock, QuotaClock } from 'quota-clock-source'

export async function main(): Promise<void> {
  const app = Fastify()
  const perClient = new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' })
  const site = new QuotaClock({ capacity: 1000, refillPerSecond: 100, suspendPolicy: 'ignore' })
  await app.register(fastifyRateLimit, {
    limits: [
      { limiter: site, name: 'site' },
      { limiter: perClient, name: 'client', key: (request) => request.ip },
    ],
    skip: async (request) => request.url === '/health',
    onLimited: (request, reply, info) => {
      const wait: number = info.decision.retryAfterMs
      void reply.code(429).send({ wait, violated: info.violated })
    },
  })
  await app.register(fastifyRateLimit.default, { limiter: perClient, cost: async () => 2, name: 'second' })
  app.get('/health', { config: { rateLimit: false } }, async () => 'ok')
  app.get('/search', { config: { rateLimit: { cost: () => 5 } } }, async () => 'results')
  await app.listen({ port: 0 })
}
