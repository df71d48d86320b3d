'use strict'
// Snapshots that lie: a header claiming billions of keys or specs (checksum made valid), spec
// entries no key uses, and maxKeys past what a snapshot can count. Each is refused with a coded
// ERR_INVALID_OPTION naming `restore` (or makes a valid limiter), never an abort; the fuzzing runs
// in a child process, so an abort fails the test instead of killing the runner.

const test = require('node:test')
const assert = require('node:assert/strict')
const zlib = require('node:zlib')
const { KeyedQuotaClock, manualClock } = require('..')
const { runScript } = require('./helpers/child.js')

const month = { unit: 'month', timeZone: 'UTC' }
const options = (extra) => ({ capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 100, period: month }, clock: manualClock({ wallMs: Date.UTC(2025, 5, 10) }), ...extra })

/** `bytes` with its CRC-32 trailer recomputed. */
function withChecksum(body) {
  const out = Buffer.alloc(body.length + 4)
  Buffer.from(body).copy(out)
  out.writeUInt32LE(zlib.crc32(body), body.length)
  return new Uint8Array(out)
}

test('every u32 position of a snapshot set to a huge value is refused with a coded error naming restore, never an abort', () => {
  const { result } = runScript(`
    const zlib = require('node:zlib')
    const { KeyedQuotaClock, manualClock } = require(ROOT)
    const clock = manualClock({ wallMs: Date.UTC(2025, 5, 10) })
    const base = { capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 100, period: { unit: 'month', timeZone: 'UTC' } }, clock }
    const source = new KeyedQuotaClock(base)
    source.tryConsume('a')
    source.tryConsume('b', 3)
    const images = [source.snapshot(), new KeyedQuotaClock(base).snapshot()]
    const values = [0xffffffff, 2 ** 31, 2 ** 31 - 1, 2 ** 28, 2 ** 24, 65536, 2]
    const outcomes = { made: 0, refused: 0, other: [] }
    for (const image of images) {
      for (let at = 0; at + 4 <= image.length - 4; at++) {
        for (const value of values) {
          const body = Buffer.from(image.subarray(0, image.length - 4))
          body.writeUInt32LE(value, at)
          const bytes = Buffer.alloc(body.length + 4)
          body.copy(bytes)
          bytes.writeUInt32LE(zlib.crc32(body), body.length)
          try {
            new KeyedQuotaClock({ ...base, maxKeys: 2 ** 32, restore: new Uint8Array(bytes) })
            outcomes.made++
          } catch (error) {
            if (error.code === 'ERR_INVALID_OPTION' && /restore/.test(error.message) && error instanceof Error) outcomes.refused++
            else outcomes.other.push({ at, value, code: error.code, message: String(error.message) })
          }
        }
      }
    }
    console.log(JSON.stringify(outcomes))
  `)
  assert.deepEqual(result.other, [])
  assert.ok(result.refused > 100, `refused ${result.refused}`)
})

test('a header claiming 0xFFFFFFFF keys or specs is refused as truncated, at maxKeys 2**32', () => {
  const { result } = runScript(`
    const zlib = require('node:zlib')
    const { KeyedQuotaClock } = require(ROOT)
    const base = { capacity: 10, refillPerSecond: 1, suspendPolicy: 'ignore', quota: { limit: 100, period: { unit: 'month', timeZone: 'UTC' } } }
    const empty = new KeyedQuotaClock(base).snapshot()
    const answers = []
    for (const at of [8, 12]) {
      for (const value of [0xffffffff, 2 ** 31, 1000]) {
        const body = Buffer.from(empty.subarray(0, 16))
        body.writeUInt32LE(value, at)
        const bytes = Buffer.alloc(20)
        body.copy(bytes)
        bytes.writeUInt32LE(zlib.crc32(body), 16)
        try {
          new KeyedQuotaClock({ ...base, maxKeys: 2 ** 32, restore: new Uint8Array(bytes) })
          answers.push({ at, value, made: true })
        } catch (error) {
          answers.push({ at, value, code: error.code, type: error.constructor.name, message: error.message })
        }
      }
    }
    console.log(JSON.stringify(answers))
  `)
  assert.equal(result.length, 6)
  for (const answer of result) {
    assert.equal(answer.code, 'ERR_INVALID_OPTION', JSON.stringify(answer))
    assert.match(answer.message, /^restore /)
    assert.match(answer.message, /truncated|no key uses/)
  }
})

test('maxKeys is a positive integer no larger than 2**32', () => {
  assert.equal(new KeyedQuotaClock(options({ maxKeys: 2 ** 32 })).size, 0)
  for (const maxKeys of [2 ** 32 + 1, 2 ** 40, Number.MAX_SAFE_INTEGER, 0, 1.5]) {
    assert.throws(
      () => new KeyedQuotaClock(options({ maxKeys })),
      (error) => error instanceof RangeError && error.code === 'ERR_INVALID_OPTION' && /maxKeys/.test(error.message) && error.message.includes(String(maxKeys)),
      String(maxKeys),
    )
  }
})

test('a snapshot holding period specs that no key uses is refused, however many', () => {
  const source = new KeyedQuotaClock(options())
  source.tryConsume('a')
  const image = Buffer.from(source.snapshot())
  assert.equal(image.readUInt32LE(8), 1, 'one spec')
  const specLength = 8 + image[16 + 3] + 1 + image[16 + 8 + image[16 + 3]]
  const spec = image.subarray(16, 16 + specLength)
  const key = image.subarray(16 + specLength, image.length - 4)
  const build = (specs, keys) => {
    const header = Buffer.from(image.subarray(0, 16))
    header.writeUInt32LE(specs.length, 8)
    header.writeUInt32LE(keys.length, 12)
    return withChecksum(Buffer.concat([header, ...specs, ...keys]))
  }
  assert.equal(new KeyedQuotaClock(options({ restore: build([spec], [key]) })).status('a').quotaUsed, 1, 'the image as built is valid')

  // A yearly spec after the used monthly one, unused by the four keys.
  const yearly = Buffer.from(spec)
  yearly[0] = 3
  yearly[2] = 1
  const keys = [key]
  for (let i = 1; i < 4; i++) {
    const other = Buffer.from(key)
    other[3] = 0x61 + i // 'b', 'c', 'd'
    keys.push(other)
  }
  assert.throws(
    () => new KeyedQuotaClock(options({ restore: build([spec, yearly], keys) })),
    (error) => error.code === 'ERR_INVALID_OPTION' && /restore/.test(error.message) && /period spec 1 is used by no key/.test(error.message),
  )
  assert.throws(
    () => new KeyedQuotaClock(options({ restore: build([spec, spec], keys) })),
    (error) => error.code === 'ERR_INVALID_OPTION' && /restore/.test(error.message) && /written twice/.test(error.message),
  )
  // Many more specs than keys: refused before any is read.
  const many = Array.from({ length: 50_000 }, () => spec)
  assert.throws(
    () => new KeyedQuotaClock(options({ restore: build(many, [key]) })),
    (error) => error.code === 'ERR_INVALID_OPTION' && /restore/.test(error.message) && /no key uses/.test(error.message),
  )
})
