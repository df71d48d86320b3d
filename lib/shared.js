'use strict'
// quota-clock-source/shared: the stores a shared limiter keeps its quotas in (the `share` option
// of KeyedQuotaClock), and the operator's view of a shared quota (quotaAdmin). They live in
// lib/stores/.

const { redisStore } = require('./stores/redis.js')
const { mongoStore } = require('./stores/mongo.js')
const { quotaAdmin } = require('./stores/admin.js')

module.exports = { redisStore, mongoStore, quotaAdmin }
