'use strict'
// The one check of the prose: what the documents say and how they are laid out, apart from the
// behaviour suites.
//
// What users read (the README, docs/, the types, the shipped JS and the command's help) cites no
// document they cannot see: no "SPEC", no bare section sign and number (an RFC's section, "RFC
// 9651" then the sign and "3.3.1", is fine). The tests cite no section either: they are named by
// behaviour. The sign is written here as an escape, so that this file has none.
//
// The README is short and starts with the two commands; the rest is in docs/, and every relative
// link between them (and to the repository's files) leads somewhere, anchors included. The README
// names every error code; ARCHITECTURE.md cites no document its readers cannot open.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const jsUnder = (dir) => fs.readdirSync(path.join(ROOT, dir), { recursive: true }).filter((file) => /\.(c|m)?js$|\.d\.ts$/.test(file)).map((file) => path.join(dir, file))
const markdownUnder = (dir) => fs.readdirSync(path.join(ROOT, dir)).filter((file) => file.endsWith('.md')).map((file) => path.join(dir, file))
const FILES = [
  'README.md',
  ...['ARCHITECTURE.md', '.editorconfig'].filter((file) => fs.existsSync(path.join(ROOT, file))),
  ...markdownUnder('docs'),
  'benchmark/README.md',
  'index.js',
  'index.mjs',
  'index.d.ts',
  ...jsUnder('lib'),
  ...jsUnder('bin'),
]

/** The lines of `text` that cite an unseen document. */
const SECTION = '\u00a7'
const BARE_SECTION = new RegExp(`(?<!RFC \\d+ )${SECTION}`)

function citations(text) {
  return text.split('\n').filter((line) => /\bSPEC\b(?!_)/.test(line) || BARE_SECTION.test(line))
}

test('the check finds a citation when there is one (it can fail)', () => {
  assert.equal(citations(`ok\n// the limit (SPEC ${SECTION}5)\nsee ${SECTION}6\nRFC 9651 ${SECTION}3.3.1`).length, 2)
})

for (const file of FILES) {
  test(`${file} cites no document users cannot see`, () => {
    assert.deepEqual(citations(fs.readFileSync(path.join(ROOT, file), 'utf8')), [])
  })
}

test('no test file cites a section: tests are named by behaviour', () => {
  const files = fs.readdirSync(path.join(ROOT, '__test__'), { recursive: true }).filter((file) => /\.(c|m)?js$|\.(m)?ts$/.test(file))
  assert.ok(files.length > 30)
  const citing = files.filter((file) => fs.readFileSync(path.join(ROOT, '__test__', file), 'utf8').includes(SECTION))
  assert.deepEqual(citing, [])
})

// ---------------------------------------------------------------------------------------------
// The layout of the README and docs/, and their links.

const README_MAX_LINES = 400
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`)]

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading) {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The anchors a markdown text defines (its headings outside code blocks). */
function anchors(markdown) {
  const found = new Set()
  let inCode = false
  for (const line of markdown.split('\n')) {
    if (/^```/.test(line)) inCode = !inCode
    const heading = !inCode && /^#{1,6}\s+(.*)$/.exec(line)
    if (heading) found.add(slug(heading[1]))
  }
  return found
}

/** The relative links of a markdown text outside code blocks: [{ target, anchor }]. */
function relativeLinks(markdown) {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '')
  const links = []
  for (const [, href] of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
    if (/^[a-z]+:/i.test(href)) continue
    const [target, anchor] = href.split('#')
    links.push({ href, target, anchor })
  }
  return links
}

test('the link check finds a broken file and a broken anchor (it can fail)', () => {
  assert.equal(slug('Many keys: `KeyedQuotaClock`'), 'many-keys-keyedquotaclock')
  assert.equal(slug('HTTP middleware: `quota-clock-source/http`'), 'http-middleware-quota-clock-sourcehttp')
  assert.deepEqual(
    relativeLinks('[a](docs/x.md#y) [b](https://example.com) [c](#z)\n```\n[d](nope.md)\n```\n'),
    [
      { href: 'docs/x.md#y', target: 'docs/x.md', anchor: 'y' },
      { href: '#z', target: '', anchor: 'z' },
    ],
  )
  assert.deepEqual([...anchors('# A b\n```\n# not a heading\n```\n## C: `d`\n')], ['a-b', 'c-d'])
})

test(`README.md is at most ${README_MAX_LINES} lines: a user's install and example first, the two commands from a clone right after, a table of contents`, () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const lines = readme.trimEnd().split('\n')
  assert.ok(lines.length <= README_MAX_LINES, `README.md has ${lines.length} lines`)
  const blocks = [...readme.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map(([, lang, code]) => ({ lang, lines: code.trimEnd().split('\n') }))
  // A user's first screen: the install, then a short example.
  assert.deepEqual(blocks[0], { lang: 'sh', lines: ['npm install quota-clock-source'] })
  assert.equal(blocks[1].lang, 'js')
  assert.ok(blocks[1].lines.length <= 12, `the first example has ${blocks[1].lines.length} lines`)
  assert.ok(readme.indexOf('```sh') < readme.indexOf('\n## '), 'the install comes before any section')
  // Then, under their own heading, near the top: the demo and the tests from a clone.
  const clone = readme.indexOf('\n## From a clone\n')
  assert.ok(clone !== -1 && readme.slice(0, clone).split('\n').length <= 20, 'a "From a clone" section near the top')
  assert.ok(readme.indexOf('```js') < clone, 'after the example')
  const commands = blocks[2].lines
  assert.equal(blocks[2].lang, 'sh')
  assert.ok(readme.indexOf(commands[0]) > clone && readme.indexOf(commands[0]) < readme.indexOf('\n## ', clone + 1), 'in that section')
  assert.match(commands[0], /^npm install && npm run demo\b/)
  assert.match(commands[1], /^npm install && npm test\b/)
  assert.match(readme, /^## Contents$/m)
})

test('the README links every page of docs/', () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const linked = new Set(relativeLinks(readme).map((link) => link.target))
  const missing = PAGES.filter((page) => page.startsWith('docs/') && !linked.has(page))
  assert.deepEqual(missing, [], 'pages of docs/ the README does not link')
})

for (const page of PAGES) {
  test(`${page}: every relative link leads to a file, and every anchor to a heading`, () => {
    const text = fs.readFileSync(path.join(ROOT, page), 'utf8')
    const broken = []
    for (const { href, target, anchor } of relativeLinks(text)) {
      const file = target === '' ? path.join(ROOT, page) : path.resolve(path.dirname(path.join(ROOT, page)), target)
      // ARCHITECTURE.md is another branch's: a link to it is checked once it exists.
      if (!fs.existsSync(file)) {
        if (path.relative(ROOT, file) !== 'ARCHITECTURE.md') broken.push(`${href}: no such file`)
        continue
      }
      if (anchor && file.endsWith('.md') && !anchors(fs.readFileSync(file, 'utf8')).has(anchor)) broken.push(`${href}: no such heading`)
    }
    assert.deepEqual(broken, [])
  })
}

test('docs/limitations.md says how keyed state crosses processes (share, zone), not that it cannot', () => {
  const text = fs.readFileSync(path.join(ROOT, 'docs', 'limitations.md'), 'utf8')
  assert.doesNotMatch(text, /not across instances/)
  assert.match(text, /\[Several instances\]\(several-instances\.md\)/)
  assert.match(text, /\[Zone\]\(zone\.md\)/)
})

// ---------------------------------------------------------------------------------------------
// What the documents must name, and must not cite.

test('every error code of the contract is documented in the README', () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  for (const { code } of require('../binding.js').contract().errorCodes) assert.ok(readme.includes(`\`${code}\``), `README.md does not mention ${code}`)
})

test('ARCHITECTURE.md cites no document its readers cannot open', () => {
  assert.deepEqual(fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8').split('\n').filter((line) => /\bSPEC\b|\u00a7/.test(line)), [])
})

// ---------------------------------------------------------------------------------------------
// What the types declare, the docs list: every option and every anomaly kind.

/** The field names of `interface name { ... }` in a .d.ts text (its top-level members only). */
function interfaceFields(text, name) {
  const start = text.indexOf(`export interface ${name} {`)
  assert.notEqual(start, -1, `no interface ${name}`)
  let depth = 0
  let at = text.indexOf('{', start)
  const open = at
  for (; at < text.length; at++) {
    if (text[at] === '{') depth++
    else if (text[at] === '}' && --depth === 0) break
  }
  const body = text.slice(open + 1, at).replace(/\/\*[\s\S]*?\*\//g, '')
  const fields = []
  let nested = 0
  for (const line of body.split('\n')) {
    const field = nested === 0 ? /^\s+(?:readonly\s+)?(\w+)\??:/.exec(line) : null
    if (field) fields.push(field[1])
    nested += (line.match(/[{(]/g) ?? []).length - (line.match(/[})]/g) ?? []).length
  }
  return fields
}

const typesOf = (file) => fs.readFileSync(path.join(ROOT, file), 'utf8')
const docOf = (file) => fs.readFileSync(path.join(ROOT, file), 'utf8')
/** The option names in the first column of a markdown table: | `name` | ... */
const tableNames = (text) => new Set([...text.matchAll(/^\| `([\w.-]+)`/gm)].map((match) => match[1]))

test('every option of the limiter types is a row of the README options table', () => {
  const types = typesOf('index.d.ts')
  const options = ['LimiterOptionsBase', 'BucketLimitOptions', 'QuotaAloneOptions'].flatMap((name) => interfaceFields(types, name))
  assert.ok(options.includes('suspendPolicy') && options.includes('capacity'), String(options))
  const readme = docOf('README.md')
  const table = tableNames(readme.slice(readme.indexOf('\n## Options\n'), readme.indexOf('\n## ', readme.indexOf('\n## Options\n') + 1)))
  assert.deepEqual(options.filter((option) => !table.has(option)), [])
})

test('every KeyedQuotaClock option beyond QuotaClock\'s is named in docs/keyed.md', () => {
  const options = interfaceFields(typesOf('index.d.ts'), 'KeyedOptions')
  assert.ok(options.includes('maxKeys') && options.includes('share'), String(options))
  const text = docOf('docs/keyed.md')
  assert.deepEqual(options.filter((option) => !text.includes(`\`${option}`)), [])
})

test('every share option is a row of the options table of docs/several-instances.md', () => {
  const options = interfaceFields(typesOf('index.d.ts'), 'ShareOptions')
  assert.ok(options.includes('bucket') && options.includes('leaseMs'), String(options))
  const table = tableNames(docOf('docs/several-instances.md'))
  assert.deepEqual(options.filter((option) => !table.has(option)), [])
})

test("every quotaAdmin option is named in docs/operating-quotas.md's heading and text", () => {
  const options = interfaceFields(typesOf('lib/shared.d.ts'), 'QuotaAdminOptions')
  assert.deepEqual(options, ['name', 'timeoutMs'])
  const text = docOf('docs/operating-quotas.md')
  for (const option of options) assert.ok(text.includes(`\`options.${option}\``) || text.includes(`\`${option}\``), option)
  assert.match(text, /^## From code: `quotaAdmin\(store, \{ name, timeoutMs \}\)`$/m)
})

test('every anomaly kind is a row of the table in docs/clocks.md and in the stats() example of docs/metrics.md, and the count is said right', () => {
  const union = /export type AnomalyKind =([\s\S]*?)\n\n/.exec(typesOf('index.d.ts'))[1]
  const kinds = [...union.matchAll(/'([\w-]+)'/g)].map((match) => match[1])
  assert.ok(kinds.includes('store-clock-step'), String(kinds))
  const clocks = tableNames(docOf('docs/clocks.md'))
  assert.deepEqual(kinds.filter((kind) => !clocks.has(kind)), [], 'docs/clocks.md')
  const metrics = docOf('docs/metrics.md')
  const example = /anomalies: \{([\s\S]*?)\}/.exec(metrics)[1]
  const listed = new Set([...example.matchAll(/'?([\w-]+)'?: \d+/g)].map((match) => match[1]))
  assert.deepEqual(kinds.filter((kind) => !listed.has(kind)), [], 'docs/metrics.md')
  const words = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten']
  for (const [, count] of metrics.matchAll(/\ball (\w+)(?: series|,)/g)) assert.equal(count, words[kinds.length], `docs/metrics.md says "all ${count}"`)
  assert.match(metrics, new RegExp(`all ${words[kinds.length]} series`))
})
