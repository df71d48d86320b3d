'use strict'
// clientKey: the client's address as a rate limit key (IPv6 grouped by its first `ipv6Subnet`
// bits), and rateLimit's default key.

const { createHash } = require('node:crypto')
const { coded, describe, isPlainObject } = require('../common/validate.js')

// The IPv6 cache is bounded in bytes: at most MAX_KEY_CACHE addresses of at most
// MAX_ADDRESS_LENGTH characters (the longest IPv6 text, 45, with a zone), each with a key of at
// most ~50: under 1 MB of strings however many distinct addresses arrive. A longer string is not
// an address and is never cached.
const MAX_KEY_CACHE = 4096
const MAX_ADDRESS_LENGTH = 64

/** Whether `text` is four groups of 1 to 3 decimal digits joined by dots (as /^\d{1,3}(\.\d{1,3}){3}$/, without a RegExp call per request). */
function isIPv4Text(text) {
  const length = text.length
  if (length < 7 || length > 15) return false
  let dots = 0
  let digits = 0
  for (let i = 0; i < length; i++) {
    const c = text.charCodeAt(i)
    if (c >= 48 && c <= 57) {
      if (++digits > 3) return false
    } else if (c === 46 && digits > 0 && dots < 3) {
      dots++
      digits = 0
    } else return false
  }
  return dots === 3 && digits > 0
}
// A client address that is not an IP address (a proxy's or a framework's value) is keyed by a
// digest of it: a key of bounded length (39 characters), distinct per value, never a 500.
const NON_IP_PREFIX = 'non-ip:'

function nonIpKey(address) {
  return NON_IP_PREFIX + createHash('sha256').update(address).digest('hex').slice(0, 32)
}

/**
 * An IPv6 address as eight 16-bit groups, or null when `text` is not one. A zone (`%eth0`) is
 * dropped; an embedded IPv4 tail (`::ffff:1.2.3.4`) is read as the last two groups.
 */
function parseIPv6(text) {
  const zone = text.indexOf('%')
  if (zone !== -1) text = text.slice(0, zone)
  const lastColon = text.lastIndexOf(':')
  if (text.indexOf('.', lastColon) !== -1) {
    // An IPv4 tail is the last two groups: rewrite it as such.
    const octets = text.slice(lastColon + 1).split('.')
    if (octets.length !== 4 || !octets.every((o) => /^\d{1,3}$/.test(o) && Number(o) <= 255)) return null
    const [a, b, c, d] = octets.map(Number)
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return null
  const parse = (part) => (part === '' ? [] : part.split(':'))
  const head = parse(halves[0])
  const rest = halves.length === 2 ? parse(halves[1]) : []
  const groups = []
  for (const group of [...head, ...rest]) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null
    groups.push(parseInt(group, 16))
  }
  if (halves.length === 2 ? groups.length > 7 : groups.length !== 8) return null
  const zeros = new Array(8 - groups.length).fill(0)
  return [...groups.slice(0, head.length), ...zeros, ...groups.slice(head.length)]
}

/** RFC 5952 text: lower case, no leading zeros, the longest run (≥ 2) of zero groups as '::'. */
function formatIPv6(groups) {
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart === -1) return hex.join(':')
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`
}

function isMappedIPv4(groups) {
  return groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff
}

/** The key of an IPv6 address (any spelling): IPv4 when mapped, else its prefix (or itself). */
function ipv6Key(address, subnetBits) {
  const groups = parseIPv6(address)
  if (groups === null) return nonIpKey(address)
  if (isMappedIPv4(groups)) return `${groups[6] >> 8}.${groups[6] & 255}.${groups[7] >> 8}.${groups[7] & 255}`
  if (subnetBits === false) return formatIPv6(groups)
  for (let i = 0; i < 8; i++) {
    const keep = Math.min(16, Math.max(0, subnetBits - 16 * i))
    groups[i] &= keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
  }
  return `${formatIPv6(groups)}/${subnetBits}`
}

function checkSubnet(options) {
  if (options === undefined) return 56
  if (!isPlainObject(options)) {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `clientKey: options must be an object { ipv6Subnet }, received ${describe(options)}`)
  }
  for (const key of Object.keys(options)) {
    if (key !== 'ipv6Subnet' && options[key] !== undefined) {
      throw coded(TypeError, 'ERR_INVALID_OPTION', `clientKey: unknown option '${key}'; expected 'ipv6Subnet'; received ${describe(options[key])}`)
    }
  }
  const { ipv6Subnet = 56 } = options
  if (ipv6Subnet === false) return false
  if (typeof ipv6Subnet !== 'number') {
    throw coded(TypeError, 'ERR_INVALID_OPTION', `clientKey: ipv6Subnet must be a number of bits from 1 to 128, or false, received ${describe(ipv6Subnet)}`)
  }
  if (!Number.isInteger(ipv6Subnet) || ipv6Subnet < 1 || ipv6Subnet > 128) {
    throw coded(RangeError, 'ERR_INVALID_OPTION', `clientKey: ipv6Subnet must be an integer from 1 to 128, or false, received ${describe(ipv6Subnet)}`)
  }
  return ipv6Subnet
}

const X_FORWARDED_FOR_WARNING =
  'A request carries X-Forwarded-For but its client address was not taken from it (req.ip is the ' +
  "socket's address, or unset), so every client behind that proxy shares one rate limit key. Behind " +
  "a proxy you trust, let the framework resolve the client (Express: app.set('trust proxy', 1)); " +
  'otherwise ignore this. clientKey never reads X-Forwarded-For itself: any client can send it.'

/** Makes a clientKey with its own warn-once state and IPv6 cache. */
function makeClientKey(subnetBits) {
  let warned = false
  const cache = new Map()
  return function keyOf(req) {
    const { ip } = req // a getter in Express: read once
    let address = typeof ip === 'string' && ip !== '' ? ip : undefined
    if (!warned && req.headers?.['x-forwarded-for'] !== undefined) {
      const socketAddress = req.socket?.remoteAddress
      if (address === undefined || address === socketAddress) {
        warned = true
        process.emitWarning(X_FORWARDED_FOR_WARNING, { code: 'QUOTA_CLOCK_UNEXPECTED_X_FORWARDED_FOR' })
      }
    }
    if (address === undefined) address = req.socket?.remoteAddress
    if (typeof address !== 'string' || address === '') {
      throw coded(TypeError, 'ERR_INVALID_ARG', 'clientKey: the request has no client address (req.ip and req.socket.remoteAddress are both unset: has the connection closed?)')
    }
    if (isIPv4Text(address)) return address
    if (address.indexOf(':') === -1) return nonIpKey(address)
    if (address.length > MAX_ADDRESS_LENGTH) return nonIpKey(address)
    let key = cache.get(address)
    if (key === undefined) {
      key = ipv6Key(address, subnetBits)
      if (cache.size >= MAX_KEY_CACHE) cache.clear()
      cache.set(address, key)
    }
    return key
  }
}

const clientKeyBySubnet = new Map()

/** The client's address as a rate limit key (IPv6 grouped by its first `ipv6Subnet` bits). */
function clientKey(req, options) {
  if (typeof req !== 'object' || req === null) {
    throw coded(TypeError, 'ERR_INVALID_ARG', `clientKey: req must be a request object, received ${describe(req)}`)
  }
  const subnetBits = checkSubnet(options)
  let keyOf = clientKeyBySubnet.get(subnetBits)
  if (keyOf === undefined) {
    keyOf = makeClientKey(subnetBits)
    clientKeyBySubnet.set(subnetBits, keyOf)
  }
  return keyOf(req)
}

/**
 * rateLimit's default key: clientKey with the default subnet, warning once per middleware, of the
 * request (or of what `clientOf(req)` answers: a framework whose request object has no `ip`).
 */
function defaultKey(clientOf) {
  const keyOf = makeClientKey(56)
  return clientOf === undefined ? keyOf : (req) => keyOf(clientOf(req))
}

module.exports = { clientKey, defaultKey }
