'use strict'
// The `quota-clock-source` command, run as a user runs it: a child process per call.
// Every command takes --json and --help; a bad argument exits 2 with one line on stderr naming it;
// success exits 0.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { XMLParser, XMLValidator } = require('fast-xml-parser')
const { periodFor } = require('..')

const ROOT = path.resolve(__dirname, '..')
const BIN = path.join(ROOT, 'bin', 'quota-clock-source.js')
const SCENARIOS = ['step-back', 'step-forward', 'suspend', 'suspend-with-reader', 'dst-gap', 'month-end']
const ANOMALY_KINDS = ['wall-step-back', 'wall-step-forward', 'suspend', 'ambiguous-wall-jump', 'period-regression', 'period-skip', 'store-clock-step']

function cli(args, options = {}) {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 30_000, ...options })
  if (result.error) throw result.error
  return result
}

/** Runs a command that must succeed; returns its stdout. */
function ok(args) {
  const result = cli(args)
  assert.equal(result.status, 0, `${args.join(' ')} exited ${result.status}:\n${result.stderr}`)
  assert.equal(result.stderr, '', `${args.join(' ')} wrote to stderr`)
  return result.stdout
}

const json = (args) => JSON.parse(ok([...args, '--json']))

/** Runs a command that must fail as a bad argument: status 2, nothing on stdout, one stderr line. */
function refused(args, ...patterns) {
  const result = cli(args)
  assert.equal(result.status, 2, `${args.join(' ')} exited ${result.status} (stdout ${JSON.stringify(result.stdout)}, stderr ${JSON.stringify(result.stderr)})`)
  assert.equal(result.stdout, '', `${args.join(' ')} printed to stdout`)
  assert.match(result.stderr, /^[^\n]+\n$/, `${args.join(' ')}: stderr is not one line: ${JSON.stringify(result.stderr)}`)
  assert.doesNotMatch(result.stderr, /\bat .+:\d+:\d+/, 'a stack trace')
  for (const pattern of patterns) assert.match(result.stderr, pattern)
  return result.stderr
}

describe('the command', () => {
  test('--help lists the three commands and exits 0', () => {
    const out = ok(['--help'])
    for (const command of ['periods', 'simulate', 'watch']) assert.match(out, new RegExp(`^  ${command} `, 'm'))
  })

  for (const command of ['periods', 'simulate', 'watch']) {
    test(`${command} --help explains --json and gives an example; exits 0`, () => {
      const out = ok([command, '--help'])
      assert.match(out, new RegExp(`^Usage: quota-clock-source ${command}`))
      assert.match(out, /--json/)
      assert.match(out, new RegExp(`Example[^\\n]*\\n\\s+quota-clock-source ${command}`))
      assert.equal(ok([command, '-h']), out)
    })
  }

  test('no command, an unknown command (with a did-you-mean) and an option before the command exit 2', () => {
    refused([], /missing command/, /periods, simulate, watch/)
    refused(['perods'], /unknown command 'perods'/, /did you mean 'periods'\?/)
    refused(['simulte'], /did you mean 'simulate'\?/)
    refused(['frobnicate'], /unknown command 'frobnicate'/)
    refused(['--json'], /expected a command before '--json'/)
  })
})

describe('periods', () => {
  const NY = ['periods', '--unit', 'day', '--zone', 'America/New_York', '--from', '2021-03-12T12:00:00Z', '--count', '4']

  test("text: a table of id, local start, UTC start, hours and startKind (New York's 2021 spring-forward day is 23 h)", () => {
    const lines = ok(NY).trimEnd().split('\n')
    const header = lines.findIndex((line) => line.startsWith('id'))
    assert.ok(header >= 0, 'no header row')
    assert.match(lines[header], /^id\s+local start\s+UTC start\s+hours\s+startKind$/)
    const rows = lines.slice(header + 1).map((line) => line.trim().split(/\s{2,}/))
    assert.deepEqual(rows, [
      ['2021-03-12', '2021-03-12 00:00:00 -05:00', '2021-03-12T05:00:00Z', '24', 'exact'],
      ['2021-03-13', '2021-03-13 00:00:00 -05:00', '2021-03-13T05:00:00Z', '24', 'exact'],
      ['2021-03-14', '2021-03-14 00:00:00 -05:00', '2021-03-14T05:00:00Z', '23', 'exact'],
      ['2021-03-15', '2021-03-15 00:00:00 -04:00', '2021-03-15T04:00:00Z', '24', 'exact'],
    ])
  })

  test('--json: an array of Period objects, the ones periodFor gives, from the period holding --from', () => {
    const periods = json(NY)
    const spec = { unit: 'day', timeZone: 'America/New_York' }
    const expected = [periodFor(spec, Date.UTC(2021, 2, 12, 12))]
    while (expected.length < 4) expected.push(periodFor(spec, expected[expected.length - 1].endMs))
    assert.deepEqual(periods, expected)
    for (const period of periods) assert.deepEqual(Object.keys(period).sort(), ['endMs', 'id', 'startKind', 'startMs', 'timeZone'])
    assert.equal(periods[2].endMs - periods[2].startMs, 23 * 3_600_000)
  })

  test('--count defaults to 6 and --from to now; --from also takes milliseconds since the epoch', () => {
    const before = Date.now()
    const periods = json(['periods', '--unit', 'week', '--zone', 'UTC'])
    const after = Date.now()
    assert.equal(periods.length, 6)
    assert.ok(periods[0].startMs <= after && before < periods[0].endMs, 'the first period holds now')
    for (let i = 1; i < periods.length; i++) assert.equal(periods[i].startMs, periods[i - 1].endMs, 'periods tile time')
    const ms = String(Date.UTC(2021, 2, 12, 12))
    assert.deepEqual(json(['periods', '--unit', 'day', '--zone', 'America/New_York', '--from', ms, '--count', '4']), json(NY))
    assert.deepEqual(json(['periods', '--unit', 'day', '--zone', 'America/New_York', '--from', '2021-03-12T07:00:00-05:00', '--count', '4']), json(NY))
  })

  test('the anchors are the period options: a DST gap, a weekly anchor, a tax year, a day Samoa skipped', () => {
    const gap = json(['periods', '--unit', 'day', '--zone', 'America/New_York', '--anchor-time', '02:30', '--from', '2024-03-09T12:00:00Z', '--count', '3'])
    assert.deepEqual(
      gap.map((p) => [p.id, new Date(p.startMs).toISOString(), p.startKind]),
      [
        ['2024-03-09', '2024-03-09T07:30:00.000Z', 'exact'],
        ['2024-03-10', '2024-03-10T07:00:00.000Z', 'gap'],
        ['2024-03-11', '2024-03-11T06:30:00.000Z', 'exact'],
      ],
    )
    const cases = [
      [['--unit', 'week', '--zone', 'Europe/Berlin', '--anchor-day', '3', '--anchor-time', '09:15:30'], { unit: 'week', timeZone: 'Europe/Berlin', anchorDay: 3, anchorTime: '09:15:30' }],
      [['--unit', 'year', '--zone', 'Europe/London', '--anchor-month', '4', '--anchor-day', '6'], { unit: 'year', timeZone: 'Europe/London', anchorMonth: 4, anchorDay: 6 }],
      [['--unit', 'month', '--zone', 'Asia/Tokyo', '--anchor-day', '31'], { unit: 'month', timeZone: 'Asia/Tokyo', anchorDay: 31 }],
    ]
    const from = Date.UTC(2024, 0, 20)
    for (const [flags, spec] of cases) {
      const expected = [periodFor(spec, from)]
      while (expected.length < 5) expected.push(periodFor(spec, expected[expected.length - 1].endMs))
      assert.deepEqual(json(['periods', ...flags, '--from', String(from), '--count', '5']), expected, flags.join(' '))
    }
    const apia = json(['periods', '--unit', 'day', '--zone', 'Pacific/Apia', '--from', '2011-12-29T12:00:00Z', '--count', '3'])
    assert.deepEqual(
      apia.map((p) => p.id),
      ['2011-12-29', '2011-12-31', '2012-01-01'],
    )
  })

  test("at the ends of a JS Date's range it prints what periodFor gives and exits 0", () => {
    for (const [from, zone] of [
      ['-8640000000000000', 'America/Los_Angeles'],
      ['8640000000000000', 'UTC'],
    ]) {
      const spec = { unit: 'year', timeZone: zone }
      const first = periodFor(spec, Number(from))
      assert.deepEqual(json(['periods', '--unit', 'year', '--zone', zone, `--from=${from}`, '--count', '1']), [first])
      const text = ok(['periods', '--unit', 'year', '--zone', zone, `--from=${from}`, '--count', '2'])
      assert.ok(text.includes(first.id), text)
    }
  })

  test('a bad argument exits 2 with one line naming it, with a did-you-mean for a mistyped flag, unit or zone', () => {
    const base = ['periods', '--unit', 'day', '--zone', 'UTC']
    refused(['periods', '--zonee', 'UTC', '--unit', 'day'], /'--zonee'/, /did you mean '--zone'\?/)
    refused(['periods', '--unti', 'day', '--zone', 'UTC'], /did you mean '--unit'\?/)
    refused(['periods', '--unit', 'mnth', '--zone', 'UTC'], /--unit/, /'mnth'/, /did you mean 'month'\?/)
    refused(['periods', '--unit', 'day', '--zone', 'America/NewYork'], /--zone/, /'America\/NewYork'/, /did you mean 'America\/New_York'\?/)
    refused(['periods', '--unit', 'day', '--zone', 'Mars/Olympus_Mons'], /--zone/, /Mars\/Olympus_Mons/)
    refused(['periods', '--zone', 'UTC'], /--unit is required/)
    refused(['periods', '--unit', 'day'], /--zone is required/)
    refused(['periods', '--unit', 'hour', '--zone', 'UTC'], /--unit 'hour'/, /sub-day/)
    refused([...base, '--from', '2021-03-12'], /--from/, /offset/)
    refused([...base, '--from', '2021-03-12T12:00:00'], /--from/, /offset/)
    refused([...base, '--from', 'yesterday'], /--from/, /'yesterday'/)
    refused([...base, '--from', '9e15'], /--from/)
    refused([...base, '--from'], /--from needs a value/)
    refused([...base, '--count', '0'], /--count/, /'0'/)
    refused([...base, '--count', '2.5'], /--count/)
    refused([...base, '--count', '10001'], /--count/)
    refused([...base, '--anchor-day', '3'], /--anchor-day/, /--unit day/)
    refused(['periods', '--unit', 'week', '--zone', 'UTC', '--anchor-day', '8'], /--anchor-day/, /1 to 7/)
    refused(['periods', '--unit', 'month', '--zone', 'UTC', '--anchor-day', '32'], /--anchor-day/, /1 to 31/)
    refused(['periods', '--unit', 'month', '--zone', 'UTC', '--anchor-month', '2'], /--anchor-month/)
    refused(['periods', '--unit', 'year', '--zone', 'UTC', '--anchor-month', '13'], /--anchor-month/)
    refused([...base, '--anchor-time', '25:00'], /--anchor-time/, /'25:00'/)
    refused([...base, 'extra'], /unexpected argument 'extra'/)
    refused([...base, '--json=yes'], /--json/)
    refused([...base, '--svg', 'x.svg'], /'--svg'/, /simulate/)
  })
})

describe('simulate', () => {
  const run = (name) => json(['simulate', name])
  const anomalyKinds = (step) => step.quotaClock.anomalies.map((a) => a.kind).sort()
  const stepWith = (result, kind) => {
    const step = result.steps.find((candidate) => anomalyKinds(candidate).includes(kind))
    assert.ok(step, `${result.scenario}: no step raised ${kind}`)
    return step
  }

  test('--list names at least the six scenarios; --list --json is an array of names', () => {
    const names = json(['simulate', '--list'])
    assert.ok(Array.isArray(names) && names.every((name) => typeof name === 'string'))
    for (const name of SCENARIOS) assert.ok(names.includes(name), name)
    assert.deepEqual(ok(['simulate', '--list']).trimEnd().split('\n'), names, 'text: one name a line')
    const help = ok(['simulate', '--help'])
    for (const name of names) assert.match(help, new RegExp(`^  ${name} +\\S`, 'm'), `--help says what ${name} does`)
  })

  test('--json: { scenario, steps: [{ atMs, n, naive: { allowed, tokens }, quotaClock: { allowed, tokens, retryAfterMs, retryAfterBasis, anomalies } }] }', () => {
    for (const name of SCENARIOS) {
      const result = run(name)
      assert.deepEqual(Object.keys(result).sort(), ['scenario', 'steps'])
      assert.equal(result.scenario, name)
      assert.ok(result.steps.length > 0)
      let previous = 0
      for (const step of result.steps) {
        assert.deepEqual(Object.keys(step).sort(), ['atMs', 'n', 'naive', 'quotaClock'])
        assert.ok(Number.isFinite(step.atMs) && step.atMs >= previous, `${name}: atMs runs forward from 0`)
        previous = step.atMs
        assert.ok(Number.isSafeInteger(step.n) && step.n > 0)
        assert.deepEqual(Object.keys(step.naive).sort(), ['allowed', 'tokens'])
        assert.deepEqual(Object.keys(step.quotaClock).sort(), ['allowed', 'anomalies', 'retryAfterBasis', 'retryAfterMs', 'tokens'])
        const q = step.quotaClock
        assert.equal(typeof q.allowed, 'boolean')
        assert.equal(q.allowed ? q.retryAfterMs : 1, q.allowed ? 0 : 1)
        if (q.allowed) assert.equal(q.retryAfterBasis, null)
        else assert.ok(['monotonic-refill', 'wall-period'].includes(q.retryAfterBasis) && q.retryAfterMs > 0)
        for (const anomaly of q.anomalies) {
          assert.ok(ANOMALY_KINDS.includes(anomaly.kind), anomaly.kind)
          assert.equal(typeof anomaly.detail, 'string')
          for (const field of ['monotonicDeltaMs', 'wallDeltaMs', 'creditedMs']) assert.equal(typeof anomaly[field], 'number')
        }
        // The naive bucket is the classic one, with its clamp: never in debt, never over capacity.
        for (const bucket of [step.naive, q]) assert.ok(bucket.tokens >= 0 && bucket.tokens <= 10, `${name}: tokens ${bucket.tokens}`)
      }
    }
  })

  test('without a scenario every scenario runs: --json is an array of the same objects, in --list order', () => {
    const all = json(['simulate'])
    const names = json(['simulate', '--list'])
    assert.deepEqual(
      all.map((result) => result.scenario),
      names,
    )
    for (const result of all) assert.deepEqual(result, run(result.scenario))
  })

  test('step-back: the naive bucket loses the refill owed for the idle time before the step; QuotaClock credits it', () => {
    const result = run('step-back')
    const [drain] = result.steps
    assert.deepEqual([drain.atMs, drain.n, drain.naive.allowed, drain.quotaClock.allowed], [0, 10, true, true])
    const step = stepWith(result, 'wall-step-back')
    const idle = step.atMs - drain.atMs
    assert.equal(idle, 8000)
    const [anomaly] = step.quotaClock.anomalies
    assert.equal(anomaly.creditedMs, idle, 'QuotaClock credits the monotonic delta')
    assert.ok(anomaly.wallDeltaMs < 0)
    assert.equal(step.quotaClock.allowed, true)
    assert.equal(step.quotaClock.tokens, idle / 1000 - step.n)
    assert.equal(step.naive.allowed, false, 'the naive bucket denies what 8 s of real refill pays for')
    assert.equal(step.naive.tokens, 0, 'its clamp credited 0 for the 8 s: not a debt, a loss')
    assert.ok(
      result.steps.filter((s) => s.naive.allowed !== s.quotaClock.allowed).every((s) => s.quotaClock.allowed),
      'wherever they differ, only QuotaClock allows',
    )
  })

  test('step-forward: an hour of step refills the naive bucket for time that did not pass; QuotaClock credits the 1 s', () => {
    const result = run('step-forward')
    const step = stepWith(result, 'ambiguous-wall-jump')
    assert.equal(step.atMs, 1000)
    assert.equal(step.n, 10)
    assert.equal(step.naive.allowed, true, 'a full burst after 1 s of real time')
    assert.equal(step.quotaClock.allowed, false)
    assert.equal(step.quotaClock.retryAfterBasis, 'monotonic-refill')
    assert.equal(step.quotaClock.retryAfterMs, 9000)
    const [anomaly] = step.quotaClock.anomalies
    assert.equal(anomaly.creditedMs, 1000)
    assert.ok(anomaly.wallDeltaMs >= 3_600_000)
  })

  test("suspend: without a reader the naive bucket credits the sleep (as it would a step); QuotaClock 'ignore' credits the time awake and says why", () => {
    const step = stepWith(run('suspend'), 'ambiguous-wall-jump')
    assert.equal(step.naive.allowed, true)
    assert.equal(step.quotaClock.allowed, false)
    assert.equal(step.quotaClock.anomalies[0].creditedMs, 2000)
    assert.equal(step.quotaClock.anomalies[0].wallDeltaMs, 22_000)
  })

  test('suspend-with-reader: QuotaClock credits the sleep and not the step; the naive bucket credits both', () => {
    const result = run('suspend-with-reader')
    const slept = stepWith(result, 'suspend')
    assert.equal(slept.quotaClock.allowed, true)
    assert.equal(slept.quotaClock.anomalies[0].suspendedMs, 20_000)
    assert.equal(slept.naive.allowed, true)
    const stepped = stepWith(result, 'wall-step-forward')
    assert.equal(stepped.quotaClock.anomalies[0].stepMs, 3_600_000)
    assert.equal(stepped.quotaClock.anomalies[0].creditedMs, 3000)
    assert.equal(stepped.quotaClock.allowed, false)
    assert.equal(stepped.naive.allowed, true)
  })

  test("dst-gap: the quota's denials wait exactly until the day that starts where the 02:30 gap closes", () => {
    const result = run('dst-gap')
    const startWallMs = Date.UTC(2024, 2, 10, 6, 59, 50) // the scenario's clock
    const day = periodFor({ unit: 'day', timeZone: 'America/New_York', anchorTime: '02:30' }, Date.UTC(2024, 2, 10, 12))
    assert.equal(day.startKind, 'gap')
    const resetAt = day.startMs - startWallMs
    const before = result.steps.filter((s) => s.atMs < resetAt)
    const denied = before.filter((s) => !s.quotaClock.allowed)
    assert.ok(denied.length > 0, 'some requests are denied before the reset')
    for (const s of denied) {
      assert.equal(s.quotaClock.retryAfterBasis, 'wall-period')
      assert.equal(s.atMs + s.quotaClock.retryAfterMs, resetAt)
    }
    const first = result.steps.find((s) => s.atMs >= resetAt)
    assert.equal(first.atMs, resetAt)
    assert.equal(first.quotaClock.allowed, true)
  })

  test('month-end: a backwards step into February holds March with its use (period-regression)', () => {
    const result = run('month-end')
    const step = stepWith(result, 'period-regression')
    const regression = step.quotaClock.anomalies.find((a) => a.kind === 'period-regression')
    assert.equal(regression.periodId, '2024-03')
    assert.ok(anomalyKinds(step).includes('wall-step-back'))
    assert.equal(step.quotaClock.allowed, false)
    assert.equal(step.quotaClock.retryAfterBasis, 'wall-period')
    const march = periodFor({ unit: 'month', timeZone: 'America/Los_Angeles' }, Date.UTC(2024, 2, 15))
    assert.equal(march.startMs, Date.UTC(2024, 2, 1, 8), 'March opens at midnight in Los Angeles')
  })

  test('text: each scenario, request by request, both decisions, QuotaClock tokens and anomalies', () => {
    const out = ok(['simulate', 'step-back'])
    assert.match(out, /^step-back: /)
    assert.match(out, /naive bucket\s+QuotaClock/)
    assert.match(out, /NTP sets the wall clock back 1 h/)
    const row = out.split('\n').find((line) => /^\s+8\.0 s\s+5\s/.test(line))
    assert.ok(row, 'no row for the request at 8 s')
    assert.match(row, /DENIED\s+0\.00\s+allowed\s+3\.00/)
    assert.match(out, /anomaly wall-step-back: /)
    const all = ok(['simulate'])
    for (const name of SCENARIOS) assert.match(all, new RegExp(`^${name}: `, 'm'))
    assert.match(ok(['simulate', 'step-forward']), /DENIED\s+1\.00\s+retry in 9 s \(monotonic-refill\)/)
  })

  test('a bad argument exits 2 with one line: a did-you-mean for a mistyped scenario or flag', () => {
    refused(['simulate', 'step-bak'], /unknown scenario 'step-bak'/, /did you mean 'step-back'\?/)
    refused(['simulate', 'stepforward'], /did you mean 'step-forward'\?/)
    refused(['simulate', 'tornado'], /unknown scenario 'tornado'/, /step-back/)
    refused(['simulate', '--svgg', 'x.svg'], /did you mean '--svg'\?/)
    refused(['simulate', '--lst'], /did you mean '--list'\?/)
    refused(['simulate', 'step-back', 'suspend'], /unexpected argument 'suspend'/)
    refused(['simulate', '--list', 'step-back'], /--list/)
    refused(['simulate', '--svg'], /--svg needs a value/)
    refused(['simulate', 'step-back', '--svg', path.join(os.tmpdir(), 'no-such-folder-qcs', 'plot.svg')], /--svg/, /does not exist/)
    refused(['simulate', '--interval', '5'], /'--interval'/, /watch/)
  })

  describe('--svg', () => {
    const parser = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: '', isArray: (name) => ['g', 'path', 'circle', 'line', 'text', 'rect'].includes(name) })
    const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-cli-'))
    const read = (file) => {
      const svg = fs.readFileSync(file, 'utf8')
      assert.equal(XMLValidator.validate(svg), true, 'the SVG is well-formed XML')
      const doc = parser.parse(svg)
      assert.ok(doc.svg, 'the root element is <svg>')
      assert.equal(doc.svg.xmlns, 'http://www.w3.org/2000/svg')
      return doc.svg
    }

    test('writes a plot of both buckets, their requests and the anomalies; stdout stays the JSON', () => {
      const dir = tmp()
      try {
        const file = path.join(dir, 'step-back.svg')
        const result = json(['simulate', 'step-back', '--svg', file])
        const svg = read(file)
        assert.equal(svg.g.length, 1)
        const [panel] = svg.g
        assert.equal(panel['data-scenario'], 'step-back')
        const series = panel.path.filter((p) => p['data-series']).map((p) => p['data-series'])
        assert.deepEqual(series.sort(), ['naive', 'quotaClock'])
        for (const p of panel.path.filter((candidate) => candidate['data-series'])) assert.match(p.d, /^M[\d.]+ [\d.]+( L[\d.]+ [\d.]+)+$/)
        const circles = panel.circle.filter((c) => /\brequest\b/.test(c.class || ''))
        assert.equal(circles.length, 2 * result.steps.length, 'a mark per request and bucket')
        const denied = circles.filter((c) => /\bnaive\b/.test(c.class) && /\bdenied\b/.test(c.class)).length
        assert.equal(denied, result.steps.filter((s) => !s.naive.allowed).length)
        const anomalyLines = panel.line.filter((l) => l.class === 'anomaly').length
        assert.equal(anomalyLines, result.steps.filter((s) => s.quotaClock.anomalies.length > 0).length)
        const labels = panel.text.map((t) => (typeof t === 'object' ? t['#text'] : t))
        assert.ok(labels.includes('wall-step-back'), 'the anomaly is labelled')
        assert.ok(labels.includes('QuotaClock') && labels.some((label) => /naive/.test(label)), 'a legend names both series')
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })

    test('without a scenario: one panel per scenario, each with both series', () => {
      const dir = tmp()
      try {
        const file = path.join(dir, 'all.svg')
        const out = ok(['simulate', '--svg', file])
        assert.match(out, /Plot written to /)
        const svg = read(file)
        assert.deepEqual(
          svg.g.map((g) => g['data-scenario']),
          json(['simulate', '--list']),
        )
        for (const panel of svg.g) {
          assert.deepEqual(panel.path.filter((p) => p['data-series']).map((p) => p['data-series']).sort(), ['naive', 'quotaClock'], panel['data-scenario'])
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })

    test('the plot docs/cli.md shows is what the command draws', () => {
      const dir = tmp()
      try {
        const file = path.join(dir, 'step-back.svg')
        ok(['simulate', 'step-back', '--svg', file])
        assert.equal(
          fs.readFileSync(file, 'utf8'),
          fs.readFileSync(path.join(ROOT, 'examples', 'simulate-step-back.svg'), 'utf8'),
          'examples/simulate-step-back.svg is stale: run `node bin/quota-clock-source.js simulate step-back --svg examples/simulate-step-back.svg`',
        )
      } finally {
        fs.rmSync(dir, { recursive: true, force: true })
      }
    })
  })
})

test("docs/cli.md's examples are what the command prints", () => {
  const page = fs.readFileSync(path.join(ROOT, 'docs', 'cli.md'), 'utf8')
  assert.match(page, /!\[[^\]]*\]\(\.\.\/examples\/simulate-step-back\.svg\)/, 'docs/cli.md shows the step-back plot')
  const blocks = [...page.matchAll(/```console\n\$ quota-clock-source (periods|simulate) ([^\n]*)\n([\s\S]*?)```/g)]
  assert.ok(blocks.length >= 2, 'docs/cli.md shows periods and simulate')
  for (const [, command, args, shown] of blocks) {
    const out = ok([command, ...args.split(' ')])
    const lines = shown.trimEnd().split('\n')
    const prefix = lines[lines.length - 1] === '...' ? lines.slice(0, -1) : lines
    assert.deepEqual(out.split('\n').slice(0, prefix.length), prefix, `${command} ${args}`)
  }
})

test('npm run demo (examples/demo.js) runs simulate over every scenario and writes a plot for each', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-demo-'))
  try {
    const result = spawnSync(process.execPath, [path.join(ROOT, 'examples', 'demo.js'), dir], { encoding: 'utf8', timeout: 60_000 })
    assert.equal(result.status, 0, result.stderr)
    assert.equal(result.stderr, '')
    for (const name of SCENARIOS) assert.match(result.stdout, new RegExp(`^${name}: `, 'm'))
    assert.match(result.stdout, /^2021-03-14\s.*\s23\s+exact$/m, "New York's spring-forward day")
    const plots = fs.readdirSync(dir).sort()
    assert.deepEqual(plots, ['all-scenarios.svg', ...json(['simulate', '--list']).map((name) => `${name}.svg`)].sort())
    for (const plot of plots) assert.equal(XMLValidator.validate(fs.readFileSync(path.join(dir, plot), 'utf8')), true, plot)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

describe('watch', () => {
  test('--count 2 --interval 50 --json: stops after two readings, exit 0, every stdout line an Anomaly', () => {
    const started = Date.now()
    const result = cli(['watch', '--count', '2', '--interval', '50', '--json'])
    assert.equal(result.status, 0, result.stderr)
    assert.equal(result.stderr, '')
    assert.ok(Date.now() - started >= 100, 'two readings 50 ms apart')
    for (const line of result.stdout.split('\n').filter(Boolean)) {
      const anomaly = JSON.parse(line)
      assert.ok(ANOMALY_KINDS.includes(anomaly.kind), line)
      assert.equal(typeof anomaly.detail, 'string')
    }
  })

  test('text: says which clocks it reads, then how many readings and anomalies it saw', () => {
    const lines = ok(['watch', '--count', '3', '--interval', '20']).trimEnd().split('\n')
    assert.match(lines[0], /^Watching .+ every 20 ms/)
    if (process.platform === 'linux') assert.match(lines[0], /CLOCK_BOOTTIME/)
    assert.match(lines[lines.length - 1], /^3 readings, \d+ anomal(y|ies)\.$/)
  })

  test('Ctrl-C stops it with exit 0 and no stack trace', { skip: process.platform === 'win32' && 'no SIGINT to send on Windows' }, async () => {
    const child = spawn(process.execPath, [BIN, 'watch', '--interval', '20'], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stderr.on('data', (chunk) => (stderr += chunk))
    const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
    await new Promise((resolve) => {
      child.stdout.on('data', (chunk) => {
        stdout += chunk
        if (stdout.includes('\n')) resolve()
      })
    })
    await new Promise((resolve) => setTimeout(resolve, 100))
    child.kill('SIGINT')
    const { code, signal } = await exited
    assert.deepEqual({ code, signal }, { code: 0, signal: null })
    assert.equal(stderr, '')
    assert.match(stdout, /^\d+ readings, \d+ anomal(y|ies)\.$/m)
  })

  test('a bad argument exits 2 with one line naming it', () => {
    refused(['watch', '--interval', '0'], /--interval/, /'0'/)
    refused(['watch', '--interval', 'fast'], /--interval/, /'fast'/)
    refused(['watch', '--count', '-1'], /--count/)
    refused(['watch', '--count', '1.5'], /--count/)
    refused(['watch', '--intervall', '5'], /did you mean '--interval'\?/)
    refused(['watch', 'now'], /unexpected argument 'now'/)
  })
})
