'use strict'
// Every code block in README.md and docs/*.md runs as written.
//
// - ```js blocks run as CommonJS programs, ```mjs blocks as ES modules, each in a child process of
//   its own (in a fresh folder under os.tmpdir(), where 'quota-clock-source' is this checkout and
//   every devDependency resolves), and must exit 0 within 30 s with nothing on stderr.
// - ```ts blocks are type-checked together with `tsc --strict --module nodenext`.
// - A marker, an HTML comment on the line before the opening fence, changes that:
//     <!-- doc-test: until "listening on" -->   the program starts a server: it passes once it
//                                               prints that text (it gets PORT=0), then is killed
//     <!-- doc-test: fragment -->               not a whole program (a signature, the body of a
//                                               function): not run; keep these few
// - Every fence names its language, one of LANGUAGES; sh, console, json, http and text blocks are
//   not JavaScript and are not run (the command's console blocks are checked by cli.test.js).

const { describe, test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { runTsc } = require('./helpers/tsc')

const ROOT = path.resolve(__dirname, '..')
const DOCS = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((file) => file.endsWith('.md')).map((file) => `docs/${file}`)]
const LANGUAGES = ['js', 'mjs', 'ts', 'sh', 'console', 'json', 'http', 'text']
const MAX_FRAGMENTS = 3
const TIMEOUT_MS = 30_000

/** The fenced blocks of a markdown text: { lang, code, line (1-based, the opening fence), marker }. */
function codeBlocks(markdown) {
  const lines = markdown.split('\n')
  const blocks = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i])
    if (!open) continue
    const close = lines.findIndex((line, j) => j > i && /^```\s*$/.test(line))
    assert.notEqual(close, -1, `the code block at line ${i + 1} is not closed`)
    let previous = i - 1
    while (previous >= 0 && lines[previous].trim() === '') previous--
    const comment = previous >= 0 ? /^<!--\s*doc-test:\s*(.*?)\s*-->$/.exec(lines[previous].trim()) : null
    blocks.push({ lang: open[1], code: lines.slice(i + 1, close).join('\n') + '\n', line: i + 1, marker: comment ? parseMarker(comment[1], i + 1) : null })
    i = close
  }
  return blocks
}

function parseMarker(text, line) {
  if (text === 'fragment') return { kind: 'fragment' }
  const until = /^until\s+"([^"]+)"$/.exec(text)
  if (until) return { kind: 'until', text: until[1] }
  throw new Error(`line ${line}: unknown doc-test marker "${text}" (use \`fragment\` or \`until "text"\`)`)
}

/** A folder whose node_modules has this package and every installed dependency, by symlink. */
function makeProject() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'qcs-doc-blocks-'))
  const modules = path.join(dir, 'node_modules')
  fs.mkdirSync(modules)
  for (const entry of fs.readdirSync(path.join(ROOT, 'node_modules'))) {
    if (entry.startsWith('.')) continue
    fs.symlinkSync(path.join(ROOT, 'node_modules', entry), path.join(modules, entry), 'dir')
  }
  fs.symlinkSync(ROOT, path.join(modules, 'quota-clock-source'), 'dir')
  return dir
}

function childEnv() {
  const env = { ...process.env, PORT: '0', HOST: '127.0.0.1' }
  for (const key of ['NODE_OPTIONS', 'NODE_TEST_CONTEXT', 'MONGODB_URI']) delete env[key]
  return env
}

/**
 * Runs `code` as `file` in a fresh folder of `project`. Resolves { ok, why, output }: ok when it
 * exits 0 with an empty stderr, or (with an `until` marker) once its output has the ready text.
 */
function runBlock(project, file, code, marker) {
  const dir = fs.mkdtempSync(path.join(project, 'block-'))
  fs.writeFileSync(path.join(dir, file), code)
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [file], { cwd: dir, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let settled = false
    const finish = (ok, why) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      resolve({ ok, why, output: `stdout:\n${stdout}\nstderr:\n${stderr}` })
    }
    const timer = setTimeout(() => finish(false, `did not ${marker ? `print "${marker.text}"` : 'exit'} within ${TIMEOUT_MS} ms`), TIMEOUT_MS)
    const onData = () => {
      if (marker?.kind === 'until' && `${stdout}${stderr}`.includes(marker.text)) finish(true, 'ready')
    }
    child.stdout.on('data', (chunk) => {
      stdout += chunk
      onData()
    })
    child.stderr.on('data', (chunk) => {
      stderr += chunk
      onData()
    })
    child.on('close', (code, signal) => {
      if (marker?.kind === 'until') finish(false, `exited (code ${code}, signal ${signal}) before it printed "${marker.text}"`)
      else if (code !== 0) finish(false, `exited with code ${code}${signal ? `, signal ${signal}` : ''}`)
      else if (stderr !== '') finish(false, 'wrote to stderr')
      else finish(true, 'exited 0')
    })
  })
}

const ALL = DOCS.flatMap((doc) => codeBlocks(fs.readFileSync(path.join(ROOT, doc), 'utf8')).map((block) => ({ doc, ...block })))
const name = (block) => `${block.doc}:${block.line}`

let project
before(() => {
  project = makeProject()
})
after(() => {
  if (project) fs.rmSync(project, { recursive: true, force: true })
})

describe('the check itself (it can fail)', () => {
  test('blocks, their languages and their markers are found', () => {
    const blocks = codeBlocks('text\n\n<!-- doc-test: fragment -->\n```js\na()\n```\n\n```mjs\nb()\n```\n<!-- doc-test: until "ready" -->\n\n```js\nc()\n```\n')
    assert.deepEqual(
      blocks.map(({ lang, code, marker }) => ({ lang, code, marker })),
      [
        { lang: 'js', code: 'a()\n', marker: { kind: 'fragment' } },
        { lang: 'mjs', code: 'b()\n', marker: null },
        { lang: 'js', code: 'c()\n', marker: { kind: 'until', text: 'ready' } },
      ],
    )
    assert.throws(() => codeBlocks('<!-- doc-test: skip -->\n```js\nx\n```\n'), /unknown doc-test marker/)
  })

  test('a block that throws, writes to stderr, mixes require with top-level await, or never prints its ready line fails', async () => {
    assert.equal((await runBlock(project, 'throws.cjs', "throw new Error('no')\n", null)).ok, false)
    assert.equal((await runBlock(project, 'warns.cjs', "console.error('careful')\n", null)).ok, false)
    assert.equal((await runBlock(project, 'await.cjs', "const fs = require('node:fs')\nawait Promise.resolve(fs)\n", null)).ok, false)
    assert.equal((await runBlock(project, 'quiet.cjs', "setTimeout(() => {}, 100)\n", { kind: 'until', text: 'listening on' })).ok, false)
    assert.equal((await runBlock(project, 'fine.cjs', "require('quota-clock-source')\n", null)).ok, true)
  })

  test('a TypeScript block with a type error fails the type check', () => {
    const dir = fs.mkdtempSync(path.join(project, 'ts-broken-'))
    fs.writeFileSync(path.join(dir, 'broken.ts'), "import { QuotaClock } from 'quota-clock-source'\nnew QuotaClock({ capacity: '10', refillPerSecond: 1, suspendPolicy: 'ignore' })\n")
    const { status, output } = typeCheck(dir, ['broken.ts'])
    assert.notEqual(status, 0, output)
    assert.match(output, /broken\.ts\(2,/)
  })
})

/** tsc --strict --module nodenext over `files` in `dir`. */
function typeCheck(dir, files) {
  fs.writeFileSync(
    path.join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022'], types: ['node'], skipLibCheck: true },
      files,
    }),
  )
  return runTsc(['-p', path.join(dir, 'tsconfig.json'), '--pretty', 'false'], dir)
}

describe('the documents', () => {
  test('every fence names a known language', () => {
    const unknown = ALL.filter((block) => !LANGUAGES.includes(block.lang)).map((block) => `${name(block)} \`\`\`${block.lang}`)
    assert.deepEqual(unknown, [], `languages: ${LANGUAGES.join(', ')}`)
  })

  test(`few blocks are fragments (at most ${MAX_FRAGMENTS}), and only JavaScript ones are marked`, () => {
    const fragments = ALL.filter((block) => block.marker?.kind === 'fragment')
    assert.ok(fragments.length <= MAX_FRAGMENTS, `fragments: ${fragments.map(name).join(', ')}`)
    const marked = ALL.filter((block) => block.marker && !['js', 'mjs'].includes(block.lang))
    assert.deepEqual(marked.map(name), [], 'a marker on a block that is not run')
  })

  test('the README and docs have runnable JavaScript and TypeScript blocks', () => {
    assert.ok(ALL.filter((block) => block.lang === 'js' || block.lang === 'mjs').length >= 8)
    assert.ok(ALL.some((block) => block.lang === 'ts'))
  })
})

describe('every JavaScript block runs as written', () => {
  for (const block of ALL.filter((b) => (b.lang === 'js' || b.lang === 'mjs') && b.marker?.kind !== 'fragment')) {
    test(`${name(block)} (${block.lang}${block.marker ? `, until "${block.marker.text}"` : ''})`, async () => {
      const file = `${block.doc.replace(/[/.]/g, '-')}-L${block.line}.${block.lang === 'mjs' ? 'mjs' : 'cjs'}`
      const result = await runBlock(project, file, block.code, block.marker)
      assert.ok(result.ok, `${name(block)} ${result.why}\n${result.output}`)
    })
  }
})

test('every TypeScript block type-checks with tsc --strict --module nodenext', () => {
  const blocks = ALL.filter((block) => block.lang === 'ts')
  const dir = fs.mkdtempSync(path.join(project, 'ts-'))
  const files = blocks.map((block) => {
    const file = `${block.doc.replace(/[/.]/g, '-')}-L${block.line}.ts`
    // Each block is a module of its own (its names do not clash with another block's).
    fs.writeFileSync(path.join(dir, file), /^\s*(import|export)\b/m.test(block.code) ? block.code : `${block.code}export {}\n`)
    return file
  })
  const { status, output } = typeCheck(dir, files)
  assert.equal(status, 0, output)
})
