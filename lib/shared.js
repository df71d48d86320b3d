'use strict'
// quota-clock-source/shared: the stores a shared limiter keeps its quotas in (the `share` option
// of KeyedQuotaClock). The stores live in lib/shared/.

const { redisStore } = require('./shared/redis.js')
const { mongoStore } = require('./shared/mongo.js')

module.exports = { redisStore, mongoStore }
