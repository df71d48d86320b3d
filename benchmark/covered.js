'use strict'
// What bench:shared and bench:fleet both measure: an awaited `consume` on one key by a limiter
// without `share` (local), by a shared one whose calls are all covered, and by
// rate-limiter-flexible's RateLimiterRedis (one Redis call per request), in interleaved
// repetitions; ratios paired within a repetition (the VM's speed drifts between repetitions).

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

/** ns per awaited call of `consume(i)` over `calls` calls. */
async function time(calls, consume) {
  const started = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) await consume(i)
  return Number(process.hrtime.bigint() - started) / calls
}

/**
 * Times the three (each answer already asserted by the caller) and prints the table and the two
 * paired ratios against their targets (at most 1.5x local, at least 100x faster than the peer).
 */
async function compareCovered({ local, shared, peer, repetitions, localCalls, peerCalls, sharedLabel, peerLabel, say }) {
  const localNs = []
  const sharedNs = []
  const peerNs = []
  for (let r = 0; r < repetitions; r++) {
    localNs.push(await time(localCalls, () => local.consume('tenant')))
    sharedNs.push(await time(localCalls, () => shared.consume('tenant')))
    peerNs.push(await time(peerCalls, () => peer.consume('tenant')))
  }
  const [l, s, p] = [median(localNs), median(sharedNs), median(peerNs)]
  const sharedRatio = median(sharedNs.map((ns, r) => ns / localNs[r]))
  const peerRatio = median(peerNs.map((ns, r) => ns / sharedNs[r]))
  say('')
  say('| awaited consume, one key | ns per call (median) | vs local |')
  say('|---|---:|---:|')
  say(`| KeyedQuotaClock, no share (local) | ${l.toFixed(0)} | 1.00x |`)
  say(`| ${sharedLabel} | ${s.toFixed(0)} | ${(s / l).toFixed(2)}x |`)
  say(`| ${peerLabel} | ${p.toFixed(0)} | ${(p / l).toFixed(0)}x |`)
  say('')
  say(`covered shared / local, paired: ${sharedRatio.toFixed(2)}x (target <= 1.5x: ${sharedRatio <= 1.5 ? 'met' : 'NOT met'}; per repetition: ${sharedNs.map((ns, r) => (ns / localNs[r]).toFixed(2)).join(', ')})`)
  say(`RateLimiterRedis / covered shared, paired: ${peerRatio.toFixed(0)}x (target >= 100x: ${peerRatio >= 100 ? 'met' : 'NOT met'}; per repetition: ${peerNs.map((ns, r) => (ns / sharedNs[r]).toFixed(0)).join(', ')})`)
  return { sharedRatio, peerRatio }
}

module.exports = { median, time, compareCovered }
