'use strict'
// clientKey on what a client can send: an address that is not an IP still gets a key of bounded
// length (never a key the limiter refuses, so never a 500), and the IPv6 cache is bounded in bytes
// however long and however many the addresses are.

const { describe, it } = require('node:test')
const assert = require('node:assert/strict')

const { clientKey } = require('../lib/http.js')
const { runScript } = require('./helpers/child.js')

const req = (ip) => ({ ip, socket: { remoteAddress: '127.0.0.1' }, headers: {} })

describe('a client address that is not an IP address', () => {
  it("is keyed as 'non-ip:' and 32 hex digits of its SHA-256: bounded, one key per value, stable", () => {
    const values = ['not-an-ip', 'x'.repeat(300), 'x'.repeat(100_000), '1.2.3', '1.2.3.4.5', '2001:db8::zz', `2001:db8::${'f'.repeat(300)}`, 'a:b:c', '::1::2', 'unix:/tmp/socket']
    const keys = values.map((value) => clientKey(req(value)))
    for (const [i, key] of keys.entries()) {
      assert.match(key, /^non-ip:[0-9a-f]{32}$/, values[i].slice(0, 40))
      assert.equal(clientKey(req(values[i])), key, 'the same value, the same key')
    }
    assert.equal(new Set(keys).size, values.length, 'distinct values, distinct keys')
  })

  it('a dotted address is its own key exactly when it is four groups of 1 to 3 digits (the rule is written without a RegExp)', () => {
    const own = ['0.0.0.0', '1.2.3.4', '10.0.0.1', '255.255.255.255', '999.999.999.999', '01.02.03.004', '123.45.6.78']
    const hashed = ['1.2.3', '1.2.3.4.', '.1.2.3.4', '1..2.3', '1.2.3.4.5', '1234.1.1.1', '1.2.3.4567', 'a.b.c.d', '1.2.3.4 ', ' 1.2.3.4', '1.2.3.4\n', '1.2.3.٤', '１.2.3.4', '1,2,3,4', '1.2.3.-4']
    for (const address of own) assert.equal(clientKey(req(address)), address, address)
    for (const address of hashed) assert.match(clientKey(req(address)), /^non-ip:/, JSON.stringify(address))
  })

  it('IP addresses keep their keys', () => {
    assert.equal(clientKey(req('203.0.113.7')), '203.0.113.7')
    assert.equal(clientKey(req('::ffff:203.0.113.7')), '203.0.113.7')
    assert.equal(clientKey(req('2001:db8:1234:5678::1')), '2001:db8:1234:5600::/56')
    assert.equal(clientKey(req('fe80::1%eth0')), 'fe80::/56')
  })
})

describe('the IPv6 cache is bounded in bytes', () => {
  it('20,000 distinct 16 KB addresses retain well under 8 MB (they retained ~64 MB)', () => {
    const { result } = runScript(
      `
      const { clientKey } = require(ROOT + '/lib/http.js')
      const measure = () => { global.gc(); global.gc(); return process.memoryUsage().heapUsed }
      const before = measure()
      for (let i = 0; i < 20_000; i++) {
        const ip = '2001:db8::' + i.toString(16) + ':' + 'a'.repeat(16 * 1024)
        clientKey({ ip, headers: {} })
      }
      console.log(JSON.stringify({ retained: measure() - before }))
      `,
      { args: ['--expose-gc'] },
    )
    const { retained } = result
    assert.ok(retained < 8 * 1024 * 1024, `retained ${(retained / 1024 / 1024).toFixed(1)} MB`)
  })
})
