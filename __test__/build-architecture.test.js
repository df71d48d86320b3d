'use strict'
// ARCHITECTURE.md stays the map of the code: it names every module of the Rust core, of the
// binding and of lib/'s face folders (a module added without its row fails here), keeps its marked
// sections for the work to come (that it cites no document a reader cannot open is docs.test.js's).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const TEXT = fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8')

/** The module names of a Rust source folder: its files and its folders (mod.rs and lib.rs aside). */
function rustModules(dir) {
  return fs
    .readdirSync(path.join(ROOT, dir), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() || (entry.name.endsWith('.rs') && !['lib.rs', 'mod.rs', 'properties.rs'].includes(entry.name)))
    .map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name.replace(/\.rs$/, '')))
}

/** The names in the first column of the tables under `heading` (up to the next heading of its level or above). */
function tableNames(heading) {
  const start = TEXT.indexOf(`\n${heading}\n`)
  assert.ok(start >= 0, `no section ${heading}`)
  const level = heading.match(/^#+/)[0].length
  const rest = TEXT.slice(start + heading.length + 2)
  const end = rest.search(new RegExp(`\\n#{1,${level}} `))
  const section = end < 0 ? rest : rest.slice(0, end)
  const names = new Set()
  for (const line of section.split('\n')) {
    const cell = line.match(/^\| ([^|]+) \|/)
    if (cell) for (const name of cell[1].matchAll(/`([^`]+)`/g)) names.add(name[1])
  }
  return names
}

test('the core table names every module of the core', () => {
  const names = tableNames('### The core (`src/`, all but `src/napi/`)')
  const missing = rustModules('src').filter((name) => name !== 'napi/' && !names.has(name))
  assert.deepEqual(missing, [])
})

test("the binding's table names every module of src/napi/", () => {
  const names = tableNames('### The binding (`src/napi/`)')
  assert.deepEqual(rustModules('src/napi').filter((name) => !names.has(name)), [])
})

test("the JS face's table names every folder and entry at lib/'s top level, and every file of the face's folders", () => {
  const names = tableNames('### The JS face (`lib/`, `index.js`)')
  const listed = (name) => [...names].some((entry) => entry === name || entry === name.replace(/\.js$/, '') || entry === `${name}/`)
  const lib = fs.readdirSync(path.join(ROOT, 'lib'), { withFileTypes: true })
  const top = lib.filter((entry) => entry.isDirectory() || /\.js$/.test(entry.name)).map((entry) => entry.name)
  const faceFolders = ['common', 'native', 'time', 'limiter', 'share', 'keyed']
  const faceFiles = faceFolders.flatMap((folder) => fs.readdirSync(path.join(ROOT, 'lib', folder)).filter((name) => name.endsWith('.js')).map((name) => `${folder}/${name}`))
  assert.ok(faceFiles.length > 20)
  assert.deepEqual([...top, ...faceFiles].filter((name) => !listed(name)), [])
})

test("the command line's table names every file of bin/", () => {
  const names = tableNames('### The command line (`bin/`)')
  const missing = fs.readdirSync(path.join(ROOT, 'bin')).filter((name) => name.endsWith('.js') && !names.has(name))
  assert.deepEqual(missing, [])
})

test('it shows the round trip and the resume path, and keeps the sections for shared quotas and the zone', () => {
  for (const heading of ['## A `tryConsume` round trip', '## When the native side needs JavaScript: the resume path', '## Where each kind of rule lives', '## Adding an option, end to end', '## Shared quotas', '## Zone']) {
    assert.ok(TEXT.includes(`\n${heading}\n`), heading)
  }
  for (const status of ['needsReadings', 'needsReader', 'needsPolicy']) assert.match(TEXT, new RegExp(`\\| \`${status}\` \\|`))
})

test('"Where each kind of rule lives" names, for every rule, its code and tests that exist', () => {
  const heading = '## Where each kind of rule lives'
  const start = TEXT.indexOf(`\n${heading}\n`)
  assert.ok(start >= 0, `no section ${heading}`)
  const rest = TEXT.slice(start + heading.length + 2)
  const section = rest.slice(0, rest.search(/\n## /))
  const rows = section.split('\n').filter((line) => line.startsWith('| ') && !line.startsWith('| rule |'))
  assert.ok(rows.length >= 15, `${rows.length} rules`)
  const missing = []
  for (const row of rows) {
    const cells = row.split(' | ')
    assert.equal(cells.length, 3, `three columns: ${row}`)
    const tests = [...cells[2].matchAll(/`([^`]+)`/g)].map((match) => match[1])
    assert.ok(tests.length > 0, `no tests named for: ${cells[0]}`)
    for (const name of tests) {
      const file = /^[a-z][a-z-]*$/.test(name) ? path.join('__test__', `${name}.test.js`) : name.split(' ')[0]
      if (/^(src|tests|__test__)\//.test(file) && !fs.existsSync(path.join(ROOT, file))) missing.push(name)
    }
  }
  assert.deepEqual(missing, [], 'tests named that do not exist')
})
