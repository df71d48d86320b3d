'use strict'
// Client keys: clientKey(req) is req.ip when a framework set it, else the socket's address;
// IPv4-mapped IPv6 is the IPv4 address; other IPv6 addresses are grouped by their first
// `ipv6Subnet` bits (default 56) as '<prefix>/56'; X-Forwarded-For is never read, and a request
// that carries it without the framework having used it draws one warning.

const { describe, it, after } = require('node:test')
const assert = require('node:assert/strict')
const http = require('node:http')
const express5 = require('express')
const express4 = require('express4')

const { clientKey, rateLimit } = require('../lib/http.js')
const { KeyedQuotaClock } = require('..')
const { warningsDuring } = require('./helpers/warnings.js')

const WARNING_CODE = 'QUOTA_CLOCK_UNEXPECTED_X_FORWARDED_FOR'

function req({ ip, remoteAddress, headers = {} } = {}) {
  return { ip, socket: { remoteAddress }, headers }
}

describe('clientKey(req)', () => {
  it('is req.ip when a framework set it, else req.socket.remoteAddress', () => {
    assert.equal(clientKey(req({ ip: '203.0.113.7', remoteAddress: '10.0.0.1' })), '203.0.113.7')
    assert.equal(clientKey(req({ remoteAddress: '198.51.100.2' })), '198.51.100.2')
    assert.equal(clientKey({ socket: { remoteAddress: '198.51.100.3' }, headers: {} }), '198.51.100.3')
  })

  it('IPv4-mapped IPv6 is the IPv4 address, however it is spelled', () => {
    assert.equal(clientKey(req({ remoteAddress: '::ffff:192.0.2.1' })), '192.0.2.1')
    assert.equal(clientKey(req({ remoteAddress: '::FFFF:192.0.2.1' })), '192.0.2.1')
    assert.equal(clientKey(req({ remoteAddress: '::ffff:c000:201' })), '192.0.2.1')
    assert.equal(clientKey(req({ remoteAddress: '0:0:0:0:0:ffff:192.0.2.1' })), '192.0.2.1')
  })

  it("other IPv6 addresses are grouped by their first 56 bits as '<prefix>/56' (RFC 5952 text)", () => {
    assert.equal(clientKey(req({ remoteAddress: '2001:db8:1234:5678:9abc::1' })), '2001:db8:1234:5600::/56')
    assert.equal(clientKey(req({ remoteAddress: '2001:db8:1234:56ff:ffff:ffff:ffff:ffff' })), '2001:db8:1234:5600::/56')
    assert.notEqual(clientKey(req({ remoteAddress: '2001:db8:1234:5700::1' })), '2001:db8:1234:5600::/56')
    // One address, several spellings, one key: leading zeros, upper case, a zone, '::' anywhere.
    for (const spelling of ['2001:0db8:1234:5678::1', '2001:DB8:1234:5678:0:0:0:1', '2001:db8:1234:5678::1%eth0']) {
      assert.equal(clientKey(req({ remoteAddress: spelling })), '2001:db8:1234:5600::/56', spelling)
    }
    assert.equal(clientKey(req({ remoteAddress: '::1' })), '::/56')
    assert.equal(clientKey(req({ ip: 'fe80::1:2:3:4' })), 'fe80::/56')
  })

  it('ipv6Subnet sets the prefix length; false keys every address by itself', () => {
    const address = '2001:db8:1234:5678:9abc:def0:1234:5678'
    assert.equal(clientKey(req({ remoteAddress: address }), { ipv6Subnet: 64 }), '2001:db8:1234:5678::/64')
    assert.equal(clientKey(req({ remoteAddress: address }), { ipv6Subnet: 48 }), '2001:db8:1234::/48')
    assert.equal(clientKey(req({ remoteAddress: address }), { ipv6Subnet: 60 }), '2001:db8:1234:5670::/60')
    assert.equal(clientKey(req({ remoteAddress: address }), { ipv6Subnet: 128 }), `${address}/128`)
    assert.equal(clientKey(req({ remoteAddress: '2001:0DB8::0001' }), { ipv6Subnet: false }), '2001:db8::1')
    assert.equal(clientKey(req({ remoteAddress: '::ffff:192.0.2.1' }), { ipv6Subnet: false }), '192.0.2.1')
  })

  it('bad options are refused with ERR_INVALID_OPTION', () => {
    const r = req({ remoteAddress: '::1' })
    for (const bad of [0, 129, 56.5, -1]) {
      assert.throws(() => clientKey(r, { ipv6Subnet: bad }), { name: 'RangeError', code: 'ERR_INVALID_OPTION' })
    }
    for (const bad of ['56', true, null]) {
      assert.throws(() => clientKey(r, { ipv6Subnet: bad }), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
    }
    assert.throws(() => clientKey(r, { ipv6subnet: 64 }), { name: 'TypeError', code: 'ERR_INVALID_OPTION', message: /unknown option 'ipv6subnet'/ })
    assert.throws(() => clientKey(r, 56), { name: 'TypeError', code: 'ERR_INVALID_OPTION' })
  })

  it('a request without any address is a TypeError ERR_INVALID_ARG (a closed connection), not a shared key', () => {
    assert.throws(() => clientKey(req()), { name: 'TypeError', code: 'ERR_INVALID_ARG', message: /no client address/ })
    assert.throws(() => clientKey(null), { name: 'TypeError', code: 'ERR_INVALID_ARG' })
  })

  it('never reads X-Forwarded-For', async () => {
    const warnings = await warningsDuring(WARNING_CODE, () => {
      const key = clientKey(req({ remoteAddress: '10.0.0.1', headers: { 'x-forwarded-for': '203.0.113.9' } }))
      assert.equal(key, '10.0.0.1')
    })
    assert.ok(warnings.length <= 1)
  })
})

describe('clientKey on real servers', () => {
  const servers = []
  async function listen(handler, host = '127.0.0.1') {
    const server = http.createServer(handler)
    await new Promise((resolve) => server.listen(0, host, resolve))
    servers.push(server)
    const { port } = server.address()
    return host.includes(':') ? `http://[${host}]:${port}` : `http://${host}:${port}`
  }
  after(() => {
    for (const server of servers) {
      server.closeAllConnections()
      server.close()
    }
  })

  it('node:http over IPv4 and IPv6 loopback', async () => {
    const handler = (request, response) => response.end(clientKey(request))
    assert.equal(await (await fetch(await listen(handler))).text(), '127.0.0.1')
    assert.equal(await (await fetch(await listen(handler, '::1'))).text(), '::/56')
  })

  for (const [name, express] of [['Express 5', express5], ['Express 4', express4]]) {
    it(`${name}: with trust proxy off, X-Forwarded-For is not used and draws one warning per middleware`, async () => {
      const app = express()
      const limiter = new KeyedQuotaClock({ capacity: 100, refillPerSecond: 1, suspendPolicy: 'ignore' })
      app.use(rateLimit({ limiter }))
      app.get('/', (request, response) => response.send(clientKey(request)))
      const url = await listen(app)
      const warnings = await warningsDuring(WARNING_CODE, async () => {
        for (let i = 0; i < 3; i++) {
          const response = await fetch(url, { headers: { 'X-Forwarded-For': '203.0.113.9' } })
          assert.equal(await response.text(), '127.0.0.1')
        }
      })
      assert.equal(warnings.length, 1, 'one warning, not one per request')
      assert.match(warnings[0].message, /trust proxy/)
    })

    it(`${name}: with trust proxy on, req.ip comes from X-Forwarded-For and nothing is warned`, async () => {
      const app = express()
      app.set('trust proxy', 'loopback')
      const limiter = new KeyedQuotaClock({ capacity: 100, refillPerSecond: 1, suspendPolicy: 'ignore' })
      app.use(rateLimit({ limiter }))
      app.get('/', (request, response) => response.send(clientKey(request)))
      const url = await listen(app)
      const warnings = await warningsDuring(WARNING_CODE, async () => {
        const response = await fetch(url, { headers: { 'X-Forwarded-For': '2001:db8:aa:bb::1' } })
        assert.equal(await response.text(), '2001:db8:aa::/56')
      })
      assert.deepEqual(warnings, [])
    })
  }

  it('node:http: a request with X-Forwarded-For draws the warning (no framework resolved req.ip)', async () => {
    const limiter = new KeyedQuotaClock({ capacity: 100, refillPerSecond: 1, suspendPolicy: 'ignore' })
    const limit = rateLimit({ limiter })
    const url = await listen((request, response) => {
      limit(request, response)
      response.end('ok')
    })
    const warnings = await warningsDuring(WARNING_CODE, async () => {
      await (await fetch(url, { headers: { 'X-Forwarded-For': '203.0.113.9' } })).text()
      await (await fetch(url, { headers: { 'X-Forwarded-For': '203.0.113.9' } })).text()
    })
    assert.equal(warnings.length, 1)
    const quiet = await warningsDuring(WARNING_CODE, async () => {
      await (await fetch(url)).text()
    })
    assert.deepEqual(quiet, [])
  })
})
