'use strict'
// How to run npm with this Node on every OS (npm.cmd cannot be spawned without a shell).

const fs = require('node:fs')
const path = require('node:path')

/** { file, args, shell }: spawn `file` with `[...args, ...npmArgs]`. */
function npmCommand() {
  const nodeDir = path.dirname(process.execPath)
  const candidates = [
    process.env.npm_execpath,
    path.join(nodeDir, 'node_modules', 'npm', 'bin', 'npm-cli.js'),
    path.join(nodeDir, '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'),
  ]
  const cli = candidates.find((file) => file && /npm-cli\.c?js$/.test(file) && fs.existsSync(file))
  if (cli) return { file: process.execPath, args: [cli], shell: false }
  return { file: 'npm', args: [], shell: process.platform === 'win32' }
}

module.exports = { npmCommand }
