'use strict'
// `node benchmark/compare-http.js <before> [<after>]`: the middleware of two builds side by side in
// one process (each a package folder with its binary built; <after> defaults to this one), with
// express-rate-limit, on the fake request and response objects of benchmark/http.js behind its
// awaited harness; interleaved rounds in a shuffled order, ratios paired within a round. Make the
// <before> folder with `git worktree add` (or `git archive <commit> | tar -x -C dir`) and build it.
// ROUNDS and ITER override the defaults.
const path = require('node:path')
const [BEFORE, AFTER = path.join(__dirname, '..')] = process.argv.slice(2).map((dir) => path.resolve(dir))
const ROUNDS = Number(process.env.ROUNDS || 15)
const ITER = Number(process.env.ITER || 20000)
const HUGE = 1e9
const os = require('node:os')
const { rateLimit: erlFactory } = require('express-rate-limit')
function ours(dir, extra) {
  const { KeyedQuotaClock } = require(dir)
  const { rateLimit } = require(path.join(dir, 'lib', 'http.js'))
  return rateLimit({ limiter: new KeyedQuotaClock({ capacity: HUGE, refillPerSecond: HUGE, suspendPolicy: 'ignore' }), ...extra })
}
const cases = {
  'no limiter': (req, res, next) => next(),
  'express-rate-limit 8 (draft-8)': erlFactory({ windowMs: 60_000, limit: HUGE, standardHeaders: 'draft-8', legacyHeaders: false }),
  'before: ours (draft-11)': ours(BEFORE, {}),
  'after: ours (draft-11)': ours(AFTER, {}),
  'before: ours, headers: false': ours(BEFORE, { headers: false }),
  'after: ours, headers: false': ours(AFTER, { headers: false }),
}
const { fakeRequest, fakeResponse, microCase } = require('./fake-http.js')
function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (sorted.length - 1) * q
  const low = Math.floor(at)
  return sorted[low] + (sorted[Math.ceil(at)] - sorted[low]) * (at - low)
}

async function main() {
  // Every case passes its request; both builds write the same headers.
  const written = {}
  for (const [name, mw] of Object.entries(cases)) {
    const res = fakeResponse()
    await new Promise((resolve, reject) => {
      mw(fakeRequest(3), res, resolve)
      setTimeout(() => reject(new Error(`${name}: the request did not pass`)), 1000).unref()
    })
    written[name] = JSON.stringify([...res.headers])
  }
  if (written['before: ours (draft-11)'] !== written['after: ours (draft-11)']) throw new Error(`the builds write different headers: ${written['before: ours (draft-11)']} / ${written['after: ours (draft-11)']}`)
  console.log(`both builds write ${written['after: ours (draft-11)']}`)
  for (const mw of Object.values(cases)) await microCase(mw, ITER)
  const rounds = []
  for (let r = 0; r < ROUNDS; r++) {
    const times = {}
    const names = Object.keys(cases).sort(() => Math.random() - 0.5)
    for (const name of names) times[name] = await microCase(cases[name], ITER)
    rounds.push(times)
  }
  console.log(`\n${ROUNDS} interleaved rounds of ${ITER} requests, Node ${process.version}, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}\n`)
  console.log('| middleware | ns per request (median) | minus no limiter | × express-rate-limit, paired (IQR) |')
  console.log('|---|---:|---:|---:|')
  const PEER = 'express-rate-limit 8 (draft-8)'
  for (const name of Object.keys(cases)) {
    const total = quantile(rounds.map((t) => t[name]), 0.5)
    const net = rounds.map((t) => t[name] - t['no limiter'])
    const ratio = rounds.map((t) => (t[name] - t['no limiter']) / (t[PEER] - t['no limiter']))
    console.log(`| ${name} | ${total.toFixed(0)} | ${name === 'no limiter' ? '' : quantile(net, 0.5).toFixed(0)} | ${name === 'no limiter' ? '' : `${quantile(ratio, 0.5).toFixed(3)} (${quantile(ratio, 0.25).toFixed(3)}–${quantile(ratio, 0.75).toFixed(3)})`} |`)
  }
  for (const kind of ['ours (draft-11)', 'ours, headers: false']) {
    const r = rounds.map((t) => (t[`after: ${kind}`] - t['no limiter']) / (t[`before: ${kind}`] - t['no limiter']))
    console.log(`after ÷ before, ${kind}, paired: ${quantile(r, 0.5).toFixed(3)} (IQR ${quantile(r, 0.25).toFixed(3)}–${quantile(r, 0.75).toFixed(3)})`)
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
