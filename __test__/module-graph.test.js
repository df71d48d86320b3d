'use strict'
// The JS face's modules form no import cycle: each lib/ module can be read (and loaded) on its
// own terms, and the throttle gets the calendar from lib/calendar.js, never from the package entry.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const ENTRIES = ['index.js', ...fs.readdirSync(path.join(ROOT, 'lib'), { recursive: true }).filter((file) => /\.(c|m)?js$/.test(file)).map((file) => path.join('lib', file))]

/** The relative modules `file` requires or imports, as paths from the package root. */
function localDependencies(file) {
  const source = fs.readFileSync(path.join(ROOT, file), 'utf8')
  const specifiers = [...source.matchAll(/\brequire\(\s*(['"])(\.{1,2}\/[^'"]*)\1\s*\)|\bfrom\s+(['"])(\.{1,2}\/[^'"]*)\3/g)].map((match) => match[2] ?? match[4])
  return specifiers.map((specifier) => {
    const base = path.join(path.dirname(file), specifier)
    const resolved = [base, `${base}.js`, `${base}.json`, path.join(base, 'index.js')].find((candidate) => fs.existsSync(path.join(ROOT, candidate)) && fs.statSync(path.join(ROOT, candidate)).isFile())
    assert.ok(resolved, `${file} requires '${specifier}', which does not exist`)
    return path.normalize(resolved)
  })
}

const graph = new Map(ENTRIES.map((file) => [path.normalize(file), localDependencies(file)]))

/** Every cycle reachable in the graph, each as the list of files around it. */
function cycles() {
  const found = []
  const state = new Map() // file -> 'open' | 'done'
  const stack = []
  function visit(file) {
    if (state.get(file) === 'done') return
    if (state.get(file) === 'open') {
      found.push([...stack.slice(stack.indexOf(file)), file])
      return
    }
    state.set(file, 'open')
    stack.push(file)
    // The generated loader (binding.js) and package.json are leaves.
    for (const dependency of graph.get(file) ?? []) visit(dependency)
    stack.pop()
    state.set(file, 'done')
  }
  for (const file of graph.keys()) visit(file)
  return found
}

test('the walk finds a cycle when there is one (the check can fail)', () => {
  const saved = graph.get(path.normalize('lib/calendar.js'))
  graph.set(path.normalize('lib/calendar.js'), [...saved, 'index.js'])
  try {
    assert.ok(cycles().length > 0)
  } finally {
    graph.set(path.normalize('lib/calendar.js'), saved)
  }
})

test('no module of the JS face requires itself back, directly or through others', () => {
  assert.deepEqual(cycles().map((cycle) => cycle.join(' -> ')), [])
})

test('no lib/ module requires the package entry (index.js)', () => {
  for (const [file, dependencies] of graph) {
    if (file === 'index.js') continue
    assert.ok(!dependencies.includes('index.js'), `${file} requires index.js`)
  }
})

test('the throttle takes its calendar windows from lib/calendar.js', () => {
  assert.ok(graph.get(path.normalize('lib/throttle/index.js')).includes(path.normalize('lib/calendar.js')))
})
