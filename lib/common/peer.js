'use strict'
// An optional peer dependency loaded by the subpath that needs it (koa, hono, @nestjs/common,
// @opentelemetry/api, ...): a missing one is ERR_MISSING_PEER_DEPENDENCY naming the package to
// install; an error from inside an installed one is left as it is.

const { coded } = require('./validate.js')

/** Whether `error` says that `name` itself (not one of its own dependencies) could not be found. */
function isMissing(error, name) {
  return error !== null && typeof error === 'object' && error.code === 'MODULE_NOT_FOUND' && String(error.message).includes(`'${name}'`)
}

/**
 * `load()` (a require of `name`, written by the caller so that bundlers see it), or
 * ERR_MISSING_PEER_DEPENDENCY: `subpath` needs `name` (`versions`: which ones it works with).
 */
function requirePeer(name, subpath, versions, load) {
  try {
    return load()
  } catch (error) {
    if (!isMissing(error, name)) throw error
    throw coded(Error, 'ERR_MISSING_PEER_DEPENDENCY', `quota-clock-source/${subpath} needs the package ${name} (an optional peer dependency, ${versions}): npm install ${name}`, {
      cause: error,
    })
  }
}

module.exports = { requirePeer }
