'use strict'
// What users read (the README, docs/, the types, the shipped JS and the command's help) cites no
// document they cannot see: no "SPEC", no bare section sign and number (an RFC's section, "RFC
// 9651" then the sign and "3.3.1", is fine). The tests cite no section either: they are named by
// behaviour. The sign is written here as an escape, so that this file has none.

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

