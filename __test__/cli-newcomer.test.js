'use strict'
// What a newcomer hit with the command, run as a user runs it (a child process per call): output
// to a full disk, a calendar that ends before --count periods, a negative --count, --version, and
// plots that show the quota where the quota is what denies.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { XMLParser } = require('fast-xml-parser')

const ROOT = path.resolve(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'quota-clock-source.js')
const { version } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))

function cli(args, options = {}) {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000, ...options })
  if (result.error) throw result.error
  return result
}

const oneLine = (text) => /^[^\n]+\n$/.test(text)
const STACK = /\bat .+:\d+:\d+/

describe('output that cannot be written', () => {
  const full = fs.existsSync('/dev/full') ? '/dev/full' : null
  for (const args of [
    ['periods', '--unit', 'day', '--zone', 'UTC', '--count', '3'],
    ['periods', '--unit', 'day', '--zone', 'UTC', '--json'],
    ['simulate', 'step-back'],
    ['--help'],
    ['--version'],
  ]) {
    test(`${args.join(' ')} > /dev/full: one line on stderr, no stack trace, exit 1`, { skip: full === null && 'no /dev/full on this platform' }, () => {
      const fd = fs.openSync(full, 'w')
      try {
        const result = cli(args, { stdio: ['ignore', fd, 'pipe'] })
        assert.equal(result.status, 1, result.stderr)
        assert.ok(oneLine(result.stderr), `stderr is not one line: ${JSON.stringify(result.stderr)}`)
        assert.doesNotMatch(result.stderr, STACK)
        assert.match(result.stderr, /^quota-clock-source: cannot write the output: .*ENOSPC/)
      } finally {
        fs.closeSync(fd)
      }
    })
  }
})

describe('periods at the end of the calendar', () => {
  const args = ['periods', '--unit', 'day', '--zone', 'UTC', '--from', '8.64e15', '--count', '5']

  test('--from takes milliseconds in exponent form (8.64e15 is 8640000000000000)', () => {
    assert.equal(cli(args).stdout, cli(['periods', '--unit', 'day', '--zone', 'UTC', '--from', '8640000000000000', '--count', '5']).stdout)
  })

  test('fewer periods than --count: the text says why (the calendar ends), exit 0', () => {
    const result = cli(args)
    assert.equal(result.status, 0, result.stderr)
    assert.equal(result.stderr, '')
    const rows = result.stdout.split('\n').filter((line) => /^\+275760-/.test(line))
    assert.equal(rows.length, 1)
    assert.match(result.stdout, /Only 1 of the 5 periods asked for: the calendar's range ends at \+275760-09-13T00:00:00Z/)
  })

  test('with --json, stdout is only the periods and stderr says why', () => {
    const result = cli([...args, '--json'])
    assert.equal(result.status, 0, result.stderr)
    const list = JSON.parse(result.stdout)
    assert.equal(list.length, 1)
    assert.equal(list[0].startMs, 8.64e15)
    assert.ok(oneLine(result.stderr))
    assert.match(result.stderr, /Only 1 of the 5 periods.*calendar's range ends/)
  })

  test('when --count periods fit, nothing more is said', () => {
    const result = cli(['periods', '--unit', 'day', '--zone', 'UTC', '--from', '2024-01-01T00:00:00Z', '--count', '5'])
    assert.equal(result.status, 0)
    assert.doesNotMatch(result.stdout, /Only \d+ of/)
    assert.equal(result.stderr, '')
  })
})

describe('a negative count or interval', () => {
  for (const [args, flag] of [
    [['periods', '--unit', 'day', '--zone', 'UTC', '--count', '-1'], '--count'],
    [['watch', '--count', '-3'], '--count'],
    [['watch', '--interval', '-5'], '--interval'],
    [['periods', '--unit', 'month', '--zone', 'UTC', '--anchor-day', '-2'], '--anchor-day'],
  ]) {
    test(`${args.join(' ')}: says ${flag} must be a positive integer (not that it needs a value), exit 2`, () => {
      const result = cli(args)
      assert.equal(result.status, 2)
      assert.equal(result.stdout, '')
      assert.ok(oneLine(result.stderr), result.stderr)
      assert.match(result.stderr, new RegExp(`${flag} must be a positive integer; received '-\\d+'`))
      assert.doesNotMatch(result.stderr, /needs a value/)
    })
  }

  test('--from still takes a negative instant in the = form, and says so otherwise', () => {
    assert.match(cli(['periods', '--unit', 'day', '--zone', 'UTC', '--from', '-86400000']).stderr, /--from needs a value; for a value that starts with '-', write --from=-/)
    assert.equal(cli(['periods', '--unit', 'day', '--zone', 'UTC', '--from=-86400000', '--count', '1']).status, 0)
  })
})

describe('--version', () => {
  for (const flag of ['--version', '-V']) {
    test(`${flag} prints the package's version and exits 0`, () => {
      const result = cli([flag])
      assert.equal(result.status, 0, result.stderr)
      assert.equal(result.stdout, `${version}\n`)
      assert.equal(result.stderr, '')
    })
  }

  test('--help mentions --version; --version with an argument is a bad argument', () => {
    assert.match(cli(['--help']).stdout, /--version/)
    const result = cli(['--version', 'periods'])
    assert.equal(result.status, 2)
    assert.ok(oneLine(result.stderr))
  })
})

describe('plots draw the quota where the quota denies', () => {
  const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['g', 'path', 'rect', 'text', 'line', 'circle'].includes(name) })

  function plot(scenario) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-plot-'))
    try {
      const file = path.join(dir, `${scenario}.svg`)
      const result = cli(['simulate', scenario, '--svg', file])
      assert.equal(result.status, 0, result.stderr)
      const svg = parser.parse(fs.readFileSync(file, 'utf8')).svg
      const run = JSON.parse(cli(['simulate', scenario, '--json']).stdout)
      return { panel: svg.g[0], run }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }

  for (const scenario of ['dst-gap', 'month-end']) {
    test(`${scenario}: a quota line, a mark per request with what was left, and every quota denial marked as one`, () => {
      const { panel, run } = plot(scenario)
      const quotaPaths = (panel.path ?? []).filter((p) => p['data-quota'] === 'quotaRemaining')
      assert.equal(quotaPaths.length, 1, 'one quota line')
      const marks = (panel.rect ?? []).filter((r) => /\bquota-request\b/.test(r.class))
      assert.equal(marks.length, run.steps.length, 'a quota mark per request')
      const byQuota = run.steps.map((step) => !step.quotaClock.allowed && step.quotaClock.retryAfterBasis === 'wall-period')
      assert.ok(byQuota.some(Boolean), `${scenario} has quota denials`)
      assert.deepEqual(
        marks.map((r) => /\bdenied-by-quota\b/.test(r.class)),
        byQuota,
      )
      // What was left, in the period the request counted in; a quota denial had none left.
      marks.forEach((mark, i) => assert.match(mark.title, byQuota[i] ? /: 0 of 3 left in \S+, denied by the quota$/ : /: [0-3] of 3 left in \S+$/))
      const labels = (panel.text ?? []).map((t) => (typeof t === 'object' ? t['#text'] : t))
      assert.equal(labels.filter((label) => label === 'quota').length, byQuota.filter(Boolean).length, 'each quota denial is labelled')
      assert.ok(labels.includes('quota left (of 3)'), 'the quota axis is named')
      // The data series are still the two buckets.
      assert.deepEqual(panel.path.filter((p) => p['data-series']).map((p) => p['data-series']).sort(), ['naive', 'quotaClock'])
    })
  }

  test('step-back has no quota, so no quota line', () => {
    const { panel } = plot('step-back')
    assert.deepEqual((panel.path ?? []).filter((p) => p['data-quota']), [])
  })
})
