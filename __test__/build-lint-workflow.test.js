'use strict'
// The lint workflow cannot run here; this checks that it says what it must: it parses, runs on
// pushes to main and on pull requests, installs the locked dependencies with `npm ci`, has
// rustfmt and clippy, and runs `npm run lint` (which is what the lint script checks locally).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const YAML = require('yaml')

const ROOT = path.resolve(__dirname, '..')

function loadWorkflow(file) {
  const doc = YAML.parseDocument(fs.readFileSync(file, 'utf8'), { uniqueKeys: true })
  assert.deepEqual(doc.errors.map(String), [], `${path.basename(file)} is not valid YAML`)
  assert.deepEqual(doc.warnings.map(String), [], `${path.basename(file)} parses with warnings`)
  return doc.toJS()
}

const workflow = loadWorkflow(path.join(ROOT, '.github', 'workflows', 'lint.yml'))
const steps = Object.values(workflow.jobs).flatMap((job) => job.steps)
const runs = steps.filter((step) => typeof step.run === 'string').map((step) => step.run.trim())

test('the lint workflow runs on pushes to main and on pull requests', () => {
  assert.ok(workflow.on.push.branches.includes('main'))
  assert.ok('pull_request' in workflow.on)
})

test('it installs the locked dependencies with npm ci, then runs npm run lint', () => {
  const ci = runs.indexOf('npm ci')
  const lint = runs.indexOf('npm run lint')
  assert.ok(ci !== -1 && lint > ci, `runs: ${JSON.stringify(runs)}`)
})

test('it has a Node the napi-rs CLI accepts (20.17 or later), and rustfmt and clippy', () => {
  const node = steps.find((step) => typeof step.uses === 'string' && step.uses.startsWith('actions/setup-node@'))
  assert.ok(node, 'no setup-node step')
  const [major, minor = 0] = String(node.with['node-version']).split('.').map(Number)
  assert.ok(major > 20 || (major === 20 && minor >= 17), `node-version ${node.with['node-version']}`)
  const rust = steps.find((step) => typeof step.uses === 'string' && step.uses.startsWith('dtolnay/rust-toolchain@'))
  assert.ok(rust, 'no Rust toolchain step')
  const components = String(rust.with?.components ?? '').split(/[\s,]+/)
  assert.ok(components.includes('rustfmt') && components.includes('clippy'), `components: ${components}`)
})

test('npm run lint is what this workflow runs: fmt, clippy with and without default features, ESLint', () => {
  const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
  const lint = [scripts.lint, scripts['lint:rust'], scripts['lint:js']].join(' && ')
  for (const part of ['cargo fmt --check', 'cargo clippy --all-targets -- -D warnings', '--no-default-features', 'eslint']) assert.ok(lint.includes(part), `npm run lint lacks ${part}`)
})

test('.editorconfig is the root one: LF, UTF-8, a final newline, two-space indents, four for Rust', () => {
  const text = fs.readFileSync(path.join(ROOT, '.editorconfig'), 'utf8')
  assert.match(text, /^root = true$/m)
  for (const line of ['end_of_line = lf', 'charset = utf-8', 'insert_final_newline = true', 'indent_style = space', 'indent_size = 2']) assert.ok(text.includes(line), line)
  assert.match(text, /\[\*\.rs\]\nindent_size = 4/)
})
