'use strict'
// The README's quick start runs as written: this test takes the exact code block under
// "## Quick start" from README.md, runs it as a program (with 'quota-clock-source' and 'express'
// resolving to this package and its Express), waits for it to listen, and drives it with fetch.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseList } = require('structured-headers')

const ROOT = path.resolve(__dirname, '..')

/** The first ```js block after the line `heading`. */
function codeBlockAfter(markdown, heading) {
  const lines = markdown.split('\n')
  const at = lines.findIndex((line) => line.trim() === heading)
  assert.notEqual(at, -1, `README.md has no "${heading}" heading`)
  const open = lines.findIndex((line, i) => i > at && line.trim() === '```js')
  const close = lines.findIndex((line, i) => i > open && line.trim() === '```')
  assert.ok(open > at && close > open, `no \`\`\`js block under "${heading}"`)
  const next = lines.findIndex((line, i) => i > at && /^## /.test(line))
  assert.ok(next === -1 || open < next, `the first code block under "${heading}" is in another section`)
  return lines.slice(open + 1, close).join('\n')
}

function ratelimitItems(response, header) {
  return Object.fromEntries(parseList(response.headers.get(header)).map(([name, params]) => [name, Object.fromEntries(params)]))
}

describe('README quick start', () => {
  let child
  let dir
  let base
  let output = ''

  before(async () => {
    const code = codeBlockAfter(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), '## Quick start')
    assert.match(code, /require\('quota-clock-source\/http'\)/, 'the quick start uses quota-clock-source/http')
    assert.match(code, /\.listen\(/, 'the quick start starts a server')
    // A project of its own, where the two packages are installed (as links to this checkout).
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-quick-start-'))
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'quota-clock-source'), 'dir')
    fs.symlinkSync(path.join(ROOT, 'node_modules', 'express'), path.join(dir, 'node_modules', 'express'), 'dir')
    fs.writeFileSync(path.join(dir, 'server.js'), code)
    child = spawn(process.execPath, ['server.js'], { cwd: dir, env: { ...process.env, PORT: '0', HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] })
    base = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the quick start did not say where it listens within 10 s:\n${output}`)), 10_000)
      const onData = (chunk) => {
        output += chunk
        const match = /listening on (http:\/\/\S+)/.exec(output)
        if (match) {
          clearTimeout(timer)
          resolve(match[1].replace(/\/$/, ''))
        }
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
      child.once('exit', (code) => reject(new Error(`the quick start exited (code ${code}):\n${output}`)))
    })
  })

  after(() => {
    child?.kill()
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  })

  it('listens on 127.0.0.1 and turns away an unknown tenant before any limiter', async () => {
    assert.match(base, /^http:\/\/127\.0\.0\.1:\d+$/)
    const response = await fetch(`${base}/`)
    assert.equal(response.status, 401)
    assert.equal(response.headers.get('ratelimit'), null)
  })

  it('a request carries a per-client burst and the tenant\'s monthly quota in the RateLimit headers', async () => {
    const response = await fetch(`${base}/`, { headers: { 'X-Tenant': 'acme' } })
    assert.equal(response.status, 200)
    assert.deepEqual(await response.json(), { hello: 'acme' })
    const policy = ratelimitItems(response, 'ratelimit-policy')
    assert.deepEqual(policy['client-burst'], { q: 20, w: 4 })
    assert.equal(policy['tenant-month'].q, 100_000)
    const now = ratelimitItems(response, 'ratelimit')
    assert.equal(now['client-burst'].r, 19)
    assert.equal(now['tenant-month'].r, 99_999)
    assert.ok(now['tenant-month'].t > 0 && now['tenant-month'].t <= 31 * 86_400)
  })

  it('a burst past the client limit is a 429 problem, and the tenant quota gets its units back', async () => {
    let last
    let served = 0
    // 200 tries: the bucket refills 5/s, so even at ~150 ms a request the burst runs out.
    for (let i = 0; i < 200; i++) {
      last = await fetch(`${base}/`, { headers: { 'X-Tenant': 'globex' } })
      if (last.status === 429) break
      assert.equal(last.status, 200)
      served++
      await last.arrayBuffer()
    }
    assert.equal(last.status, 429, 'the burst of 20 ran out')
    assert.equal(last.headers.get('content-type'), 'application/problem+json')
    const body = await last.json()
    assert.deepEqual(body['violated-policies'], ['client-burst'])
    assert.ok(Number(last.headers.get('retry-after')) >= 1)
    // One client address, so one bucket across tenants; globex's month counts exactly the requests
    // it was served: the denied one was refunded.
    assert.equal(ratelimitItems(last, 'ratelimit')['tenant-month'].r, 100_000 - served)
  })
})
