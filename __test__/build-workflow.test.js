'use strict'

// The release workflow cannot run here; this checks that it says what it must: it parses, builds
// every target package.json declares, tests the built binaries on Node 18, 20 and 22, and
// publishes only from a version tag after every build and test passed.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const YAML = require('yaml')

const ROOT = path.resolve(__dirname, '..')
const WORKFLOW_PATH = path.join(ROOT, '.github', 'workflows', 'release.yml')
const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'))
const TARGETS = pkg.napi.targets
const NODE_VERSIONS = ['18', '20', '22']

function loadWorkflow() {
  const text = fs.readFileSync(WORKFLOW_PATH, 'utf8')
  const doc = YAML.parseDocument(text, { uniqueKeys: true })
  assert.deepEqual(doc.errors.map(String), [], 'release.yml is not valid YAML')
  assert.deepEqual(doc.warnings.map(String), [], 'release.yml parses with warnings')
  return doc.toJS()
}

const workflow = loadWorkflow()
const jobs = workflow.jobs

/** Every `run:` line of a job, joined. */
function runs(job) {
  return job.steps.filter((step) => typeof step.run === 'string').map((step) => step.run).join('\n')
}

/** Steps of a job that use an action whose name starts with `prefix`. */
function uses(job, prefix) {
  return job.steps.filter((step) => typeof step.uses === 'string' && step.uses.startsWith(prefix))
}

/** Names of the jobs that test built binaries: they download bindings and run node --test. */
function testJobNames() {
  return Object.keys(jobs).filter((name) => {
    const job = jobs[name]
    return uses(job, 'actions/download-artifact@').length > 0 && /node --test\b/.test(runs(job))
  })
}

describe('release workflow', () => {
  test('is a mapping with a name, triggers and jobs, and every job has steps or a runner', () => {
    assert.equal(typeof workflow.name, 'string')
    assert.ok(workflow.on, 'no triggers (`on:`)')
    assert.ok(jobs && Object.keys(jobs).length > 0, 'no jobs')
    for (const [name, job] of Object.entries(jobs)) {
      assert.ok(job['runs-on'], `job ${name} has no runs-on`)
      assert.ok(Array.isArray(job.steps) && job.steps.length > 0, `job ${name} has no steps`)
      for (const step of job.steps) {
        assert.ok(step.uses || step.run, `a step of job ${name} neither uses an action nor runs a command`)
      }
      for (const need of [job.needs ?? []].flat()) {
        assert.ok(jobs[need], `job ${name} needs '${need}', which is not a job`)
      }
    }
  })

  test('runs on pushes to main, on pull requests and on v* tags', () => {
    const push = workflow.on.push
    assert.ok(push, 'no push trigger')
    assert.ok(push.branches.includes('main'))
    assert.ok(push.tags.includes('v*'), 'pushing a version tag must run the workflow')
    assert.ok('pull_request' in workflow.on)
  })

  test("the build matrix covers exactly package.json's napi.targets, each with its --target", () => {
    const entries = jobs.build.strategy.matrix.settings
    const built = entries.map((entry) => entry.target)
    assert.deepEqual([...built].sort(), [...TARGETS].sort())
    assert.equal(new Set(built).size, built.length, 'a target is built twice')
    for (const entry of entries) {
      assert.match(entry.build, new RegExp(`--target ${entry.target}(\\s|$)`), `${entry.target} is built for another target`)
      assert.match(entry.build, /^npm run build -- /, `${entry.target}: build through the package's build script`)
      const os = entry.target.includes('apple-darwin') ? 'macos' : entry.target.includes('windows') ? 'windows' : 'ubuntu'
      assert.ok(entry.host.startsWith(os), `${entry.target} is built on ${entry.host}`)
      // napi-rs's conventions: glibc targets with its cross toolchain (an old glibc baseline),
      // musl with cargo-zigbuild (-x).
      if (entry.target.endsWith('-linux-gnu')) assert.match(entry.build, /--use-napi-cross/)
      if (entry.target.endsWith('-linux-musl')) assert.match(entry.build, / (-x|--cross-compile)\b/)
    }
    const zig = uses(jobs.build, 'mlugg/setup-zig@')
    assert.equal(zig.length, 1, 'the musl build needs zig')
    assert.match(zig[0].if, /musl/)
  })

  test('each build uploads its binary as bindings-<target>, and one build uploads the generated loader', () => {
    const uploads = uses(jobs.build, 'actions/upload-artifact@')
    const binding = uploads.find((step) => step.with.name === 'bindings-${{ matrix.settings.target }}')
    assert.ok(binding, 'no bindings-<target> upload')
    assert.match(binding.with.path, /\$\{\{ env\.APP_NAME \}\}\.\*\.node/)
    assert.equal(binding.with['if-no-files-found'], 'error')
    assert.equal(workflow.env.APP_NAME, pkg.napi.binaryName)
    const loader = uploads.find((step) => step.with.name === 'loader')
    assert.ok(loader, 'the main package ships binding.js and binding.d.ts (git-ignored): some build must upload them')
    assert.match(loader.with.path, /binding\.js/)
    assert.match(loader.with.path, /binding\.d\.ts/)
  })

  test('the JS tests run on the built binaries with Node 18, 20 and 22 on Linux (glibc), macOS and Windows', () => {
    const names = testJobNames()
    assert.ok(names.length > 0, 'no job tests the built binaries')
    const covered = new Map() // target -> Set of node versions
    for (const name of names) {
      const job = jobs[name]
      const matrix = job.strategy.matrix
      assert.deepEqual(matrix.node.map(String), NODE_VERSIONS, `job ${name} tests Node ${matrix.node}`)
      assert.ok([job.needs].flat().includes('build'), `job ${name} must need build`)
      const targets = matrix.settings ? matrix.settings.map((entry) => entry.target) : matrix.target
      for (const target of targets) {
        assert.ok(TARGETS.includes(target), `job ${name} tests ${target}, which is not built`)
        const versions = covered.get(target) ?? new Set()
        for (const node of matrix.node) versions.add(String(node))
        covered.set(target, versions)
      }
      // The tests run on the downloaded binary: no Rust toolchain, no rebuild.
      assert.ok(uses(job, 'dtolnay/rust-toolchain@').length === 0, `job ${name} installs Rust`)
      assert.doesNotMatch(runs(job), /npm (run )?build|napi build|npm test\b/, `job ${name} rebuilds the addon`)
      const downloads = uses(job, 'actions/download-artifact@').map((step) => step.with.name)
      assert.ok(downloads.some((name) => /^bindings-\$\{\{ matrix\.(settings\.)?target \}\}$/.test(name)), `job ${name} does not download its binary`)
      assert.ok(downloads.includes('loader'), `job ${name} does not download the generated loader`)
    }
    for (const target of ['x86_64-unknown-linux-gnu', 'x86_64-apple-darwin', 'aarch64-apple-darwin', 'x86_64-pc-windows-msvc']) {
      assert.deepEqual([...(covered.get(target) ?? [])].sort(), NODE_VERSIONS, `${target} is not tested on Node ${NODE_VERSIONS.join(', ')}`)
    }
  })

  test('publish runs only on a v* tag, after the Rust tests, every build and every test job', () => {
    const publish = jobs.publish
    assert.ok(publish, 'no publish job')
    assert.match(publish.if, /startsWith\(github\.ref, 'refs\/tags\/v'\)/)
    const needs = [publish.needs].flat()
    for (const name of ['build', 'rust', ...testJobNames()]) assert.ok(needs.includes(name), `publish does not need ${name}`)
    // Nothing else may publish.
    for (const [name, job] of Object.entries(jobs)) {
      if (name !== 'publish') assert.doesNotMatch(runs(job), /npm publish|napi pre-?publish/, `job ${name} publishes`)
    }
  })

  test('publish collects the binaries with napi artifacts, then npm publish (platform packages first, via prepublishOnly) with provenance', () => {
    const publish = jobs.publish
    assert.equal(publish.permissions['id-token'], 'write', 'provenance needs id-token: write')
    assert.equal(publish.permissions.contents, 'write', 'napi prepublish makes the GitHub release')
    const download = uses(publish, 'actions/download-artifact@').find((step) => step.with.path === 'artifacts')
    assert.ok(download, 'publish does not download the bindings into artifacts/')
    const script = runs(publish)
    const artifacts = script.search(/npm run artifacts|napi artifacts/)
    const published = script.search(/npm publish/)
    assert.ok(artifacts >= 0, 'publish does not run napi artifacts')
    assert.ok(published > artifacts, 'publish must move the binaries into npm/ before publishing')
    assert.match(script, /npm config set provenance true|npm publish[^\n]*--provenance/)
    assert.doesNotMatch(script, /_authToken=(?!\\?\$\{)/, 'a token is written into the workflow, not read from a secret')
    assert.equal(pkg.scripts.artifacts, 'napi artifacts')
    assert.equal(pkg.scripts.prepublishOnly, 'napi prepublish -t npm')
    assert.equal(pkg.scripts.version, 'napi version')
  })

  test('every action is pinned to a major version or a commit', () => {
    for (const [name, job] of Object.entries(jobs)) {
      for (const step of job.steps) {
        if (step.uses) assert.match(step.uses, /^[\w.-]+\/[\w./-]+@(v\d+[\w.]*|stable|[0-9a-f]{40})$/, `job ${name}: ${step.uses}`)
      }
    }
  })
})
