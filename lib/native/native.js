'use strict'
// The native addon: the generated loader (binding.js at the package root), or, when no binary
// fits this platform, an error that names the platform and says what to do, in a few lines.

// Set to 1, the load error carries the loader's own errors as its printed `cause`.
const DEBUG_VARIABLE = 'QUOTA_CLOCK_DEBUG_LOAD'

function loadNativeBinding() {
  try {
    return require('../../binding.js')
  } catch (error) {
    if (!(error instanceof Error) || !/^(Cannot find|Failed to load) native binding/.test(error.message)) throw error
    const { name, version, optionalDependencies = {}, napi = {} } = require('../../package.json')
    const platform = hostPlatform()
    const binaryPackage = `${name}-${platform}`
    const binaryFile = `${napi.binaryName ?? name}.${platform}.node`
    const supported = Object.keys(optionalDependencies).map((dependency) => dependency.slice(name.length + 1))
    const override = process.env.NAPI_RS_NATIVE_LIBRARY_PATH
    const lines = [
      `${name}: no native binary for ${platform} (Node ${process.version}).`,
      override ? `NAPI_RS_NATIVE_LIBRARY_PATH is set to ${JSON.stringify(override)}, which did not load: it must be the absolute path of a ${binaryFile} built for this platform.` : null,
      supported.includes(platform)
        ? `Its binary ships in the optional dependency ${binaryPackage}, which is not installed (optional dependencies omitted, or a lockfile made on another platform): run \`npm install ${binaryPackage}@${version}\`, or delete node_modules and package-lock.json and run \`npm install\` again.`
        : `Prebuilt binaries exist for ${supported.join(', ')}.`,
      `Without a registry: build the addon in a clone with a Rust toolchain (\`npm install && npm run build\`), then install the clone (\`npm install <folder>\`), or tarballs of it and of its npm/${platform} folder with the binary copied in (\`npm pack\`), or set NAPI_RS_NATIVE_LIBRARY_PATH to the absolute path of the ${binaryFile} it wrote (the README's "Installing without a registry").`,
      `Why each way to load it failed: error.details, or run with ${DEBUG_VARIABLE}=1.`,
    ]
    // Short enough to read where Node prints it: the loader's tried paths and their causes (dozens
    // of lines) are kept in `details`, which Node does not print, unless DEBUG_VARIABLE asks.
    const stackTraceLimit = Error.stackTraceLimit
    Error.stackTraceLimit = 2
    const wrapped = new Error(lines.filter(Boolean).join('\n'))
    Error.stackTraceLimit = stackTraceLimit
    wrapped.code = 'ERR_NATIVE_BINDING_NOT_FOUND'
    Object.defineProperty(wrapped, 'details', { value: error, enumerable: false, configurable: true, writable: true })
    if (process.env[DEBUG_VARIABLE] === '1') wrapped.cause = error
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
