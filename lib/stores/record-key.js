'use strict'
// The name of a store record, (name, key, periodId), written so that no two triples share one:
// the name and the key are each length-prefixed, so a ':' inside them is only text.
//
//   <name bytes>:<name>:<key bytes>:<key>:<periodId>      e.g. 3:api:9:tenant:42:2024-03
//
// Lengths are UTF-8 bytes (what redis-cli and mongosh show). A string that is not well-formed
// Unicode (a lone surrogate, which UTF-8 cannot carry: it would arrive as U+FFFD and meet another
// key's record) is written as its UTF-16 code units in hex, its length followed by '!' instead of
// ':', e.g. 8!d800d801 for '\ud800\ud801'. The period id ('2024-03', '2024-03-15', '2024') comes
// last and needs no length.

const LONE_SURROGATE = /\p{Cs}/u

function part(text) {
  if (!LONE_SURROGATE.test(text)) return `${Buffer.byteLength(text, 'utf8')}:${text}`
  let hex = ''
  for (let i = 0; i < text.length; i++) hex += text.charCodeAt(i).toString(16).padStart(4, '0')
  return `${hex.length}!${hex}`
}

/** The record's name inside a store, without the store's own prefix. */
function recordKey(name, key, periodId) {
  return `${part(name)}:${part(key)}:${periodId}`
}

module.exports = { recordKey, part }
