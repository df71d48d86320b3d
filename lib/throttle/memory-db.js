'use strict'

// An embedded, single-process stand-in for a MongoDB database: `db.collection(name)` returns a
// collection with `findOneAndUpdate()` and `deleteMany()` only, behaving as the official driver
// (v6+) does against a server for the subset documented below. Anything outside the subset throws
// instead of being silently misread.
//
// Subset:
// - filters: `{}` or fields compared by equality, or with `$eq` `$ne` `$lt` `$lte` `$gt` `$gte`
//   (numbers, strings, Dates; values of different types never match, as in MongoDB);
// - updates: `$inc`, `$set`, `$setOnInsert`, `$unset`, or a pipeline of `$set`/`$addFields` stages
//   whose values are constants, `{ $literal: v }` or `'$$NOW'`;
// - options: `upsert`, `returnDocument` ('before', the driver's default, or 'after'),
//   `includeResultMetadata`.
// Each operation is atomic: it is applied in one step, after the caller's current tick, so
// concurrent callers interleave between operations exactly as they do against a server.

const { randomBytes } = require('node:crypto')

const COMPARISONS = new Set(['$eq', '$ne', '$lt', '$lte', '$gt', '$gte'])
const UPDATE_OPERATORS = new Set(['$inc', '$set', '$setOnInsert', '$unset'])
const PIPELINE_STAGES = new Set(['$set', '$addFields'])

/** An error shaped like the driver's server errors: `code` and `codeName` as the server sends them. */
class MemoryDbError extends Error {
  constructor(code, codeName, message) {
    super(message)
    this.name = 'MemoryDbError'
    this.code = code
    this.codeName = codeName
  }
}

function usageError(message) {
  const err = new TypeError(`memoryDb: ${message}`)
  err.code = 'ERR_INVALID_ARG'
  return err
}

function isPlainObject(value) {
  if (value === null || typeof value !== 'object') return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

function typeName(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'array'
  if (value instanceof Date) return 'Date'
  return typeof value
}

function checkFieldName(name, where) {
  if (name.startsWith('$') || name.includes('.')) {
    throw usageError(`field ${JSON.stringify(name)} in ${where} is not supported (top-level field names only)`)
  }
}

// The identity of an `_id` in the store's map: MongoDB compares `_id` values by type and value.
function idKey(id) {
  if (typeof id === 'string') return `s${id}`
  if (typeof id === 'number') return `n${Object.is(id, -0) ? 0 : id}`
  if (typeof id === 'boolean') return `b${id}`
  if (id instanceof Date) return `d${id.getTime()}`
  throw usageError(`an _id must be a string, number, boolean or Date, received ${typeName(id)}`)
}

function comparable(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return [a, b]
  if (typeof a === 'string' && typeof b === 'string') return [a, b]
  if (a instanceof Date && b instanceof Date) return [a.getTime(), b.getTime()]
  return null
}

function valuesEqual(a, b) {
  if (a === undefined) a = null
  if (a === null || b === null) return a === b
  const pair = comparable(a, b)
  if (pair !== null) return pair[0] === pair[1]
  return a === b
}

function compare(op, actual, operand) {
  if (op === '$eq') return valuesEqual(actual, operand)
  if (op === '$ne') return !valuesEqual(actual, operand)
  const pair = actual === undefined ? null : comparable(actual, operand)
  if (pair === null) return false
  const [a, b] = pair
  if (op === '$lt') return a < b
  if (op === '$lte') return a <= b
  if (op === '$gt') return a > b
  return a >= b
}

function checkFilterValue(value, where) {
  if (value === null || ['string', 'number', 'boolean'].includes(typeof value) || value instanceof Date) return
  throw usageError(`${where}: unsupported value of type ${typeName(value)}`)
}

// Validates a filter once and returns a predicate over documents.
function compileFilter(filter) {
  if (!isPlainObject(filter)) throw usageError(`a filter must be an object, received ${typeName(filter)}`)
  const tests = []
  for (const [field, condition] of Object.entries(filter)) {
    checkFieldName(field, 'a filter')
    if (isPlainObject(condition)) {
      for (const [op, operand] of Object.entries(condition)) {
        if (!COMPARISONS.has(op)) throw usageError(`filter operator ${op} is not supported`)
        checkFilterValue(operand, `filter ${field}.${op}`)
        tests.push((doc) => compare(op, doc[field], operand))
      }
    } else {
      checkFilterValue(condition, `filter ${field}`)
      tests.push((doc) => valuesEqual(doc[field], condition))
    }
  }
  return (doc) => tests.every((test) => test(doc))
}

// The fields an upsert copies from the filter: those compared by plain equality or `$eq`.
function equalityFields(filter) {
  const fields = {}
  for (const [field, condition] of Object.entries(filter)) {
    if (!isPlainObject(condition)) fields[field] = condition
    else if ('$eq' in condition) fields[field] = condition.$eq
  }
  return fields
}

function checkUpdate(update) {
  if (Array.isArray(update)) {
    if (update.length === 0) throw usageError('an update pipeline must have at least one stage')
    for (const stage of update) {
      const names = isPlainObject(stage) ? Object.keys(stage) : []
      if (names.length !== 1 || !PIPELINE_STAGES.has(names[0]) || !isPlainObject(stage[names[0]])) {
        throw usageError('update pipeline stages must be { $set: {...} } or { $addFields: {...} }')
      }
      for (const [field, expr] of Object.entries(stage[names[0]])) {
        checkFieldName(field, 'an update pipeline')
        checkExpression(expr, field)
      }
    }
    return
  }
  if (!isPlainObject(update)) throw usageError(`an update must be an object or a pipeline, received ${typeName(update)}`)
  const operators = Object.keys(update)
  if (operators.length === 0) throw usageError('an update must name at least one operator')
  const touched = new Set()
  for (const op of operators) {
    if (!UPDATE_OPERATORS.has(op)) throw usageError(`update operator ${JSON.stringify(op)} is not supported`)
    if (!isPlainObject(update[op])) throw usageError(`${op} takes an object, received ${typeName(update[op])}`)
    for (const [field, value] of Object.entries(update[op])) {
      checkFieldName(field, op)
      if (field === '_id' && op !== '$setOnInsert') {
        throw new MemoryDbError(66, 'ImmutableField', `Performing an update on the path '_id' would modify the immutable field '_id'`)
      }
      if (touched.has(field)) {
        throw new MemoryDbError(40, 'ConflictingUpdateOperators', `Updating the path '${field}' would create a conflict at '${field}'`)
      }
      touched.add(field)
      if (op === '$inc' && typeof value !== 'number') {
        throw new MemoryDbError(14, 'TypeMismatch', `Cannot increment with non-numeric argument: {${field}: ${JSON.stringify(value)}}`)
      }
    }
  }
}

function checkExpression(expr, field) {
  if (typeof expr === 'string' && expr.startsWith('$') && expr !== '$$NOW') {
    throw usageError(`expression ${JSON.stringify(expr)} for ${field} is not supported (only '$$NOW')`)
  }
  if (isPlainObject(expr) && !(Object.keys(expr).length === 1 && '$literal' in expr)) {
    throw usageError(`expression for ${field} is not supported (constants, { $literal } and '$$NOW' only)`)
  }
  if (Array.isArray(expr)) throw usageError(`array expression for ${field} is not supported`)
}

function evaluate(expr, nowDate) {
  if (expr === '$$NOW') return new Date(nowDate.getTime())
  if (isPlainObject(expr)) return structuredClone(expr.$literal)
  return structuredClone(expr)
}

// Applies a validated update to a copy of `doc`; `inserting` enables `$setOnInsert`.
function applyUpdate(doc, update, inserting, nowDate) {
  const next = { ...doc }
  if (Array.isArray(update)) {
    for (const stage of update) {
      for (const [field, expr] of Object.entries(Object.values(stage)[0])) next[field] = evaluate(expr, nowDate)
    }
    return next
  }
  for (const [op, fields] of Object.entries(update)) {
    for (const [field, value] of Object.entries(fields)) {
      if (op === '$set' || (op === '$setOnInsert' && inserting)) next[field] = structuredClone(value)
      else if (op === '$unset') delete next[field]
      else if (op === '$inc') {
        const current = next[field] === undefined ? 0 : next[field]
        if (typeof current !== 'number') {
          throw new MemoryDbError(14, 'TypeMismatch', `Cannot apply $inc to a value of non-numeric type. {_id: ${JSON.stringify(doc._id)}} has the field '${field}' of non-numeric type ${typeName(current)}`)
        }
        next[field] = current + value
      }
    }
  }
  return next
}

function checkOptions(options) {
  if (options === undefined) return {}
  if (!isPlainObject(options)) throw usageError(`options must be an object, received ${typeName(options)}`)
  if (options.returnDocument !== undefined && options.returnDocument !== 'before' && options.returnDocument !== 'after') {
    throw usageError(`returnDocument must be 'before' or 'after', received ${JSON.stringify(options.returnDocument)}`)
  }
  return options
}

class MemoryCollection {
  #docs = new Map()
  #now

  constructor(now) {
    this.#now = now
  }

  /** Finds the first document matching `filter`, updates it atomically and returns it. */
  async findOneAndUpdate(filter, update, options) {
    const match = compileFilter(filter)
    checkUpdate(update)
    const { upsert = false, returnDocument = 'before', includeResultMetadata = false } = checkOptions(options)
    await null
    return this.#findOneAndUpdateNow(filter, match, update, upsert, returnDocument, includeResultMetadata)
  }

  #findOneAndUpdateNow(filter, match, update, upsert, returnDocument, includeResultMetadata) {
    const nowDate = new Date(this.#now())
    let before = null
    let after = null
    let upserted
    const id = equalityFields(filter)._id
    if (id !== undefined) {
      // The common case, a filter on `_id`: one map lookup instead of a scan.
      const doc = this.#docs.get(idKey(id))
      if (doc !== undefined && match(doc)) before = doc
    } else {
      for (const doc of this.#docs.values()) {
        if (match(doc)) {
          before = doc
          break
        }
      }
    }
    if (before !== null) {
      after = applyUpdate(before, update, false, nowDate)
      this.#docs.set(idKey(after._id), after)
    } else if (upsert) {
      const seed = structuredClone(equalityFields(filter))
      const created = applyUpdate(seed, update, true, nowDate)
      if (created._id === undefined) created._id = randomBytes(12).toString('hex')
      const key = idKey(created._id)
      if (this.#docs.has(key)) {
        // The filter did not match, but the document it would create exists: the server answers E11000.
        throw new MemoryDbError(11000, 'DuplicateKey', `E11000 duplicate key error collection: throttle index: _id_ dup key: { _id: ${JSON.stringify(created._id)} }`)
      }
      after = { _id: created._id, ...created }
      this.#docs.set(key, after)
      upserted = after._id
    }
    const value = returnDocument === 'after' ? after : before
    const result = value === null ? null : structuredClone(value)
    if (!includeResultMetadata) return result
    const lastErrorObject = { n: after === null ? 0 : 1, updatedExisting: before !== null }
    if (upserted !== undefined) lastErrorObject.upserted = structuredClone(upserted)
    return { lastErrorObject, value: result, ok: 1 }
  }

  /** Deletes every document matching `filter`; resolves to `{ acknowledged: true, deletedCount }`. */
  async deleteMany(filter) {
    const match = compileFilter(filter)
    await null
    let deletedCount = 0
    for (const [key, doc] of this.#docs) {
      if (match(doc)) {
        this.#docs.delete(key)
        deletedCount++
      }
    }
    return { acknowledged: true, deletedCount }
  }
}

/**
 * An in-process database for one process or for tests. `options.clock` (an object with
 * `wallMs(): number`, default the system wall clock) is the "server" clock that `'$$NOW'` reads.
 */
function memoryDb(options) {
  if (options !== undefined && !isPlainObject(options)) {
    throw usageError(`options must be an object, received ${typeName(options)}`)
  }
  const { clock, ...unknown } = options ?? {}
  const extra = Object.keys(unknown).filter((key) => unknown[key] !== undefined)
  if (extra.length > 0) throw usageError(`unknown option ${JSON.stringify(extra[0])} (known: clock)`)
  if (clock !== undefined && (clock === null || typeof clock.wallMs !== 'function')) {
    throw usageError('clock must be an object with a wallMs() method')
  }
  const now = clock === undefined ? () => Date.now() : () => clock.wallMs()
  const collections = new Map()
  return {
    collection(name) {
      if (typeof name !== 'string' || name === '') {
        throw usageError(`a collection name must be a non-empty string, received ${typeName(name)}`)
      }
      let collection = collections.get(name)
      if (collection === undefined) {
        collection = new MemoryCollection(now)
        collections.set(name, collection)
      }
      return collection
    },
  }
}

module.exports = { memoryDb, MemoryDbError }
