'use strict'
// quota-clock-source/shared: the stores a shared limiter keeps its quotas in (the `share` option
// of KeyedQuotaClock), and the operator's view of a shared quota (quotaAdmin). They live in
// lib/shared/.

const { redisStore } = require('./shared/redis.js')
const { mongoStore } = require('./shared/mongo.js')
const { quotaAdmin } = require('./shared/admin.js')

module.exports = { redisStore, mongoStore, quotaAdmin }
