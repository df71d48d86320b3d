'use strict'
// The types of quota-clock-source/koa, /hono, /nestjs and /otel, checked the way a TypeScript user
// meets them: `tsc --noEmit --strict` on files that import each subpath by name (resolved through
// package.json "exports"), CJS and ESM. Every `@ts-expect-error` in them must stay an error.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { checkTypeFiles } = require('./helpers/tsc')

const ROOT = path.resolve(__dirname, '..')
const SUBPATHS = ['koa', 'hono', 'nestjs', 'otel']

function compile(files) {
  return checkTypeFiles(files, { compilerOptions: { types: ['node'], typeRoots: [path.join(ROOT, 'node_modules', '@types')], experimentalDecorators: true } })
}

describe('the framework adapters and OpenTelemetry types (tsc --noEmit --strict)', () => {
  for (const subpath of SUBPATHS) {
    test(`quota-clock-source/${subpath}: a strict user's code compiles, and what it must refuse does not`, () => {
      const { status, output } = compile([`${subpath}-usage.ts`])
      assert.equal(status, 0, output)
    })
  }

  test('the ES module faces compile under --strict', () => {
    const { status, output } = compile(['frameworks-usage-esm.mts'])
    assert.equal(status, 0, output)
  })

  test('package.json exports each subpath with types first, then import and require, and each runtime export is declared', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
    for (const subpath of SUBPATHS) {
      assert.deepEqual(pkg.exports[`./${subpath}`], { types: `./lib/${subpath}.d.ts`, import: `./lib/${subpath}.mjs`, require: `./lib/${subpath}.js` })
      const declarations = fs.readFileSync(path.join(ROOT, 'lib', `${subpath}.d.ts`), 'utf8')
      for (const name of Object.keys(require(`../lib/${subpath}.js`))) assert.match(declarations, new RegExp(`export (function|class) ${name}\\b`), `${subpath}: ${name}`)
    }
  })
})
