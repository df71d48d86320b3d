'use strict'
// Instructions per call inside the raw native function, counted exactly with callgrind: the
// count of a 40,000-call run less a 20,000-call run, over 20,000 (setup, warm-up and the JIT's
// start cancel out). `fast_consume` is QuotaClock.tryConsume's raw function, `raw_call` the keyed
// cell's (1,000 keys held, round robin, the key's read included). The shared cases are an awaited
// `consume` of a shared limiter (`share`, on the tests' in-process store) whose every key holds a
// reservation far larger than the run takes: a covered call, decided in the one raw call. The
// zone cases are a zone limiter's raw call (1,000 keys held in a fresh zone file, unblocked).
//
//   CARGO_PROFILE_RELEASE_STRIP=none npm run build:probes   # the release build, symbols kept
//   node benchmark/instructions.js                          # needs valgrind
//
// `node benchmark/instructions.js <case> <calls>` is what each measured process runs.
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { execFileSync } = require('node:child_process')

const CASES = {
  allowed: 'fast_consume',
  denied: 'fast_consume',
  'quota-allowed': 'fast_consume',
  'quota-denied': 'fast_consume',
  'keyed-allowed': 'raw_call',
  'keyed-denied': 'raw_call',
  'shared-allowed': 'raw_call',
  'shared-denied': 'raw_call',
  'zone-allowed': 'raw_call',
  'zone-denied': 'raw_call',
}
const LA_MONTH = { limit: Number.MAX_SAFE_INTEGER, period: { unit: 'month', timeZone: 'America/Los_Angeles' } }
const open = { capacity: 1e12, refillPerSecond: 1e12, suspendPolicy: 'ignore' }
const shut = { capacity: 1, refillPerSecond: 1e-9, initialTokens: 0, suspendPolicy: 'ignore' }

const keys = Array.from({ length: 1000 }, (_, i) => `k${i}`)

/** A shared case's call (an awaited consume, covered), every key's reservation made first. */
async function sharedCall(limits) {
  const { KeyedQuotaClock } = require('..')
  const { testStore } = require('../__test__/helpers/test-store.js')
  const { storeStatsOf } = require('../lib/share/driver.js')
  const quota = { limit: Number.MAX_SAFE_INTEGER, period: { unit: 'month', timeZone: 'UTC' } }
  const share = { store: testStore().store, name: 'instructions', leaseUnits: 1_000_000 }
  // Denied: the bucket is empty, so the reservation is made by a call that passes the bucket.
  const limiter = new KeyedQuotaClock({ ...limits, initialTokens: limits.capacity, quota, maxKeys: 10_000, share })
  for (const key of keys) await limiter.consume(key)
  assert.equal(storeStatsOf(limiter).calls, keys.length)
  let i = 0
  return async () => (await limiter.consume(keys[i++ % keys.length])).allowed
}

/** The call a case makes, its answer asserted first. */
async function caseCall(name) {
  const { QuotaClock, KeyedQuotaClock } = require('..')
  const limits = name.endsWith('denied') ? shut : open
  let call
  if (name.startsWith('shared')) {
    call = await sharedCall(limits)
  } else if (name.startsWith('zone')) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-instructions-'))
    process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
    const zone = { path: path.join(dir, 'zone') }
    const limiter = new KeyedQuotaClock({ ...limits, maxKeys: 10_000, zone })
    for (const key of keys) limiter.tryConsume(key)
    let i = 0
    call = () => limiter.tryConsume(keys[i++ % keys.length]).allowed
  } else if (name.startsWith('keyed')) {
    const limiter = new KeyedQuotaClock({ ...limits, maxKeys: 10_000 })
    for (const key of keys) limiter.tryConsume(key)
    let i = 0
    call = () => limiter.tryConsume(keys[i++ % keys.length]).allowed
  } else {
    const limiter = new QuotaClock(name.startsWith('quota') ? { ...limits, quota: LA_MONTH } : limits)
    call = () => limiter.tryConsume(1).allowed
  }
  assert.equal(await call(), !name.endsWith('denied'))
  return call
}

async function measured(name, calls) {
  const call = await caseCall(name)
  const expected = !name.endsWith('denied')
  const unexpected = () => new Error(`${name}: an unexpected answer`)
  if (name.startsWith('shared')) {
    for (let i = 0; i < calls; i++) if ((await call()) !== expected) throw unexpected()
  } else {
    for (let i = 0; i < calls; i++) if (call() !== expected) throw unexpected()
  }
}

/** Instructions executed inside `fn` by a run of `calls` calls. */
function count(name, fn, calls) {
  const out = path.join(os.tmpdir(), `qcs-callgrind-${process.pid}-${name}-${calls}.out`)
  try {
    execFileSync('valgrind', ['--tool=callgrind', `--callgrind-out-file=${out}`, `--toggle-collect=*${fn}*`, process.execPath, __filename, name, String(calls)], { stdio: 'ignore' })
    const summary = fs.readFileSync(out, 'utf8').match(/^summary: (\d+)/m)
    assert.ok(summary, `callgrind counted nothing in ${fn}: is the build stripped?`)
    return Number(summary[1])
  } finally {
    fs.rmSync(out, { force: true })
  }
}

if (process.argv[2]) {
  measured(process.argv[2], Number(process.argv[3])).catch((error) => {
    console.error(error)
    process.exitCode = 1
  })
} else {
  console.log('| case | instructions per call |\n|---|---:|')
  for (const [name, fn] of Object.entries(CASES)) {
    const perCall = (count(name, fn, 40_000) - count(name, fn, 20_000)) / 20_000
    console.log(`| ${name} | ${Math.round(perCall)} |`)
  }
}
