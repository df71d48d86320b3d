// quota-clock-source/fastify imported as an ES module (compiled by __test__/fastify.test.js).
import Fastify from 'fastify'
import fastifyRateLimit from 'quota-clock-source/fastify'
import { KeyedQuotaClock } from 'quota-clock-source'

const app = Fastify()
await app.register(fastifyRateLimit, { limiter: new KeyedQuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore' }) })
app.get('/', { config: { rateLimit: { name: 'root' } } }, async () => 'hello')
