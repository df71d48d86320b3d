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

// ---------------------------------------------------------------------------------------------
// Layers of lib/. A subpath folder (lib/http/, lib/throttle/, lib/shared/, lib/fastify/,
// lib/metrics/) sits on top of the face files at lib/'s level; its entry files (lib/http.js,
// lib/http.mjs) belong to it. A face file never imports from a subpath folder, so the folders,
// taken as units, import one way. A folder of the face's own (lib/share/: what the face's shared
// limiters are made of) is part of lib/'s level, not a subpath.

const LIB = path.join(ROOT, 'lib')
const FACE_FOLDERS = new Set(['share'])
const SUBPATH_FOLDERS = new Set(['http', 'shared', 'fastify', 'metrics', 'throttle', ...fs.readdirSync(LIB).filter((name) => fs.statSync(path.join(LIB, name)).isDirectory() && !FACE_FOLDERS.has(name))])

/** The unit of a lib/ file: its subpath folder ('lib/http' for lib/http/x.js and the entry lib/http.js), else 'lib'. */
function unitOf(file) {
  const parts = path.normalize(file).split(path.sep)
  if (parts[0] !== 'lib') return parts[0]
  if (parts.length > 2) return FACE_FOLDERS.has(parts[1]) ? 'lib' : `lib/${parts[1]}`
  const stem = parts[1].replace(/\.(d\.ts|c?js|mjs)$/, '')
  return SUBPATH_FOLDERS.has(stem) ? `lib/${stem}` : 'lib'
}

/** Imports from a face file (unit 'lib') into a subpath folder, as "from -> to". */
function faceFilesReachingUp(files) {
  const found = []
  for (const [file, dependencies] of files) {
    if (!file.startsWith(`lib${path.sep}`) || unitOf(file) !== 'lib') continue
    for (const dependency of dependencies) if (unitOf(dependency) !== 'lib' && dependency.startsWith(`lib${path.sep}`)) found.push(`${file} -> ${dependency}`)
  }
  return found
}

/** The graph of lib/'s units (each subpath folder, and lib/'s own level). */
function unitGraph(files) {
  const units = new Map()
  for (const [file, dependencies] of files) {
    if (!file.startsWith(`lib${path.sep}`)) continue
    const from = unitOf(file)
    if (!units.has(from)) units.set(from, new Set())
    for (const dependency of dependencies) {
      const to = unitOf(dependency)
      if (to !== from && dependency.startsWith(`lib${path.sep}`)) units.get(from).add(to)
    }
  }
  return units
}

function unitCycle(units) {
  const state = new Map()
  const visit = (unit, stack) => {
    if (state.get(unit) === 'done') return null
    if (state.get(unit) === 'open') return [...stack.slice(stack.indexOf(unit)), unit]
    state.set(unit, 'open')
    for (const next of units.get(unit) ?? []) {
      const found = visit(next, [...stack, unit])
      if (found) return found
    }
    state.set(unit, 'done')
    return null
  }
  for (const unit of units.keys()) {
    const found = visit(unit, [])
    if (found) return found
  }
  return null
}

test('no face file of lib/ imports from a subpath folder (lib/http, lib/shared, lib/fastify, lib/metrics, lib/throttle)', () => {
  assert.deepEqual(faceFilesReachingUp(graph), [])
  // The limiter constructors reach the middleware's facts at lib/'s level.
  for (const face of ['lib/quota-clock.js', 'lib/keyed.js']) assert.ok(graph.get(path.normalize(face)).includes(path.normalize('lib/limiter-facts.js')), face)
})

test("lib/'s subpath folders and its own level import one another one way (no cycle between them)", () => {
  const units = unitGraph(graph)
  assert.ok(units.get('lib/http').has('lib'), 'the middleware is built on the face files')
  assert.equal(unitCycle(units), null)
})

test('the layer checks fail on a face file that reaches up, and on a cycle between folders', () => {
  const broken = new Map(graph)
  broken.set(path.normalize('lib/keyed.js'), [...graph.get(path.normalize('lib/keyed.js')), path.normalize('lib/http/options.js')])
  assert.deepEqual(faceFilesReachingUp(broken), [`${path.normalize('lib/keyed.js')} -> ${path.normalize('lib/http/options.js')}`])
  assert.deepEqual(unitCycle(unitGraph(broken)), ['lib', 'lib/http', 'lib'])
  assert.equal(unitOf('lib/http.mjs'), 'lib/http', "a subpath's entry belongs to its folder")
})

test('bin/ uses the library through index.js, the public quota-clock-source/shared (lib/shared.js) and its own entry, lib/cli.js, and nothing else of lib/ (package.json, for its version, is data)', () => {
  const bin = fs.readdirSync(path.join(ROOT, 'bin')).filter((file) => file.endsWith('.js')).map((file) => path.join('bin', file))
  assert.ok(bin.length >= 1)
  const allowed = new Set(['index.js', path.normalize('lib/shared.js'), path.normalize('lib/cli.js'), 'package.json', ...bin])
  for (const file of bin) {
    for (const dependency of localDependencies(file)) assert.ok(allowed.has(dependency), `${file} requires ${dependency}`)
  }
})
