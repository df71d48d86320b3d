'use strict'
// quota-clock-source/otel: registerOtelMetrics reports what registerMetrics reports, through
// @opentelemetry/api, read at collection time: checked with the OpenTelemetry SDK's MeterProvider
// and a reader that collects on demand.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { MeterProvider, MetricReader } = require('@opentelemetry/sdk-metrics')
const { metrics } = require('@opentelemetry/api')

const { QuotaClock, KeyedQuotaClock, manualClock } = require('..')
const { registerOtelMetrics } = require('quota-clock-source/otel')
const { warningsDuring } = require('./helpers/warnings.js')
const { testStore, sharedLimiter } = require('./helpers/test-store.js')

class OnDemandReader extends MetricReader {
  async onForceFlush() {}
  async onShutdown() {}
}

function provider() {
  const reader = new OnDemandReader()
  const meterProvider = new MeterProvider({ readers: [reader] })
  return { reader, meterProvider, meter: meterProvider.getMeter('test') }
}

/** One collection as { '<instrument> <attributes JSON>': value }. */
async function collect(reader) {
  const { resourceMetrics, errors } = await reader.collect()
  assert.deepEqual(errors, [])
  const points = {}
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      for (const point of metric.dataPoints) points[`${metric.descriptor.name} ${JSON.stringify(point.attributes)}`] = point.value
    }
  }
  return points
}

const clock = () => manualClock({ wallMs: Date.UTC(2024, 0, 15, 12) })
const keyed = (options = {}) => new KeyedQuotaClock({ capacity: 1, refillPerSecond: 1, suspendPolicy: 'ignore', clock: clock(), ...options })

describe('registerOtelMetrics', () => {
  test("reports the counters and the keys gauge with registerMetrics' values and labels as attributes, read at collection time", async () => {
    const { reader, meter } = provider()
    const api = keyed({ maxKeys: 1, quota: { limit: 5, period: { unit: 'day', timeZone: 'UTC' } } })
    const single = new QuotaClock({ capacity: 2, refillPerSecond: 1, suspendPolicy: 'ignore', clock: clock() })
    registerOtelMetrics({ limiters: { api, single }, meter })
    api.tryConsume('a')
    api.tryConsume('a')
    assert.throws(() => api.tryConsume('b'), (err) => err.code === 'ERR_KEY_LIMIT')
    single.tryConsume()
    let points = await collect(reader)
    assert.equal(points['quota_clock.decisions {"limiter":"api","result":"allowed"}'], 1)
    assert.equal(points['quota_clock.decisions {"limiter":"api","result":"denied"}'], 1)
    assert.equal(points['quota_clock.decisions {"limiter":"single","result":"allowed"}'], 1)
    assert.equal(points['quota_clock.keys {"limiter":"api"}'], 1)
    assert.equal(points['quota_clock.keys {"limiter":"single"}'], 1)
    assert.equal(points['quota_clock.key_limit_refusals {"limiter":"api"}'], 1)
    assert.equal(points['quota_clock.evictions {"limiter":"api"}'], 0)
    assert.equal(points['quota_clock.blocks {"limiter":"api"}'], 0)
    assert.equal(points['quota_clock.anomalies {"limiter":"api","kind":"suspend"}'], 0)
    assert.equal(points['quota_clock.store.calls {"limiter":"api","outcome":"ok"}'], undefined, 'store calls only for a shared limiter')
    // Read again at the next collection: the limiter's totals now.
    single.tryConsume()
    single.tryConsume()
    points = await collect(reader)
    assert.equal(points['quota_clock.decisions {"limiter":"single","result":"allowed"}'], 2)
    assert.equal(points['quota_clock.decisions {"limiter":"single","result":"denied"}'], 1)
  })

  test('without meter: the global MeterProvider\'s meter named quota-clock-source', async () => {
    const { reader, meterProvider } = provider()
    assert.ok(metrics.setGlobalMeterProvider(meterProvider))
    try {
      const registered = registerOtelMetrics({ limiters: { global: keyed() } })
      const { resourceMetrics } = await reader.collect()
      const scope = resourceMetrics.scopeMetrics.find((s) => s.metrics.some((m) => m.descriptor.name === 'quota_clock.decisions'))
      assert.equal(scope.scope.name, 'quota-clock-source')
      registered.unregister()
    } finally {
      metrics.disable()
    }
  })

  test('a limiter whose stats() throws is left out of the collection (warned once); the others are collected; unregister() stops reporting', async () => {
    const { reader, meter } = provider()
    const open = keyed()
    const closing = keyed()
    const registered = registerOtelMetrics({ limiters: { open, closing }, meter })
    open.tryConsume('a')
    closing.tryConsume('a')
    closing.stats = () => {
      throw new Error('cannot read')
    }
    const warnings = await warningsDuring('QUOTA_CLOCK_METRICS_SKIPPED', async () => {
      const points = await collect(reader)
      assert.equal(points['quota_clock.decisions {"limiter":"open","result":"allowed"}'], 1)
      assert.equal(points['quota_clock.decisions {"limiter":"closing","result":"allowed"}'], undefined)
      await collect(reader)
    })
    assert.equal(warnings.length, 1)
    assert.match(warnings[0].message, /registerOtelMetrics: limiter "closing" is left out/)
    registered.unregister()
    registered.unregister()
    open.tryConsume('b')
    const after = await collect(reader)
    assert.notEqual(after['quota_clock.decisions {"limiter":"open","result":"allowed"}'], 2, 'the limiter is no longer read')
  })

  test('a shared limiter reports quota_clock.store.calls by outcome (ok, error)', async () => {
    const { reader, meter } = provider()
    const t = testStore()
    const { limiter: tenants } = sharedLimiter(t, { leaseUnits: 1 }, { capacity: 100, quota: { limit: 1000, period: { unit: 'day', timeZone: 'UTC' } } })
    try {
      registerOtelMetrics({ limiters: { tenants }, meter })
      await tenants.consume('a')
      t.control.mode = 'fail'
      await assert.rejects(tenants.consume('b'), { code: 'ERR_STORE_UNAVAILABLE' })
      const { store } = tenants.stats()
      const points = await collect(reader)
      assert.equal(points['quota_clock.store.calls {"limiter":"tenants","outcome":"error"}'], store.errors)
      assert.equal(store.errors, 1)
      assert.equal(points['quota_clock.store.calls {"limiter":"tenants","outcome":"ok"}'], store.calls - store.errors - store.timeouts)
      assert.equal(points['quota_clock.store.calls {"limiter":"tenants","outcome":"timeout"}'], 0)
    } finally {
      t.control.mode = 'ok'
      t.release()
      await tenants.close()
    }
  })

  test('bad options are ERR_INVALID_OPTION', () => {
    for (const [options, pattern] of [
      [undefined, /options must be an object/],
      [{ limiters: {} }, /at least one limiter/],
      [{ limiters: { a: {} } }, /limiters\.a must be a QuotaClock or a KeyedQuotaClock/],
      [{ limiters: { a: keyed() }, meter: {} }, /meter must be an OpenTelemetry Meter/],
      [{ limiters: { a: keyed() }, register: {} }, /unknown option/],
    ]) {
      assert.throws(() => registerOtelMetrics(options), (err) => err.code === 'ERR_INVALID_OPTION' && pattern.test(err.message), String(pattern))
    }
  })
})
