'use strict'
// Preloaded (`node --require`) into a test process that runs under an emulator or another
// dynamic loader (`npm run test:platforms`): a child started with `process.execPath` is started
// the same way, as the host's binfmt handler would do for a foreign binary. EMULATED_NODE is a
// JSON array: the command that runs this platform's node, the node binary last.
const childProcess = require('node:child_process')

const prefix = JSON.parse(process.env.EMULATED_NODE)
const self = process.execPath

/** Whether `file` is this platform's node (under a foreign loader, execPath is the loader). */
function isNode(file) {
  return file === self || file === prefix[prefix.length - 1]
}

function rewrite(file, args) {
  return isNode(file) ? [prefix[0], [...prefix.slice(1), ...args]] : [file, args]
}

// spawn, fork, execFile and exec all start through ChildProcess.prototype.spawn.
const { spawn } = childProcess.ChildProcess.prototype
childProcess.ChildProcess.prototype.spawn = function (options) {
  if (options && isNode(options.file) && Array.isArray(options.args)) {
    const [file, args] = rewrite(options.file, options.args.slice(1))
    options = { ...options, file, args: [file, ...args] }
  }
  return spawn.call(this, options)
}

for (const name of ['spawnSync', 'execFileSync']) {
  const original = childProcess[name]
  childProcess[name] = function (file, args, options) {
    if (Array.isArray(args)) {
      const [command, rest] = rewrite(file, args)
      return original.call(this, command, rest, options)
    }
    if (isNode(file)) {
      const [command, rest] = rewrite(file, [])
      return original.call(this, command, rest, args)
    }
    return original.apply(this, arguments)
  }
}
