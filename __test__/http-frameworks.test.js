'use strict'
// quota-clock-source/koa, /hono and /nestjs: each adapter passes the behavioural cases the Express
// middleware and the Fastify plugin pass (helpers/http-cases.js), on real servers driven by fetch.

const { defineCases } = require('./helpers/http-cases.js')

for (const kind of ['Koa', 'Hono', 'NestJS (Express)', 'NestJS (Fastify)']) defineCases(kind)
