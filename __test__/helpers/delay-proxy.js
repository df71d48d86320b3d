'use strict'

// A TCP proxy in front of a store, for the hostile fleet tests: every reply of the store reaches
// the client exactly `replyDelayMs` after it left the store (requests go through at once, and
// replies keep their order); it can stall (nothing goes either way until it resumes) and cut every
// connection (both ends closed at once; new connections are taken as before).
//
//   const proxy = await startDelayProxy({ host, port, replyDelayMs? })
//     -> { host, port, url (redis://), setDelay(ms), stall(), resume(), cut(), close() }

const net = require('node:net')

async function startDelayProxy({ host, port, replyDelayMs = 0 }) {
  let delayMs = replyDelayMs
  let stalled = false
  const pairs = new Set()

  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port })
    const pair = { client, upstream, toClient: [], toStore: [], lastDueMs: 0, timer: undefined }
    pairs.add(pair)
    const drop = () => {
      pairs.delete(pair)
      clearTimeout(pair.timer)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', drop)
    upstream.on('error', drop)
    client.on('close', drop)
    upstream.on('close', drop)
    client.on('data', (chunk) => {
      if (stalled) pair.toStore.push(chunk)
      else upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      // each reply due delayMs after it came, never before an earlier one
      const dueMs = Math.max(performance.now() + delayMs, pair.lastDueMs)
      pair.lastDueMs = dueMs
      pair.toClient.push({ chunk, dueMs })
      flush(pair)
    })
  })

  function flush(pair) {
    clearTimeout(pair.timer)
    pair.timer = undefined
    if (stalled) return
    const now = performance.now()
    while (pair.toClient.length > 0 && pair.toClient[0].dueMs <= now) pair.client.write(pair.toClient.shift().chunk)
    if (pair.toClient.length > 0) pair.timer = setTimeout(() => flush(pair), Math.max(0, pair.toClient[0].dueMs - now))
  }

  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const proxyPort = server.address().port
  return {
    host: '127.0.0.1',
    port: proxyPort,
    url: `redis://127.0.0.1:${proxyPort}`,
    setDelay(ms) {
      delayMs = ms
    },
    stall() {
      stalled = true
    },
    resume() {
      stalled = false
      for (const pair of pairs) {
        for (const chunk of pair.toStore.splice(0)) pair.upstream.write(chunk)
        flush(pair)
      }
    },
    cut() {
      for (const pair of pairs) {
        pair.client.destroy()
        pair.upstream.destroy()
      }
      pairs.clear()
    },
    close() {
      this.cut()
      return new Promise((resolve) => server.close(() => resolve()))
    },
  }
}

module.exports = { startDelayProxy }
