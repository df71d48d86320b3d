'use strict'
// Another client of a redis-server, in a process of its own: it sends PING after PING (5 ms apart)
// and times each, so that what it measures is how long Redis kept it waiting, not how busy the
// test's own event loop was. Run as a child with the server's URL:
//   const pinger = await startPinger(url)   // pinging once it resolves
//   const pings = await pinger.stop()       // [[startedMs, tookMs], ...], startedMs on nowMs()'s clock
// nowMs(): process.hrtime.bigint() in ms, one clock for every process of the host.

const { fork } = require('node:child_process')

const nowMs = () => Number(process.hrtime.bigint()) / 1e6

function startPinger(url) {
  const child = fork(__filename, [url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`the pinger exited (${code}) before it was ready`)))
    child.once('message', () => {
      child.removeAllListeners('exit')
      resolve({
        stop: () =>
          new Promise((done) => {
            child.once('message', (message) => done(message.pings))
            child.send('stop')
          }),
      })
    })
  })
}

async function ping(url) {
  const Redis = require('ioredis')
  const client = new Redis(url)
  await client.ping()
  const pings = []
  let stopping = false
  process.on('message', () => (stopping = true))
  process.send('ready')
  while (!stopping) {
    const started = nowMs()
    await client.ping()
    pings.push([started, nowMs() - started])
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  process.send({ pings }, () => {
    client.disconnect()
    process.disconnect()
  })
}

if (require.main === module) {
  ping(process.argv[2]).catch((error) => {
    console.error(error)
    process.exit(1)
  })
}

module.exports = { startPinger, nowMs }
