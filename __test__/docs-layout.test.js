'use strict'
// The README is short and starts with the two commands; the rest is in docs/, and every relative
// link between them (and to the repository's files) leads somewhere, anchors included.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
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

test(`README.md is at most ${README_MAX_LINES} lines, with the two commands first and a table of contents`, () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8')
  const lines = readme.trimEnd().split('\n')
  assert.ok(lines.length <= README_MAX_LINES, `README.md has ${lines.length} lines`)
  const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)[1].split('\n')
  assert.match(firstBlock[0], /^npm install && npm run demo\b/)
  assert.match(firstBlock[1], /^npm install && npm test\b/)
  assert.ok(readme.indexOf('```sh') < readme.indexOf('\n## '), 'the commands come before any section')
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
