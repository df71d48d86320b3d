'use strict'
// Preloaded (node --require) into a docs recipe by __test__/docs-recipes-ipv6.test.js: a request's
// X-Test-Remote-Address header becomes its socket's remoteAddress, so that one machine can send
// from the IPv6 addresses of a /56. Every framework's server is a node:http Server: patching its
// 'request' event reaches them all before they read the address. (Not a test file.)

const http = require('node:http')

const emit = http.Server.prototype.emit
http.Server.prototype.emit = function emitWithAddress(event, req, ...rest) {
  if (event === 'request') {
    const address = req.headers['x-test-remote-address']
    if (typeof address === 'string') Object.defineProperty(req.socket, 'remoteAddress', { value: address, configurable: true })
  }
  return emit.call(this, event, req, ...rest)
}
