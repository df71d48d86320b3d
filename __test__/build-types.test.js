'use strict'

// The published types, checked the way a TypeScript user meets them: `tsc --noEmit --strict` on
// files that import 'quota-clock-source' by name (resolved through package.json "exports").
// __test__/types/usage.ts and usage-esm.mts must compile; wrong-option.ts and wrong-field.ts must
// fail, and for the reason they were written for.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const TYPES_DIR = path.join(__dirname, 'types')
const TSCONFIG = path.join(TYPES_DIR, 'tsconfig.json')

const { tscScript } = require('./helpers/tsc')

/** Runs tsc on a project file; returns { status, output } with paths relative to the repo. */
function tsc(project, ...extra) {
  const result = spawnSync(process.execPath, [tscScript(), '-p', project, '--noEmit', '--strict', '--pretty', 'false', ...extra], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
  })
  if (result.error) throw result.error
  return { status: result.status, output: `${result.stdout}${result.stderr}` }
}

/** A throwaway tsconfig (in os.tmpdir()) with the shared options and only `file`. */
function projectFor(file) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-types-'))
  const project = path.join(dir, 'tsconfig.json')
  fs.writeFileSync(project, JSON.stringify({ extends: TSCONFIG, files: [path.join(TYPES_DIR, file)] }))
  return { project, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) }
}

/** The `error TSxxxx:` lines of tsc's output. */
function errors(output) {
  return output.split(/\r?\n/).filter((line) => /error TS\d+:/.test(line))
}

function expectFailure(file, badName, expected) {
  const { project, cleanup } = projectFor(file)
  try {
    const { status, output } = tsc(project)
    assert.notEqual(status, 0, `${file} compiled, but it must not:\n${output}`)
    const lines = errors(output)
    // Exactly the one planted mistake: a broken import or a missing declaration would also fail
    // the compile, and must not pass for this test.
    assert.equal(lines.length, 1, `${file}: expected one error, got:\n${output}`)
    const [line] = lines
    assert.ok(line.includes(file), `${file}: the error is elsewhere:\n${line}`)
    assert.ok(line.includes(`'${badName}'`), `${file}: the error does not name '${badName}':\n${line}`)
    assert.match(line, expected)
  } finally {
    cleanup()
  }
}

describe('TypeScript types (tsc --noEmit --strict)', () => {
  test('the compiler runs', () => {
    const result = spawnSync(process.execPath, [tscScript(), '--version'], { encoding: 'utf8' })
    assert.equal(result.status, 0, result.stderr)
    assert.match(result.stdout, /Version \d+\./)
  })

  test("'quota-clock-source' resolves to the hand-written index.d.ts through package.json exports", () => {
    const { status, output } = tsc(TSCONFIG, '--explainFiles')
    assert.equal(status, 0, output)
    assert.match(output, /^index\.d\.ts\r?\n\s+Imported via 'quota-clock-source' from file '__test__\/types\/usage\.ts'/m)
    assert.match(output, /Imported via 'quota-clock-source' from file '__test__\/types\/usage-esm\.mts'/)
  })

  test('valid use of every export and every type compiles (CommonJS and ES module files)', () => {
    const { status, output } = tsc(TSCONFIG)
    assert.equal(status, 0, `tsc failed on __test__/types/usage.ts or usage-esm.mts:\n${output}`)
    assert.deepEqual(errors(output), [])
  })

  test('every type the package documents is exported and used by usage.ts', () => {
    const usage = fs.readFileSync(path.join(TYPES_DIR, 'usage.ts'), 'utf8')
    const declarations = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8')
    const names = [
      'QuotaClock',
      'QuotaClockError',
      'systemClock',
      'hostElapsedRealtime',
      'procUptimeElapsedRealtime',
      'manualClock',
      'periodFor',
      'QuotaClockOptions',
      'QuotaPeriodSpec',
      'SuspendPolicy',
      'Decision',
      'Status',
      'Anomaly',
      'AnomalyKind',
      'Period',
      'ClockSource',
      'ManualClock',
      'ManualClockInit',
    ]
    for (const name of names) {
      assert.match(declarations, new RegExp(`export (declare )?(class|function|interface|type|const) ${name}\\b`), `index.d.ts does not export ${name}`)
      assert.match(usage, new RegExp(`^\\s+${name},$`, 'm'), `usage.ts does not import ${name}`)
    }
  })

  test('every runtime export of index.js is declared in index.d.ts', () => {
    const declarations = fs.readFileSync(path.join(ROOT, 'index.d.ts'), 'utf8')
    const undeclared = Object.keys(require('../index.js')).filter(
      (name) => !new RegExp(`export (declare )?(class|function|const|let|var) ${name}\\b`).test(declarations),
    )
    assert.deepEqual(undeclared, [], `index.d.ts does not declare: ${undeclared.join(', ')}`)
  })

  test("a misspelled option fails: suspendpolicy (wrong-option.ts)", () => {
    expectFailure('wrong-option.ts', 'suspendpolicy', /TS2353|TS2561/)
  })

  test('a field a decision does not have fails: decision.retryAfter (wrong-field.ts)', () => {
    expectFailure('wrong-field.ts', 'retryAfter', /TS2339|TS2551/)
  })
})
