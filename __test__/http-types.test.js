'use strict'
// The types of quota-clock-source/http, checked the way a TypeScript user meets them: `tsc --noEmit
// --strict` on files that import 'quota-clock-source/http' by name (resolved through package.json
// "exports"), with Express 5's and Node's own types. Every `@ts-expect-error` in them must stay an
// error, so a type that accepts too much fails here too.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const FILES = ['http-usage.ts', 'http-usage-esm.mts']

const { checkTypeFiles } = require('./helpers/tsc')

function compile(...extra) {
  return checkTypeFiles(FILES, { compilerOptions: { types: ['node'], typeRoots: [path.join(ROOT, 'node_modules', '@types')] }, extra })
}

describe('quota-clock-source/http types (tsc --noEmit --strict)', () => {
  test("'quota-clock-source/http' resolves to lib/http.d.ts through package.json exports, and the examples compile", () => {
    const { status, output } = compile('--explainFiles')
    assert.equal(status, 0, output)
    assert.match(output, /^lib\/http\.d\.ts\r?\n\s+Imported via 'quota-clock-source\/http' from file '__test__\/types\/http-usage\.ts'/m)
    assert.match(output, /Imported via 'quota-clock-source\/http' from file '__test__\/types\/http-usage-esm\.mts'/)
  })

  test('the package.json exports subpath lists types first, then import and require', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
    assert.deepEqual(pkg.exports['./http'], { types: './lib/http.d.ts', import: './lib/http.mjs', require: './lib/http.js' })
    assert.equal(Object.keys(pkg.exports['./http'])[0], 'types')
  })

  test('every runtime export of the subpath is declared', () => {
    const declarations = fs.readFileSync(path.join(ROOT, 'lib', 'http.d.ts'), 'utf8')
    const names = Object.keys(require('../lib/http.js'))
    assert.deepEqual(names.sort(), ['clientKey', 'rateLimit'])
    for (const name of names) assert.match(declarations, new RegExp(`export function ${name}\\b`))
  })
})
