'use strict'

// The types of quota-clock-source/shared, checked the way a TypeScript user meets them:
// `tsc --noEmit --strict` (module nodenext) on files that import 'quota-clock-source/shared' by
// name, resolved through package.json "exports". shared-usage.ts / shared-usage-esm.mts use
// stand-ins of the clients' shapes; shared-clients.ts uses the real ioredis, node-redis and
// MongoDB driver types, so a store made from any of them fits `share.store`.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { checkTypeFiles } = require('./helpers/tsc')

const ROOT = path.resolve(__dirname, '..')
const FILES = ['shared-usage.ts', 'shared-usage-esm.mts', 'shared-clients.ts']

function compile(files, ...extra) {
  return checkTypeFiles(files, { extra })
}

describe('quota-clock-source/shared types (tsc --noEmit --strict, module nodenext)', () => {
  test('valid use compiles, with stand-ins and with the real clients, and every @ts-expect-error stays an error', () => {
    const { status, output } = compile(FILES)
    assert.equal(status, 0, `tsc failed:\n${output}`)
  })

  test("'quota-clock-source/shared' resolves to lib/shared.d.ts through package.json exports, from CommonJS and ES module files", () => {
    const { status, output } = compile(['shared-usage.ts', 'shared-usage-esm.mts'], '--explainFiles')
    assert.equal(status, 0, `tsc failed:\n${output}`)
    for (const file of ['shared-usage.ts', 'shared-usage-esm.mts']) {
      assert.match(output, new RegExp(`^lib/shared\\.d\\.ts\\r?\\n(\\s+.*\\r?\\n)*?\\s+Imported via 'quota-clock-source/shared' from file '__test__/types/${file.replace('.', '\\.')}'`, 'm'))
    }
  })

  test('every runtime export of lib/shared.js is declared in lib/shared.d.ts', () => {
    const declarations = fs.readFileSync(path.join(ROOT, 'lib', 'shared.d.ts'), 'utf8')
    const names = Object.keys(require('../lib/shared.js'))
    assert.deepEqual(names.sort(), ['mongoStore', 'quotaAdmin', 'redisStore'])
    for (const name of names) assert.match(declarations, new RegExp(`export function ${name}\\b`))
  })
})
