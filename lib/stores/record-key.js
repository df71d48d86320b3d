'use strict'
// The names of store records, written so that no two records share one: the name and the key are
// each length-prefixed, so a ':' inside them is only text.
//
// MongoDB document ids (lib/stores/mongo.js, mongo-bucket.js):
//   quota record of (name, key, periodId)   <part(name)>:<part(key)>:<periodId>   3:api:9:tenant:42:2024-03
//   bucket record of (name, key)            bucket:<part(name)>:<part(key)>
//
// Redis keys (after the store's prefix) start with a Redis Cluster hash tag of their own, the
// (name, key) pair with every brace escaped, so that all the records of one (name, key) (its quota
// periods, its bucket) live in one slot while different keys spread over the slots, and no brace
// a client puts in a key or a name ever forms a tag:
//   quota record    {<slot(name)>:<slot(key)>}:<periodId>    {3:api:9:tenant:42}:2024-03
//   bucket record   {<slot(name)>:<slot(key)>}:b             {3:api:9:tenant:42}:b
// slot(text) is part(text) after '%' → '%25', '{' → '%7B', '}' → '%7D' (u{x}1 is 9:u%7Bx%7D1).
// A period id starts with a digit, so no letter suffix meets one: a later per-key record (a
// block, read in the same round trip on a Cluster) takes a letter of its own in the same slot.
//
// part(): lengths are UTF-8 bytes (what redis-cli and mongosh show). A string that is not
// well-formed Unicode (a lone surrogate, which UTF-8 cannot carry: it would arrive as U+FFFD and
// meet another key's record) is written as its UTF-16 code units in hex, its length followed by
// '!' instead of ':', e.g. 8!d800d801 for '\ud800\ud801'. The period id ('2024-03', '2024-03-15',
// '2024') comes last and needs no length.

const LONE_SURROGATE = /\p{Cs}/u
const BRACES = /[%{}]/g
const ESCAPES = { '%': '%25', '{': '%7B', '}': '%7D' }

function part(text) {
  if (!LONE_SURROGATE.test(text)) return `${Buffer.byteLength(text, 'utf8')}:${text}`
  let hex = ''
  for (let i = 0; i < text.length; i++) hex += text.charCodeAt(i).toString(16).padStart(4, '0')
  return `${hex.length}!${hex}`
}

/** part() of the text with its braces (and '%') escaped: never '{' or '}'. */
function slotPart(text) {
  return part(text.replace(BRACES, (c) => ESCAPES[c]))
}

/** The MongoDB id of the quota record of (name, key, periodId). */
function recordKey(name, key, periodId) {
  return `${part(name)}:${part(key)}:${periodId}`
}

/** The Redis hash tag of every record of (name, key): '{' + the escaped pair + '}'. */
function slotTag(name, key) {
  return `{${slotPart(name)}:${slotPart(key)}}`
}

/** The Redis key of the quota record of (name, key, periodId), without the store's prefix. */
function redisQuotaKey(name, key, periodId) {
  return `${slotTag(name, key)}:${periodId}`
}

/** The Redis key of the fleet bucket record of (name, key), without the store's prefix. */
function redisBucketKey(name, key) {
  return `${slotTag(name, key)}:b`
}

/** The MongoDB document of (name, key)'s fleet bucket (lib/stores/mongo-bucket.js). */
function mongoBucketId(name, key) {
  return `bucket:${part(name)}:${part(key)}`
}

module.exports = { recordKey, part, slotTag, redisQuotaKey, redisBucketKey, mongoBucketId }
