'use strict'
// The README quick start's startup line is a URL a user can open on IPv6 too: listening on '::1' or
// '::' it prints http://[::1]:PORT / http://[::]:PORT (brackets, RFC 3986), not http://:::3000.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')

function quickStartCode() {
  const lines = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8').split('\n')
  const at = lines.findIndex((line) => line.trim() === '## Quick start')
  const open = lines.findIndex((line, i) => i > at && line.trim() === '```js')
  const close = lines.findIndex((line, i) => i > open && line.trim() === '```')
  assert.ok(at !== -1 && open > at && close > open, 'README.md has a ```js block under "## Quick start"')
  return lines.slice(open + 1, close).join('\n')
}

describe('README quick start on IPv6', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-quick-start-v6-'))
  const children = []
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(ROOT, path.join(dir, 'node_modules', 'quota-clock-source'), 'dir')
  fs.symlinkSync(path.join(ROOT, 'node_modules', 'express'), path.join(dir, 'node_modules', 'express'), 'dir')
  fs.writeFileSync(path.join(dir, 'server.js'), quickStartCode())
  after(() => {
    for (const child of children) child.kill()
    fs.rmSync(dir, { recursive: true, force: true })
  })

  function startOn(host) {
    const child = spawn(process.execPath, ['server.js'], { cwd: dir, env: { ...process.env, PORT: '0', HOST: host }, stdio: ['ignore', 'pipe', 'pipe'] })
    children.push(child)
    let output = ''
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no startup line within 10 s:\n${output}`)), 10_000)
      const onData = (chunk) => {
        output += chunk
        const match = /listening on (\S+)/.exec(output)
        if (match) {
          clearTimeout(timer)
          resolve(match[1])
        }
      }
      child.stdout.on('data', onData)
      child.stderr.on('data', onData)
      child.once('exit', (code) => reject(new Error(`the quick start exited (code ${code}):\n${output}`)))
    })
  }

  it("on '::1' it prints http://[::1]:PORT, and that URL answers", async () => {
    const url = await startOn('::1')
    assert.match(url, /^http:\/\/\[::1\]:\d+$/)
    const response = await fetch(`${url}/`, { headers: { 'X-Tenant': 'acme' } })
    assert.equal(response.status, 200)
  })

  it("on '::' it prints http://[::]:PORT", async () => {
    const url = await startOn('::')
    assert.match(url, /^http:\/\/\[::\]:\d+$/)
    const port = new URL(url).port
    assert.equal((await fetch(`http://[::1]:${port}/`, { headers: { 'X-Tenant': 'acme' } })).status, 200)
  })
})
