'use strict'
// The native addon: the generated loader (binding.js at the package root), or, when no binary
// fits this platform, an error that names the platform and says what to do.

function loadNativeBinding() {
  try {
    return require('../binding.js')
  } catch (error) {
    if (!(error instanceof Error) || !/^(Cannot find|Failed to load) native binding/.test(error.message)) throw error
    const { name, version, optionalDependencies = {} } = require('../package.json')
    const platform = hostPlatform()
    const binaryPackage = `${name}-${platform}`
    const supported = Object.keys(optionalDependencies).map((dependency) => dependency.slice(name.length + 1))
    const advice = supported.includes(platform)
      ? `Its binary ships in the optional dependency ${binaryPackage}, which is not installed (optional dependencies were omitted, or the lockfile was made on another platform): run \`npm install ${binaryPackage}@${version}\`, or delete node_modules and package-lock.json and run \`npm install\` again.`
      : `Prebuilt binaries exist for ${supported.join(', ')}. Elsewhere, build from source with a Rust toolchain (\`npm run build\` in a clone of the repository) and set NAPI_RS_NATIVE_LIBRARY_PATH to the .node file it writes.`
    const wrapped = new Error(`${name}: no native binary for ${platform} (Node ${process.version}). ${advice}`)
    wrapped.code = 'ERR_NATIVE_BINDING_NOT_FOUND'
    wrapped.cause = error
    throw wrapped
  }
}

/** napi-rs's name for this platform: linux-x64-gnu, linux-x64-musl, darwin-arm64, win32-x64-msvc... */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null
  return `linux-${arch}-${report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`
}

module.exports = loadNativeBinding()
