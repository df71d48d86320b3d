'use strict'
// The native addon: the generated loader (binding.js at the package root), or, when no binary
// fits this platform, an error that names the platform and says what to do.

function loadNativeBinding() {
  try {
    return require('../binding.js')
  } catch (error) {
    if (!(error instanceof Error) || !/^(Cannot find|Failed to load) native binding/.test(error.message)) throw error
    const { name, version, optionalDependencies = {}, napi = {} } = require('../package.json')
    const platform = hostPlatform()
    const binaryPackage = `${name}-${platform}`
    const binaryFile = `${napi.binaryName ?? name}.${platform}.node`
    const supported = Object.keys(optionalDependencies).map((dependency) => dependency.slice(name.length + 1))
    const override = process.env.NAPI_RS_NATIVE_LIBRARY_PATH
    const advice = [
      override ? `NAPI_RS_NATIVE_LIBRARY_PATH is set to ${JSON.stringify(override)}, which did not load (see the cause): it must be the absolute path of a ${binaryFile} built for this platform.` : null,
      supported.includes(platform)
        ? `Its binary ships in the optional dependency ${binaryPackage}, which is not installed (optional dependencies were omitted, or the lockfile was made on another platform): run \`npm install ${binaryPackage}@${version}\`, or delete node_modules and package-lock.json and run \`npm install\` again.`
        : `Prebuilt binaries exist for ${supported.join(', ')}.`,
      `Where no such package can be installed (not published yet, no registry, or another platform), build the addon in a clone of the repository with a Rust toolchain (\`npm install && npm run build\`), then install the clone (\`npm install <folder>\`), or tarballs of it and of its npm/${platform} folder with the binary copied in (\`npm pack\`), or set NAPI_RS_NATIVE_LIBRARY_PATH to the absolute path of the ${binaryFile} it wrote (the README's "Installing without a registry").`,
    ]
      .filter(Boolean)
      .join(' ')
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
