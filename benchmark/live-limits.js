'use strict'
// What limits that change while running cost a held key's tryConsume (docs/keyed.md, "Changing a
// plan"): this build without policyTtlMs, this build with it (never due in the run, so every call
// checks it), and a build before them without it, side by side. Each case runs in a child process
// of its own (warm-up, then 1,000,000 calls round robin over 1,000 held keys, the answer asserted
// first); 15 repetitions in a shuffled order, medians, and each ratio as the median of the
// repetitions' own ratios.
//
//   node benchmark/live-limits.js <root of the build before>    # e.g. an export of main, built
//
// `node benchmark/live-limits.js --run <root> <case>` is what each measured process runs.
const assert = require('node:assert/strict')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const CALLS = 1_000_000
const REPETITIONS = 15
const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`)

function measure(root, name) {
  const { KeyedQuotaClock } = require(root)
  const options = { capacity: 1e12, refillPerSecond: 1e12, suspendPolicy: 'ignore', maxKeys: 10_000, policy: () => undefined }
  if (name === 'ttl') options.policyTtlMs = 3_600_000
  const limiter = new KeyedQuotaClock(options)
  for (const key of keys) assert.equal(limiter.tryConsume(key).allowed, true)
  let allowed = 0
  for (let i = 0; i < 200_000; i++) allowed += limiter.tryConsume(keys[i % 1000]).allowed ? 1 : 0
  assert.equal(allowed, 200_000)
  const start = process.hrtime.bigint()
  for (let i = 0; i < CALLS; i++) limiter.tryConsume(keys[i % 1000])
  return Number(process.hrtime.bigint() - start) / CALLS
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

if (process.argv[2] === '--run') {
  process.stdout.write(String(measure(process.argv[3], process.argv[4])))
} else {
  const before = process.argv[2]
  assert.ok(before, 'usage: node benchmark/live-limits.js <root of the build before>')
  const here = path.join(__dirname, '..')
  const cases = { 'before, policyTtlMs unset': [before, 'unset'], 'this build, policyTtlMs unset': [here, 'unset'], 'this build, policyTtlMs set': [here, 'ttl'] }
  const times = Object.fromEntries(Object.keys(cases).map((name) => [name, []]))
  for (let rep = 0; rep < REPETITIONS; rep++) {
    const order = Object.keys(cases).sort(() => Math.random() - 0.5)
    for (const name of order) {
      const [root, kind] = cases[name]
      times[name].push(Number(execFileSync(process.execPath, [__filename, '--run', root, kind], { encoding: 'utf8' })))
    }
  }
  const base = times['before, policyTtlMs unset']
  console.log('| case | ns/op (median) | × before |')
  console.log('|---|---:|---:|')
  for (const [name, values] of Object.entries(times)) {
    const ratio = median(values.map((value, i) => value / base[i]))
    console.log(`| ${name} | ${median(values).toFixed(1)} | ${ratio.toFixed(3)} |`)
  }
}
