// Must NOT compile: a route's config.rateLimit takes rateLimit's options only (checked by __test__/http-fastify.test.js).
// (Fastify infers a route shorthand's config type from the argument, so the check bites where the
// config is typed as FastifyContextConfig.)
import type { FastifyContextConfig } from 'fastify'
import type {} from 'quota-clock-source/fastify'

export const config: FastifyContextConfig = { rateLimit: { keyGenerator: () => 'k' } }
