'use strict'
// a limiter never keeps itself alive (its clock, reader or handler may refer back to it),
// and a module instance that is dropped (a test runner loading the package per file) is collected
// whole, native side included.
const test = require('node:test')
const assert = require('node:assert/strict')
const { skipWithoutProbes } = require('./helpers/probes.js')
const { runScript } = require('./helpers/child.js')

const SETTLE = `
const settle = async (done) => {
  for (let round = 0; round < 200; round++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 5))
    if (done()) return true
  }
  return done()
}
`

test('limiters whose JS clock refers back to them (class Tenant { limiter = new QuotaClock({ clock: this }) }) are collected', { skip: skipWithoutProbes }, () => {
  const { result } = runScript(
    `${SETTLE}
    const { QuotaClock } = require(ROOT)
    const native = require(ROOT + '/binding.js')
    let t = 0
    class Tenant {
      constructor() { this.limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock: this }) }
      monotonicMs() { return t }
      wallMs() { return Date.UTC(2024, 0, 15) + t }
    }
    const refs = []
    const before = native.liveLimiters()
    for (let i = 0; i < 20000; i++) {
      const tenant = new Tenant()
      tenant.limiter.tryConsume()
      if (i % 100 === 0) refs.push(new WeakRef(tenant))
    }
    const peak = native.liveLimiters()
    settle(() => native.liveLimiters() === before && refs.every((r) => r.deref() === undefined)).then((collected) => {
      console.log(JSON.stringify({ before, peak, after: native.liveLimiters(), alive: refs.filter((r) => r.deref()).length, collected }))
    })`,
    { args: ['--expose-gc'] },
  )
  assert.ok(result.peak >= 10000, `many were alive before GC (${result.peak})`)
  assert.equal(result.alive, 0, 'every sampled tenant was collected')
  assert.equal(result.after, result.before, 'and every native slot was freed')
})

test('limiters whose elapsed-realtime reader, or JS clock and handler together, refer back to them are collected', { skip: skipWithoutProbes }, () => {
  const { result } = runScript(
    `${SETTLE}
    const { QuotaClock, systemClock } = require(ROOT)
    const native = require(ROOT + '/binding.js')
    const before = native.liveLimiters()
    const refs = []
    for (let i = 0; i < 5000; i++) {
      const holder = {}
      holder.limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock: systemClock({ elapsedRealtimeMs: () => (holder.limiter ? performance.now() : 0) }) })
      const clock = { monotonicMs: () => (clock.limiter ? 0 : 0), wallMs: () => Date.UTC(2024, 0, 15) }
      clock.limiter = new QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', clock, onAnomaly: () => clock.limiter.status() })
      holder.limiter.tryConsume()
      clock.limiter.tryConsume()
      if (i % 50 === 0) refs.push(new WeakRef(holder), new WeakRef(clock))
    }
    settle(() => native.liveLimiters() === before).then(() => {
      console.log(JSON.stringify({ before, after: native.liveLimiters(), alive: refs.filter((r) => r.deref()).length }))
    })`,
    { args: ['--expose-gc'] },
  )
  assert.equal(result.alive, 0)
  assert.equal(result.after, result.before)
})

for (const what of ['index.js only', 'every file of the package']) {
  test(`a module loaded again and dropped is collected whole, native registry included (cache cleared: ${what})`, { skip: skipWithoutProbes }, () => {
    const { result } = runScript(
      `${SETTLE}
      const path = require('node:path')
      const everyFile = ${JSON.stringify(what !== 'index.js only')}
      const native = require(ROOT + '/binding.js')
      const refs = []
      const children = module.children
      function loadOnce() {
        for (const key of Object.keys(require.cache)) {
          const ours = key.startsWith(ROOT + path.sep) && !key.includes('node_modules')
          if (ours && (everyFile || key === path.join(ROOT, 'index.js'))) delete require.cache[key]
        }
        // Node's own record of what this script required would keep every copy alive.
        children.length = 0
        const copy = require(ROOT)
        const limiter = new copy.QuotaClock({ capacity: 5, refillPerSecond: 1, suspendPolicy: 'ignore', onAnomaly() {} })
        limiter.tryConsume()
        refs.push(new WeakRef(copy))
        return copy
      }
      ;(async () => {
        for (let i = 0; i < 20; i++) loadOnce()
        await settle(() => false)
        const heapBefore = process.memoryUsage().heapUsed
        let last
        for (let i = 0; i < 200; i++) last = loadOnce()
        await settle(() => refs.slice(0, -1).every((r) => r.deref() === undefined))
        const heapAfter = process.memoryUsage().heapUsed
        console.log(JSON.stringify({
          alive: refs.slice(0, -1).filter((r) => r.deref()).length,
          aliveAt: refs.map((r, i) => (r.deref() ? i : -1)).filter((i) => i >= 0),
          registries: native.liveRegistries(),
          heapPerLoad: (heapAfter - heapBefore) / 200,
          lastWorks: last.manualClock() && new last.QuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore' }).tryConsume().allowed,
        }))
      })()`,
      { args: ['--expose-gc'] },
    )
    // Node itself may hold one copy (the first after a pause, as parent of a cached file): not one per load.
    assert.ok(result.alive <= 2, `the earlier copies of the module were collected (alive: ${result.aliveAt} of 220)`)
    assert.ok(result.registries <= result.alive + 3, `only the live copies' registries remain (${result.registries})`)
    assert.ok(result.heapPerLoad < 20_000, `the heap does not grow by a module copy per load (${result.heapPerLoad} B per load)`)
    assert.equal(result.lastWorks, true)
  })
}
