'use strict'
// The JS face's modules form no import cycle: each lib/ module can be read (and loaded) on its
// own terms, and the throttle gets the calendar from lib/time/calendar.js, never from the package
// entry. lib/ is laid out by concern, one folder each, and its folders import one another one way,
// in few floors.

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
  const saved = graph.get(path.normalize('lib/time/calendar.js'))
  graph.set(path.normalize('lib/time/calendar.js'), [...saved, 'index.js'])
  try {
    assert.ok(cycles().length > 0)
  } finally {
    graph.set(path.normalize('lib/time/calendar.js'), saved)
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

test('the throttle takes its calendar windows from lib/time/calendar.js', () => {
  assert.ok(graph.get(path.normalize('lib/throttle/index.js')).includes(path.normalize('lib/time/calendar.js')))
})

// ---------------------------------------------------------------------------------------------
// Layers of lib/. Every module sits in a folder of lib/, one per concern; at lib/'s top level
// there are only the package's entries (package.json "exports": lib/http.js, lib/http.mjs,
// lib/http.d.ts, and the same for shared, fastify and metrics), each belonging to the folder its
// implementation lives in (lib/shared.js to lib/stores/, lib/fastify.js to lib/http/).
//
// The face folders (lib/common/, lib/native/, lib/time/, lib/limiter/, lib/share/, lib/keyed/:
// what index.js's classes are made of) are, taken together, lib/'s level. The other folders
// (the subpaths' lib/http/, lib/stores/, lib/metrics/; lib/throttle/; lib/cli/, what bin/ uses)
// sit on top of it: a face file never imports from them, so these units import one way.
//
// And each folder, taken as a unit, imports the others one way too; its floor is 0 when it
// imports no other folder, else one above the highest floor it imports. lib/ has at most
// MAX_FLOORS floors.

const LIB = path.join(ROOT, 'lib')
const FACE_FOLDERS = new Set(['common', 'native', 'time', 'limiter', 'share', 'keyed'])
/** The folder each entry's implementation lives in, by the entry's name (package.json "exports"). */
const ENTRY_FOLDERS = { http: 'http', shared: 'stores', fastify: 'http', koa: 'http', hono: 'http', nestjs: 'http', metrics: 'metrics', otel: 'metrics' }
const ENTRY_FILES = new Set(Object.keys(ENTRY_FOLDERS).flatMap((name) => [`${name}.js`, `${name}.mjs`, `${name}.d.ts`]))
const MAX_FLOORS = 8

/** The files at lib/'s top level (of `names`, the names there) that are modules and not an entry's. */
function strayTopLevelFiles(names) {
  return names.filter((name) => /\.(c|m)?js$|\.d\.ts$/.test(name) && !ENTRY_FILES.has(name))
}

/** The folder of a lib/ file: 'lib/http' for lib/http/x.js and for the entries lib/http.js and lib/fastify.js; 'lib' for any other top-level file. */
function folderOf(file) {
  const parts = path.normalize(file).split(path.sep)
  if (parts[0] !== 'lib') return parts[0]
  if (parts.length > 2) return `lib/${parts[1]}`
  const stem = parts[1].replace(/\.(d\.ts|c?js|mjs)$/, '')
  return Object.hasOwn(ENTRY_FOLDERS, stem) ? `lib/${ENTRY_FOLDERS[stem]}` : 'lib'
}

/** The unit of a lib/ file for the face check: 'lib' for a face folder's file, else its folder ('lib/http' for lib/http/x.js and the entry lib/http.js). */
function unitOf(file) {
  const folder = folderOf(file)
  return FACE_FOLDERS.has(folder.slice('lib/'.length)) ? 'lib' : folder
}

/** Imports from a face file (unit 'lib') into a folder on top of the face, as "from -> to". */
function faceFilesReachingUp(files) {
  const found = []
  for (const [file, dependencies] of files) {
    if (!file.startsWith(`lib${path.sep}`) || unitOf(file) !== 'lib') continue
    for (const dependency of dependencies) if (unitOf(dependency) !== 'lib' && dependency.startsWith(`lib${path.sep}`)) found.push(`${file} -> ${dependency}`)
  }
  return found
}

/** The graph of lib/'s units, as `unit` names them (by default: the face as one, and each folder on top of it). */
function unitGraph(files, unit = unitOf) {
  const units = new Map()
  for (const [file, dependencies] of files) {
    if (!file.startsWith(`lib${path.sep}`)) continue
    const from = unit(file)
    if (!units.has(from)) units.set(from, new Set())
    for (const dependency of dependencies) {
      const to = unit(dependency)
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

/** Each unit's floor in an acyclic unit graph: 0 when it imports no other unit, else one above the highest it imports. */
function floors(units) {
  const floor = new Map()
  const of = (unit) => {
    if (!floor.has(unit)) floor.set(unit, Math.max(-1, ...[...(units.get(unit) ?? [])].map(of)) + 1)
    return floor.get(unit)
  }
  for (const unit of units.keys()) of(unit)
  return floor
}

/** How many floors an acyclic unit graph has. */
function floorCount(units) {
  return Math.max(-1, ...floors(units).values()) + 1
}

test("lib/'s top level holds only the package's entries (package.json \"exports\"), and every module sits in a folder", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  const exported = Object.values(pkg.exports).flatMap((target) => (typeof target === 'string' ? [target] : Object.values(target)))
  const entries = exported.filter((target) => target.startsWith('./lib/')).map((target) => target.slice('./lib/'.length))
  assert.deepEqual([...ENTRY_FILES].sort(), [...entries].sort(), 'the entries are the exports under lib/')
  const names = fs.readdirSync(LIB, { withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => entry.name)
  assert.deepEqual(strayTopLevelFiles(names), [])
})

test(`lib/'s folders import one another one way, in at most ${MAX_FLOORS} floors`, () => {
  const folders = unitGraph(graph, folderOf)
  assert.equal(unitCycle(folders), null)
  const floor = floors(folders)
  assert.ok(floorCount(folders) <= MAX_FLOORS, `${floorCount(folders)} floors: ${JSON.stringify(Object.fromEntries(floor))}`)
  assert.equal(floor.get('lib/common'), 0, 'lib/common/ imports no other folder')
  for (const folder of FACE_FOLDERS) assert.ok(floor.has(`lib/${folder}`), `lib/${folder}/ exists`)
})

test('the folder checks fail on a module at the top level, a cycle between folders and too many floors', () => {
  assert.deepEqual(strayTopLevelFiles(['http.js', 'http.mjs', 'http.d.ts', 'shared.d.ts', 'keyed.js', 'keyed.d.ts', 'README.md']), ['keyed.js', 'keyed.d.ts'])
  assert.equal(folderOf('lib/shared.mjs'), 'lib/stores', "an entry belongs to its implementation's folder")
  assert.equal(folderOf('lib/keyed.js'), 'lib', 'a stray top-level module is a unit of its own')
  const broken = new Map(graph)
  broken.set(path.normalize('lib/common/validate.js'), [...graph.get(path.normalize('lib/common/validate.js')), path.normalize('lib/native/errors.js')])
  assert.deepEqual([...new Set(unitCycle(unitGraph(broken, folderOf)))].sort(), ['lib/common', 'lib/native'])
  const chain = new Map(Array.from({ length: MAX_FLOORS + 1 }, (_, i) => [path.join('lib', `f${i}`, 'x.js'), i === 0 ? [] : [path.join('lib', `f${i - 1}`, 'x.js')]]))
  assert.equal(floorCount(unitGraph(chain, folderOf)), MAX_FLOORS + 1)
})

test('no face file of lib/ imports from a folder on top of the face (lib/http, lib/stores, lib/metrics, lib/throttle, lib/cli)', () => {
  assert.deepEqual(faceFilesReachingUp(graph), [])
  // The limiter constructors reach the middleware's facts in a face folder (lib/limiter/).
  for (const face of ['lib/limiter/quota-clock.js', 'lib/keyed/keyed.js']) assert.ok(graph.get(path.normalize(face)).includes(path.normalize('lib/limiter/limiter-facts.js')), face)
})

test("lib/'s folders on top of the face and the face import one another one way (no cycle between them)", () => {
  const units = unitGraph(graph)
  assert.ok(units.get('lib/http').has('lib'), 'the middleware is built on the face files')
  assert.equal(unitCycle(units), null)
})

test('the layer checks fail on a face file that reaches up, and on a cycle between folders', () => {
  const broken = new Map(graph)
  broken.set(path.normalize('lib/keyed/keyed.js'), [...graph.get(path.normalize('lib/keyed/keyed.js')), path.normalize('lib/http/options.js')])
  assert.deepEqual(faceFilesReachingUp(broken), [`${path.normalize('lib/keyed/keyed.js')} -> ${path.normalize('lib/http/options.js')}`])
  assert.deepEqual([...new Set(unitCycle(unitGraph(broken)))].sort(), ['lib', 'lib/http'])
  assert.equal(unitOf('lib/http.mjs'), 'lib/http', "a subpath's entry belongs to its folder")
  assert.equal(unitOf('lib/fastify.js'), 'lib/http', 'the Fastify plugin is an adapter of the middleware')
})

test('bin/ uses the library through index.js, the public quota-clock-source/shared (lib/shared.js) and its own entry, lib/cli/index.js, and nothing else of lib/ (package.json, for its version, is data)', () => {
  const bin = fs.readdirSync(path.join(ROOT, 'bin')).filter((file) => file.endsWith('.js')).map((file) => path.join('bin', file))
  assert.ok(bin.length >= 1)
  const allowed = new Set(['index.js', path.normalize('lib/shared.js'), path.normalize('lib/cli/index.js'), 'package.json', ...bin])
  for (const file of bin) {
    for (const dependency of localDependencies(file)) assert.ok(allowed.has(dependency), `${file} requires ${dependency}`)
  }
})
