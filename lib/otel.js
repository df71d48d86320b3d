'use strict'
// quota-clock-source/otel: `registerOtelMetrics`, the limiters' counters through OpenTelemetry.
// It lives in lib/metrics/otel.js, beside registerMetrics (prom-client).

module.exports = require('./metrics/otel.js')
