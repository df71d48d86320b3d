'use strict'
// quota-clock-source/metrics: `registerMetrics`, prom-client collectors that read each limiter's
// stats() when the registry is scraped. They live in lib/metrics/.

const { registerMetrics } = require('./metrics/register.js')

module.exports = { registerMetrics }
