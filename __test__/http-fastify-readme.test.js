'use strict'
// The README's Fastify section runs as written: its code block, run as a program with
// 'quota-clock-source', 'fastify' and 'fastify-plugin' resolving to this package and its
// dependencies, listens, limits '/', leaves '/health' alone and charges '/search' 5 tokens.

const { describe, it, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const HEADING = '## Fastify: `quota-clock-source/fastify`'

function codeBlockUnder(heading) {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n')
  const at = lines.findIndex((line) => line.trim() === heading)
  const open = lines.findIndex((line, i) => i > at && line.trim() === '```js')
  const close = lines.findIndex((line, i) => i > open && line.trim() === '```')
  const next = lines.findIndex((line, i) => i > at && /^## /.test(line))
  assert.ok(at !== -1 && open > at && close > open && (next === -1 || open < next), `README.md has a \`\`\`js block under "${heading}"`)
  return lines.slice(open + 1, close).join('\n')
}

describe('README Fastify section', () => {
  let child
  let dir
  let base
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-fastify-readme-'))
    fs.mkdirSync(path.join(dir, 'node_modules'))
    fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'quota-clock-source'), 'dir')
    for (const name of ['fastify', 'fastify-plugin']) fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(dir, 'node_modules', name), 'dir')
    fs.writeFileSync(path.join(dir, 'server.js'), codeBlockUnder(HEADING))
    child = spawn(process.execPath, ['server.js'], { cwd: dir, env: { ...process.env, PORT: '0', HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    base = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no startup line within 10 s:\n${output}`)), 10_000)
      const onData = (chunk) => {
        output += chunk
        const match = /listening on (http:\/\/\S+)/.exec(output)
        if (match) {
          clearTimeout(timer)
          resolve(match[1])
        }
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
      child.once('exit', (code) => reject(new Error(`the example exited (code ${code}):\n${output}`)))
    })
  })
  after(() => {
    child?.kill()
    if (dir) fs.rmSync(dir, { recursive: true, force: true })
  })

  it("limits '/', leaves '/health' alone, charges '/search' five tokens", async () => {
    const first = await fetch(`${base}/`)
    assert.equal(first.status, 200)
    assert.equal(first.headers.get('ratelimit-policy'), '"burst";q=20;w=4')
    const health = await fetch(`${base}/health`)
    assert.equal(health.status, 200)
    assert.equal(health.headers.get('ratelimit'), null)
    const search = await fetch(`${base}/search`)
    assert.match(search.headers.get('ratelimit'), /^"burst";r=1[45];t=\d+$/)
    let last
    for (let i = 0; i < 10; i++) {
      last = await fetch(`${base}/search`)
      if (last.status === 429) break
      await last.arrayBuffer()
    }
    assert.equal(last.status, 429)
    assert.equal(last.headers.get('content-type'), 'application/problem+json')
    assert.deepEqual((await last.json())['violated-policies'], ['burst'])
  })
})
