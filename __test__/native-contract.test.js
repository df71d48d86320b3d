'use strict'
// The JS↔native contract is defined once, in Rust, and exported as `contract()`: index.d.ts's
// string unions must be exactly its lists (checked by the TypeScript compiler, both ways), every
// error code the JS face or the CLI writes is one of its codes, and the JS face must read it rather
// than keep copies.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const TSCONFIG = path.join(__dirname, 'types', 'tsconfig.json')
const native = require('../binding.js')
const { manualLimiter } = require('./helpers/limiters')
const contract = native.contract()

/** One anomaly of every kind, as the native side makes them (the JS face passes them on as they are). */
function anomaliesOfEveryKind() {
  const make = (options = {}) => manualLimiter({ policy: 'credit', ...options })
  const seen = []
  const day = { limit: 10, period: { unit: 'day', timeZone: 'UTC' } }
  let { clock, limiter } = make()
  clock.advance(1000)
  clock.stepWall(-60_000) // wall-step-back
  seen.push(...limiter.tryConsume().anomalies)
  clock.stepWall(30_000) // ambiguous-wall-jump (no reader)
  seen.push(...limiter.tryConsume().anomalies)
  ;({ clock, limiter } = make({ reader: true }))
  clock.suspend(10_000)
  clock.stepWall(45_000) // suspend and wall-step-forward
  seen.push(...limiter.tryConsume().anomalies)
  ;({ clock, limiter } = make({ quota: day }))
  clock.advance(3 * 86_400_000) // period-skip
  seen.push(...limiter.tryConsume().anomalies)
  ;({ clock, limiter } = make({ quota: day, wallMs: Date.UTC(2024, 0, 15, 0, 0, 30) }))
  clock.stepWall(-60_000) // period-regression
  seen.push(...limiter.tryConsume().anomalies)
  return seen
}

const ANOMALIES = anomaliesOfEveryKind()

const { tscScript } = require('./helpers/tsc')
const { slicesTable, stepTheStoreClock, waitFor } = require('./helpers/slices-table.js')
const { AT, OPERATION } = require('../lib/native/contract.js')

/** index.d.ts's type for each contract list, and the list. */
function unions(lists) {
  return [
    ['SuspendPolicy', lists.suspendPolicies],
    ['AnomalyKind', lists.anomalyKinds],
    ["QuotaPeriodSpec['unit']", lists.periodUnits],
    ["Period['startKind']", lists.startKinds],
    ["NonNullable<Decision['retryAfterBasis']>", lists.retryAfterBasis],
    ['QuotaClockErrorCode', lists.quotaClockErrorCodes],
    ['keyof Anomaly', lists.anomalyFields],
  ]
}

const LISTS = {
  suspendPolicies: contract.suspendPolicies,
  anomalyKinds: contract.anomalyKinds,
  periodUnits: contract.periodUnits,
  startKinds: contract.startKinds,
  retryAfterBasis: contract.retryAfterBasis.map((entry) => entry.name),
  // Every code of the one `ErrorCode` enum (src/error.rs), whatever class it is thrown as.
  quotaClockErrorCodes: contract.errorCodes.map((entry) => entry.code),
  // Every field an anomaly of some kind has.
  anomalyFields: [...new Set(ANOMALIES.flatMap((anomaly) => Object.keys(anomaly)))],
}

/** Compiles a file that states, for each union, that it equals the contract's list; returns tsc's result. */
function compileEqualities(lists) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-contract-'))
  try {
    const checks = unions(lists).map(([type, values], i) => {
      const literal = values.length === 0 ? 'never' : values.map((value) => JSON.stringify(value)).join(' | ')
      return `type Listed${i} = ${literal}\nexport const check${i}: Same<${type}, Listed${i}> = true`
    })
    const source = [
      `import type { SuspendPolicy, AnomalyKind, QuotaPeriodSpec, Period, Decision, QuotaClockErrorCode, Anomaly } from ${JSON.stringify(path.join(ROOT, 'index.js'))}`,
      'type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false',
      ...checks,
    ].join('\n')
    const file = path.join(dir, 'contract.ts')
    fs.writeFileSync(file, `${source}\n`)
    fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify({ extends: TSCONFIG, files: [file] }))
    const result = spawnSync(process.execPath, [tscScript(), '-p', path.join(dir, 'tsconfig.json'), '--noEmit', '--pretty', 'false'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 })
    if (result.error) throw result.error
    return { status: result.status, output: `${result.stdout}${result.stderr}`, lines: source.split('\n') }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

test("index.d.ts's unions are exactly the native contract's lists", () => {
  for (const [name, values] of Object.entries(LISTS)) assert.ok(values.length > 0, `the contract's ${name} is empty`)
  const { status, output } = compileEqualities(LISTS)
  assert.equal(status, 0, `index.d.ts and the native contract disagree:\n${output}`)
})

test('the anomalies made for the check are one of every kind, each with the fields every kind has first, in one order', async () => {
  // store-clock-step is raised by a shared bucket's store answers: delivered to onAnomaly (and on the decision of a call that waited for that answer).
  const delivered = []
  const { keyed, clock, owner } = slicesTable({ onAnomaly: (anomaly) => delivered.push(anomaly) })
  keyed.result[AT.nOrStatus] = 1
  keyed.result[AT.operation] = OPERATION.sharedConsume
  keyed.call('a')
  stepTheStoreClock(keyed, clock, 'a')
  assert.ok(await waitFor(() => delivered.length > 0), 'a store-clock-step delivered')
  assert.ok(owner)
  const anomalies = [...ANOMALIES, ...delivered]
  assert.deepEqual([...new Set(anomalies.map((anomaly) => anomaly.kind))].sort(), [...contract.anomalyKinds].sort())
  const common = ['kind', 'detail', 'monotonicDeltaMs', 'wallDeltaMs', 'creditedMs']
  const order = LISTS.anomalyFields
  for (const anomaly of anomalies) {
    const keys = Object.keys(anomaly)
    assert.deepEqual(keys.slice(0, common.length), common, anomaly.kind)
    assert.deepEqual(keys, [...keys].sort((a, b) => order.indexOf(a) - order.indexOf(b)), anomaly.kind)
    assert.equal(Object.getPrototypeOf(anomaly), Object.prototype, 'a plain object')
  }
})

test('the check fails when a list and a union differ, one value more or one less (it can fail)', () => {
  for (const change of [(list) => list.slice(1), (list) => [...list, 'not-in-the-types']]) {
    const lists = { ...LISTS, anomalyKinds: change(LISTS.anomalyKinds), periodUnits: change(LISTS.periodUnits) }
    const { status, output } = compileEqualities(lists)
    assert.notEqual(status, 0, 'a changed list still compiled')
    assert.equal(output.split('\n').filter((line) => /error TS\d+:/.test(line)).length, 2, output)
  }
})

// Codes of Node's own that lib/ and bin/ may compare an error's code with (never throw), and how
// Node makes each: the check below asks Node, so a code of ours cannot hide here.
const NODE_CODES = {
  ERR_PARSE_ARGS_UNKNOWN_OPTION: () => require('node:util').parseArgs({ args: ['--not-an-option'], options: {} }),
}

/** `{ file, code, compared }` for each quoted `ERR_…` in the files the package ships (lib/, bin/, the entries; their .d.ts comments too). */
function errorCodesWritten() {
  const shipped = (dir) => fs.readdirSync(path.join(ROOT, dir), { recursive: true }).filter((file) => /\.(js|mjs|d\.ts)$/.test(file)).map((file) => path.join(dir, file))
  const files = ['index.js', 'index.mjs', 'index.d.ts', ...shipped('lib'), ...shipped('bin')]
  const found = []
  for (const file of files) {
    const source = fs.readFileSync(path.join(ROOT, file), 'utf8')
    for (const match of source.matchAll(/(===|!==)?\s*(['"`])(ERR_[A-Z0-9_]+)\2/g)) {
      found.push({ file, code: match[3], compared: match[1] !== undefined })
    }
  }
  return found
}

test("every error code lib/ and bin/ write is one of the native contract's codes (and so of QuotaClockErrorCode)", () => {
  const listed = new Set(contract.errorCodes.map((entry) => entry.code))
  const written = errorCodesWritten()
  // Where the codes are: a scan that found nothing would pass whatever the sources say.
  for (const code of ['ERR_SHARED_ASYNC', 'ERR_CALLBACK', 'ERR_MISSING_PEER_DEPENDENCY', 'ERR_INVALID_OPTION', 'ERR_STORE_UNAVAILABLE']) {
    assert.ok(written.some((hit) => hit.code === code), `the scan finds ${code}`)
  }
  const missing = written.filter((hit) => !listed.has(hit.code) && !(hit.compared && hit.code in NODE_CODES))
  assert.deepEqual(missing.map((hit) => `${hit.file}: ${hit.code}`), [], "codes written in the sources but not in the contract's list (add them to ErrorCode in src/error.rs and to QuotaClockErrorCode in index.d.ts)")
  for (const [code, make] of Object.entries(NODE_CODES)) {
    assert.ok(!listed.has(code), `${code} is Node's, not ours`)
    assert.throws(make, (error) => error.code === code, `Node throws ${code}`)
  }
})

test('every error class the contract names is one the JS face throws', () => {
  assert.deepEqual([...new Set(contract.errorCodes.map((entry) => entry.class))].sort(), ['Error', 'QuotaClockError', 'RangeError', 'TypeError'])
})

test('the JS face keeps no copy of the contract: no list or buffer position is spelled out in lib/ or index.js', () => {
  const files = ['index.js', ...fs.readdirSync(path.join(ROOT, 'lib'), { recursive: true }).filter((file) => file.endsWith('.js')).map((file) => path.join('lib', file))]
  const copies = [
    [/new Float64Array\(\d+\)/, 'a result buffer of a literal length'],
    [/\bresult\[\d+\]|\bRESULT\[\d+\]/, 'a result-buffer position as a literal'],
    [/'monotonic-refill',\s*'wall-period'/, 'the retryAfterBasis list'],
    [/'ignore',\s*'credit',\s*'refuse'/, 'the suspend policies'],
    [/'day',\s*'week',\s*'month',\s*'year'/, 'the period units'],
    [/'ERR_MONOTONIC_REGRESSION',\s*'ERR_/, 'a list of error codes'],
    [/8\.64e15|8_640_000_000_000_000/, 'MAX_WALL_MS'],
    [/'suspendedMs',\s*'stepMs'|monotonicDeltaMs: anomaly\./, "the anomaly's fields"],
  ]
  for (const file of files) {
    const source = fs.readFileSync(path.join(ROOT, file), 'utf8')
    for (const [pattern, what] of copies) assert.doesNotMatch(source, pattern, `${file} copies ${what}`)
  }
})

test("the fleet bucket's store terms in lib/share/protocol.js are the core's (write-off margin, record expiry, hunger)", () => {
  const protocol = require('../lib/share/protocol.js')
  const { writeOffFactor, writeOffMarginMs, recordKeptAfterMs } = contract.fleetBucket
  assert.deepEqual(Object.keys(contract.fleetBucket).sort(), ['recordKeptAfterMs', 'shareRefillMs', 'writeOffFactor', 'writeOffMarginMs'])
  assert.equal(protocol.SHARE_REFILL_MS, contract.fleetBucket.shareRefillMs)
  assert.equal(protocol.writeOffAfterMs(4_000), 4_000 * writeOffFactor + writeOffMarginMs)
  assert.equal(protocol.bucketKeptMs(100, 1, 4_000), 100_000 + recordKeptAfterMs)
  assert.equal(protocol.bucketKeptMs(1, 100, 4_000), protocol.writeOffAfterMs(4_000) + recordKeptAfterMs)
  // The Lua script and the pipeline write the terms through bucketTerms, never a term themselves.
  for (const file of ['lib/stores/redis-bucket.js', 'lib/stores/mongo-bucket.js']) {
    const source = fs.readFileSync(path.join(ROOT, file), 'utf8')
    assert.match(source, /bucketTerms\.keptAfterTake\(/, `${file} keeps its record by bucketTerms.keptAfterTake`)
    assert.doesNotMatch(source, /WRITE_OFF_FACTOR|WRITE_OFF_MARGIN_MS|KEPT_AFTER_MS|\b1\.1\b/, `${file} writes a term itself`)
  }
})
