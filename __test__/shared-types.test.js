'use strict'

// The types of quota-clock-source/shared, checked the way a TypeScript user meets them:
// `tsc --noEmit --strict` (module nodenext) on files that import 'quota-clock-source/shared' by
// name, resolved through package.json "exports". shared-usage.ts / shared-usage-esm.mts use
// stand-ins of the clients' shapes; shared-clients.ts uses the real ioredis, node-redis and
// MongoDB driver types, so a store made from any of them fits `share.store`.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ROOT = path.resolve(__dirname, '..')
const TYPES_DIR = path.join(__dirname, 'types')
const FILES = ['shared-usage.ts', 'shared-usage-esm.mts', 'shared-clients.ts']

function tscScript() {
  const manifestPath = require.resolve('typescript/package.json', { paths: [ROOT] })
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'))
  return path.join(path.dirname(manifestPath), typeof manifest.bin === 'string' ? manifest.bin : manifest.bin.tsc)
}

function compile(files, ...extra) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-shared-types-'))
  try {
    const project = path.join(dir, 'tsconfig.json')
    fs.writeFileSync(project, JSON.stringify({ extends: path.join(TYPES_DIR, 'tsconfig.json'), files: files.map((file) => path.join(TYPES_DIR, file)) }))
    const result = spawnSync(process.execPath, [tscScript(), '-p', project, '--noEmit', '--strict', '--pretty', 'false', ...extra], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 120_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    if (result.error) throw result.error
    return { status: result.status, output: `${result.stdout}${result.stderr}` }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
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
    assert.deepEqual(names.sort(), ['mongoStore', 'redisStore'])
    for (const name of names) assert.match(declarations, new RegExp(`export function ${name}\\b`))
  })
})
