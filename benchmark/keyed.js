'use strict'
// `npm run bench:keyed`: many keys in one limiter (SPEC §10). For N = 10k and 1M keys, uniform and
// zipf access: ns per check of KeyedQuotaClock against a Map of QuotaClocks, a naive JS
// Map<{ tokens, last }> bucket, rate-limiter-flexible's RateLimiterMemory and express-rate-limit's
// MemoryStore (medians over interleaved repetitions; ratios paired within a repetition); RSS bytes
// per key, each structure in a fresh child process; the time to create 1M keys; snapshot() and
// restore of 1M keys; and what reading the key string costs at the boundary. Every case's answer is
// asserted before it is timed. BENCH_QUICK=1 runs a smaller, faster version.
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const { KeyedQuotaClock, QuotaClock } = require('..')

const QUICK = process.env.BENCH_QUICK === '1'
const SIZES = QUICK ? [10_000, 100_000] : [10_000, 1_000_000]
const REPETITIONS = Number(process.env.BENCH_REPETITIONS || (QUICK ? 3 : 5))
const CHECKS = Number(process.env.BENCH_CHECKS || 200_000)
const ASYNC_CHECKS = Math.floor(CHECKS / 4)
const CAPACITY = 1e9 // every check is allowed, in every limiter: the same work everywhere
const RATE = 1e9
const HOUR_MS = 3_600_000

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const keyName = (i) => `tenant-${i}`
// Flat strings, as a server meets them (a template of 13 characters or more is a rope that V8
// flattens, and allocates for, the first time it is read: neither structure should pay for it).
const flat = (keys) => JSON.parse(JSON.stringify(keys))

// ---------------------------------------------------------------------------------------------
// The structures, each behind `check(key) → allowed` (sync) or a promise of it (async).

function keyedStructure() {
  // Buckets this fast are idle right after each check; a maxKeys far above N keeps the idle sweep
  // (which starts at half of maxKeys) from dropping them, so every structure holds all N keys.
  const limiter = new KeyedQuotaClock({ capacity: CAPACITY, refillPerSecond: RATE, suspendPolicy: 'ignore', maxKeys: 4_000_000 })
  return { limiter, check: (key) => limiter.tryConsume(key).allowed }
}

function quotaClockMapStructure() {
  const map = new Map()
  const options = { capacity: CAPACITY, refillPerSecond: RATE, suspendPolicy: 'ignore' }
  return {
    check(key) {
      let limiter = map.get(key)
      if (limiter === undefined) {
        limiter = new QuotaClock(options)
        map.set(key, limiter)
      }
      return limiter.tryConsume().allowed
    },
  }
}

function naiveMapStructure() {
  const map = new Map()
  return {
    check(key) {
      const now = Date.now()
      let state = map.get(key)
      if (state === undefined) {
        state = { tokens: CAPACITY, last: now }
        map.set(key, state)
      }
      state.tokens = Math.min(CAPACITY, state.tokens + ((now - state.last) * RATE) / 1000)
      state.last = now
      if (state.tokens < 1) return false
      state.tokens -= 1
      return true
    },
  }
}

function rateLimiterFlexibleStructure() {
  const { RateLimiterMemory } = require('rate-limiter-flexible')
  const limiter = new RateLimiterMemory({ points: CAPACITY, duration: HOUR_MS / 1000 })
  return { async: true, check: (key) => limiter.consume(key).then(() => true, () => false) }
}

function expressRateLimitStructure() {
  const { MemoryStore } = require('express-rate-limit')
  const store = new MemoryStore()
  store.init({ windowMs: HOUR_MS })
  return { async: true, check: (key) => store.increment(key).then(({ totalHits }) => totalHits <= CAPACITY), close: () => store.shutdown() }
}

const STRUCTURES = {
  KeyedQuotaClock: keyedStructure,
  'Map<QuotaClock>': quotaClockMapStructure,
  'naive JS Map<{tokens,last}>': naiveMapStructure,
  'rate-limiter-flexible 11 Memory': rateLimiterFlexibleStructure,
  'express-rate-limit 8 MemoryStore': expressRateLimitStructure,
}

async function populate(structure, n) {
  const start = process.hrtime.bigint()
  if (structure.async) for (let i = 0; i < n; i++) await structure.check(keyName(i))
  else for (let i = 0; i < n; i++) structure.check(keyName(i))
  return Number(process.hrtime.bigint() - start) / 1e6
}

// ---------------------------------------------------------------------------------------------
// A fresh child process per structure for memory: RSS after holding N keys, minus RSS before.

if (process.argv[2] === '--rss') {
  const [, , , name, n] = process.argv
  // Full collections, with pauses for V8's concurrent sweeper to give pages back.
  const settle = async () => {
    for (let i = 0; i < 4; i++) {
      global.gc()
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  ;(async () => {
    const structure = STRUCTURES[name]()
    await settle()
    const before = process.memoryUsage().rss
    // Keys are made as they come (a JS Map holds its key strings: they are part of its cost).
    if (structure.async) for (let i = 0; i < Number(n); i++) await structure.check(keyName(i))
    else for (let i = 0; i < Number(n); i++) structure.check(keyName(i))
    await settle()
    const after = process.memoryUsage().rss
    if (structure.limiter) assert.equal(structure.limiter.size, Number(n))
    process.stdout.write(JSON.stringify({ bytesPerKey: (after - before) / Number(n) }))
    structure.close?.()
  })()
  return
}

/** The median of three fresh processes (a process's RSS moves with what V8 keeps committed). */
function rssPerKey(name, n) {
  const runs = []
  for (let i = 0; i < 3; i++) {
    const out = execFileSync(process.execPath, ['--expose-gc', '--max-semi-space-size=1', __filename, '--rss', name, String(n)], { encoding: 'utf8', maxBuffer: 1 << 20 })
    runs.push(JSON.parse(out).bytesPerKey)
  }
  return median(runs)
}

// ---------------------------------------------------------------------------------------------
// Access sequences: uniform, and zipf (s = 1) over the N keys, the same for every structure.

function sequence(n, kind, length, seed = 12345) {
  let state = seed
  const random = () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648
    return state / 2_147_483_648
  }
  const indices = new Uint32Array(length)
  if (kind === 'uniform') {
    for (let i = 0; i < length; i++) indices[i] = Math.floor(random() * n)
  } else {
    const cdf = new Float64Array(n)
    let sum = 0
    for (let i = 0; i < n; i++) cdf[i] = sum += 1 / (i + 1)
    for (let i = 0; i < length; i++) {
      const target = random() * sum
      let lo = 0
      let hi = n - 1
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (cdf[mid] < target) lo = mid + 1
        else hi = mid
      }
      // Rank r is a random key, so hot keys are spread over the table as in life.
      indices[i] = (lo * 2_654_435_761) % n
    }
  }
  return flat(Array.from(indices, keyName))
}

const SYNC_LOOP = `
  let allowed = 0
  const start = process.hrtime.bigint()
  for (let i = 0; i < keys.length; i++) if (check(keys[i])) allowed++
  const ns = Number(process.hrtime.bigint() - start) / keys.length
  if (allowed !== keys.length) throw new Error('a check was denied')
  return ns`

async function timeChecks(structure, keys) {
  if (!structure.async) {
    // A loop of its own per structure, so each call site stays monomorphic.
    structure.loop ??= new Function('process', 'check', 'keys', SYNC_LOOP)
    return structure.loop(process, structure.check, keys)
  }
  const subset = keys.slice(0, ASYNC_CHECKS)
  let allowed = 0
  const start = process.hrtime.bigint()
  for (const key of subset) if (await structure.check(key)) allowed++
  const ns = Number(process.hrtime.bigint() - start) / subset.length
  assert.equal(allowed, subset.length)
  return ns
}

// ---------------------------------------------------------------------------------------------

function keyReadRows() {
  const native = require('../binding.js')
  const probes = { 'raw function, napi_get_value_string_utf16 (chosen)': native.keyProbe('utf16'), 'raw function, napi_get_value_string_latin1 (lossy)': native.keyProbe('latin1'), 'raw function, napi_get_value_string_utf8 (lossy for lone surrogates)': native.keyProbe('utf8'), '#[napi] fn taking a String': native.keyProbeString }
  const keys = Array.from({ length: 1024 }, (_, i) => keyName(i * 7919))
  const samples = {}
  for (let rep = 0; rep < 5; rep++) {
    for (const [name, probe] of Object.entries(probes)) {
      const start = process.hrtime.bigint()
      for (let i = 0; i < 1_000_000; i++) probe(keys[i & 1023])
      ;(samples[name] ??= []).push(Number(process.hrtime.bigint() - start) / 1e6)
    }
  }
  return Object.entries(samples).map(([name, values]) => [name, median(values)])
}

async function main() {
  const started = Date.now()
  const results = {}
  const extras = {}
  for (const n of SIZES) {
    const structures = {}
    for (const [name, make] of Object.entries(STRUCTURES)) {
      structures[name] = make()
      const ms = await populate(structures[name], n)
      if (name === 'KeyedQuotaClock') {
        assert.equal(structures[name].limiter.size, n)
        extras[`create ${n.toLocaleString('en')} keys, KeyedQuotaClock`] = ms
      }
      if (name === 'Map<QuotaClock>') extras[`create ${n.toLocaleString('en')} keys, Map<QuotaClock>`] = ms
    }
    for (const access of ['uniform', 'zipf']) {
      const keys = sequence(n, access, CHECKS)
      const samples = Object.fromEntries(Object.keys(structures).map((name) => [name, []]))
      for (const structure of Object.values(structures)) await timeChecks(structure, keys.slice(0, 10_000)) // warm-up
      for (let rep = 0; rep < REPETITIONS; rep++) {
        for (const [name, structure] of Object.entries(structures)) samples[name].push(await timeChecks(structure, keys))
      }
      results[`${n}/${access}`] = samples
    }
    if (n === SIZES[SIZES.length - 1]) {
      const { limiter } = structures.KeyedQuotaClock
      // Idle keys (these buckets refill at once) may have been dropped and held again meanwhile.
      const held = limiter.size
      assert.ok(held <= n && held > n * 0.99, `held ${held}`)
      let start = process.hrtime.bigint()
      const image = limiter.snapshot()
      extras[`snapshot() of ${n.toLocaleString('en')} keys`] = Number(process.hrtime.bigint() - start) / 1e6
      start = process.hrtime.bigint()
      const restored = new KeyedQuotaClock({ capacity: CAPACITY, refillPerSecond: RATE, suspendPolicy: 'ignore', maxKeys: 4_000_000, restore: image })
      extras[`restore of ${n.toLocaleString('en')} keys`] = Number(process.hrtime.bigint() - start) / 1e6
      assert.equal(restored.size, held)
      extras[`snapshot size, bytes per key`] = image.length / held
    }
    for (const structure of Object.values(structures)) structure.close?.()
  }

  const memory = {}
  for (const n of SIZES) for (const name of Object.keys(STRUCTURES)) memory[`${n}/${name}`] = rssPerKey(name, n)

  const names = Object.keys(STRUCTURES)
  console.log(`\nns per check (median of ${REPETITIONS}; ${CHECKS.toLocaleString('en')} checks, ${ASYNC_CHECKS.toLocaleString('en')} for the async peers, awaited), RSS bytes per key (fresh child process)\n`)
  console.log(`| N keys, access | ${names.join(' | ')} |`)
  console.log(`|---|${names.map(() => '---:').join('|')}|`)
  for (const [label, samples] of Object.entries(results)) {
    const [n, access] = label.split('/')
    console.log(`| ${Number(n).toLocaleString('en')}, ${access} | ${names.map((name) => median(samples[name]).toFixed(0)).join(' | ')} |`)
  }
  for (const n of SIZES) console.log(`| ${n.toLocaleString('en')}: RSS B/key | ${names.map((name) => memory[`${n}/${name}`].toFixed(0)).join(' | ')} |`)

  const paired = (label, a, b) => median(results[label][a].map((value, i) => value / results[label][b][i]))
  console.log('\nTargets (paired ratios: the two structures timed within the same repetition)\n')
  console.log('| target | measured | holds |')
  console.log('|---|---:|---|')
  const big = SIZES[SIZES.length - 1]
  const rows = []
  for (const access of ['uniform', 'zipf']) {
    rows.push([`${big.toLocaleString('en')} keys, ${access}: check ≤ 0.5 × naive JS Map`, paired(`${big}/${access}`, 'KeyedQuotaClock', 'naive JS Map<{tokens,last}>'), (x) => x <= 0.5, '×'])
    rows.push([`${big.toLocaleString('en')} keys, ${access}: ≥ 5 × faster than rate-limiter-flexible`, 1 / paired(`${big}/${access}`, 'KeyedQuotaClock', 'rate-limiter-flexible 11 Memory'), (x) => x >= 5, '×'])
    rows.push([`10,000 keys, ${access}: check ≤ 1.2 × naive JS Map`, paired(`10000/${access}`, 'KeyedQuotaClock', 'naive JS Map<{tokens,last}>'), (x) => x <= 1.2, '×'])
  }
  rows.push([`${big.toLocaleString('en')} keys: ≤ 100 B RSS per key`, memory[`${big}/KeyedQuotaClock`], (x) => x <= 100, ' B'])
  rows.push([`create ${big.toLocaleString('en')} keys < 1 s`, extras[`create ${big.toLocaleString('en')} keys, KeyedQuotaClock`], (x) => x < 1000, ' ms'])
  rows.push([`snapshot() of ${big.toLocaleString('en')} keys < 0.5 s`, extras[`snapshot() of ${big.toLocaleString('en')} keys`], (x) => x < 500, ' ms'])
  rows.push([`restore of ${big.toLocaleString('en')} keys < 1 s`, extras[`restore of ${big.toLocaleString('en')} keys`], (x) => x < 1000, ' ms'])
  for (const [target, value, holds, unit] of rows) console.log(`| ${target} | ${value.toFixed(2)}${unit} | ${holds(value) ? 'yes' : '**no**'} |`)

  console.log('\nOther measurements\n')
  for (const [name, value] of Object.entries(extras)) console.log(`- ${name}: ${value.toFixed(1)}`)
  console.log('\nReading the key at the boundary (ns per call of a one-argument raw function that only reads it)\n')
  for (const [name, ns] of keyReadRows()) console.log(`- ${name}: ${ns.toFixed(1)} ns`)
  console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s)`)
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
