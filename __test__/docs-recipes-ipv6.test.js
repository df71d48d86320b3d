'use strict'
// Every server recipe of the README and docs/ (a block marked `until "listening on"`) keys clients
// by clientKey (or the default key): six requests from six IPv6 addresses of one /56, each in a /64
// of its own, take from one client's limit, never from six (the bypass express-rate-limit 8 fixed:
// a recipe keyed by `req.ip` gives every /64 a fresh bucket). Each recipe runs as written in a child
// process, with its Redis and MongoDB servers, and a preload that sets each request's address.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { startRedisServer } = require('./helpers/redis-server.js')
const { startMongoServer } = require('./helpers/mongo-server.js')

const ROOT = path.resolve(__dirname, '..')
const DOCS = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`)]
// Six addresses in 2001:db8:7a00:1200::/56, each in a /64 of its own.
const ADDRESSES = ['1200', '1201', '1233', '1280', '12ab', '12ff'].map((group, i) => `2001:db8:7a00:${group}::${i + 1}`)

/** The ```js blocks that start a server (`<!-- doc-test: until "listening on" -->`), with where they are. */
function serverRecipes() {
  const found = []
  for (const doc of DOCS) {
    const lines = fs.readFileSync(path.join(ROOT, doc), 'utf8').split('\n')
    for (let i = 0; i < lines.length; i++) {
      if (!/^<!--\s*doc-test:\s*until "listening on"\s*-->$/.test(lines[i].trim())) continue
      const open = lines.findIndex((line, j) => j > i && /^```js\s*$/.test(line))
      const close = lines.findIndex((line, j) => j > open && /^```\s*$/.test(line))
      found.push({ name: `${doc}:${open + 1}`, code: lines.slice(open + 1, close).join('\n') })
    }
  }
  return found
}

/** The first item of a RateLimit header: its name and r. */
function firstItem(header) {
  const match = /^"([^"]*)";r=(\d+)/.exec(header ?? '')
  assert.ok(match, `a RateLimit header with an item: ${header}`)
  return { name: match[1], r: Number(match[2]) }
}

describe('every docs server recipe keys IPv6 clients by their /56', () => {
  const recipes = serverRecipes()
  let project
  let redis
  let mongo
  const children = []
  before(async () => {
    ;[redis, mongo] = await Promise.all([startRedisServer(), startMongoServer()])
    project = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-recipes-'))
    fs.mkdirSync(path.join(project, 'node_modules'))
    for (const entry of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
      if (!entry.startsWith('.')) fs.symlinkSync(path.join(ROOT, 'node_modules', entry), path.join(project, 'node_modules', entry), 'dir')
    }
    fs.symlinkSync(ROOT, path.join(project, 'node_modules', 'quota-clock-source'), 'dir')
  })
  after(async () => {
    for (const child of children) child.kill('SIGKILL')
    await Promise.allSettled([redis?.stop(), mongo?.stop()])
    if (project) fs.rmSync(project, { recursive: true, force: true })
  })

  /** Runs `code` until it prints its listening line; resolves to its port. */
  function startRecipe(name, code) {
    const file = path.join(project, `${name.replace(/[/.:]/g, '-')}.cjs`)
    fs.writeFileSync(file, code)
    const env = { ...process.env, PORT: '0', HOST: '127.0.0.1', REDIS_URL: redis.url, MONGODB_URI: mongo.uri }
    delete env.NODE_OPTIONS
    delete env.NODE_TEST_CONTEXT
    const child = spawn(process.execPath, ['--require', path.join(__dirname, 'helpers', 'remote-address.js'), file], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] })
    children.push(child)
    let output = ''
    return new Promise((resolve, reject) => {
      const onData = (chunk) => {
        output += chunk
        const line = /listening on (.*)/.exec(output)
        if (line) resolve(Number(/(\d+)\D*$/.exec(line[1])[1]))
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
      child.once('exit', (code) => reject(new Error(`${name} exited (code ${code}) before listening:\n${output}`)))
    })
  }

  it('finds the recipes (the README quick start, the Fastify, Koa, Hono and NestJS pages, the fleet recipe, ...)', () => {
    const names = recipes.map((recipe) => recipe.name)
    for (const doc of ['README.md', 'docs/koa.md', 'docs/hono.md', 'docs/nestjs.md', 'docs/several-instances.md', 'docs/throttle.md']) {
      assert.ok(names.some((name) => name.startsWith(`${doc}:`)), `${doc} has a server recipe`)
    }
  })

  for (const recipe of recipes) {
    it(`${recipe.name}: six addresses of one /56 take from one client's limit`, async () => {
      const port = await startRecipe(recipe.name, recipe.code)
      const seen = []
      for (const address of ADDRESSES) {
        const response = await fetch(`http://127.0.0.1:${port}/`, { headers: { 'X-Test-Remote-Address': address, 'X-Tenant': 'acme' } })
        await response.arrayBuffer()
        assert.equal(response.status, 200, `${address}: ${response.status}`)
        seen.push(firstItem(response.headers.get('ratelimit')))
      }
      assert.ok(seen.every((item) => item.name === seen[0].name))
      assert.ok(seen[seen.length - 1].r < seen[0].r, `one limit for the /56: r went ${seen.map((item) => item.r).join(', ')}`)
    })
  }

  it('the check itself fails on a recipe keyed by req.ip', async () => {
    const keyedByIp = `const express = require('express')
const { KeyedQuotaClock } = require('quota-clock-source')
const { rateLimit } = require('quota-clock-source/http')
const app = express()
app.use(rateLimit({ key: (req) => req.ip, limiter: new KeyedQuotaClock({ capacity: 20, refillPerSecond: 5, suspendPolicy: 'ignore' }) }))
app.get('/', (req, res) => res.send('hello'))
const server = app.listen(0, '127.0.0.1', () => console.log('listening on ' + server.address().port))`
    const port = await startRecipe('keyed-by-req-ip', keyedByIp)
    const rs = []
    for (const address of ADDRESSES) {
      const response = await fetch(`http://127.0.0.1:${port}/`, { headers: { 'X-Test-Remote-Address': address } })
      await response.arrayBuffer()
      rs.push(firstItem(response.headers.get('ratelimit')).r)
    }
    assert.deepEqual(rs, [19, 19, 19, 19, 19, 19], 'each /64 its own bucket')
  })
})
