'use strict'

// The fleet bucket's leases (docs/several-instances.md): a slice written off is spent for good. A process holding unspent tokens is
// paused (SIGSTOP, or its event loop blocked) past its margin while another process's calls move
// the fleet clock on; the store writes the paused slice off and the bucket refills into its room.
// When the paused process comes back and gives its slice back, those tokens must not go back into
// the bucket: once the room they held has been refilled, they would be admitted twice. The bound
// C + R·Δ·1.001 (helpers/fleet-check.js) must hold over the merged logs of both processes.
//
// Reproduces the probe of issue 44 (C 10, R 5/s, leaseMs 1,000, a holder of 5 unspent tokens
// paused for 5 s: 17 units in 560 ms against a bound of 12.8, every run, before the fix); here
// C 20, as a busy key's share is smaller now.

const { describe, test } = require('node:test')
const assert = require('node:assert/strict')
const { startDelayProxy } = require('./helpers/delay-proxy.js')
const { assertBucket } = require('./helpers/fleet-check.js')
const { useFleetServers, sleep } = require('./helpers/fleet-procs.js')

// (C 20: a busy key's second call takes a quarter of a fair share, 1 + 2, and keeps 2.)
const C = 20
const R = 5
const LEASE_MS = 1_000
const LIMITS = { capacity: C, refillPerSecond: R }
const PAUSE_MS = 5_000
// The fleet time after a holder's last call before the store writes its slice off.
const MARGIN_MS = LEASE_MS * 1.1 + 1_000

describe('a slice written off while its holder was paused is spent for good', () => {
  const servers = useFleetServers('bound', { mongo: true, limiter: LIMITS, share: { leaseMs: LEASE_MS } })

  /** Two workers; the first (on `holderStore`, if given) takes a slice and keeps unspent tokens of it. */
  async function holderAndDrainer(storeKind, label, holderStore) {
    const fleet = await servers.fleetOf(storeKind, label, { count: 0 })
    await fleet.add(holderStore)
    await fleet.add()
    const [holder] = fleet.workers
    // The first call takes what it lacks; the second, a busy key's, takes a share beyond it.
    for (let i = 0; i < 4; i++) {
      const { decision } = await holder.call('consume', { key: 'k' })
      assert.ok(decision && decision.allowed, 'the holder is admitted on a full bucket')
      const { status } = await holder.call('status', { key: 'k' })
      if (status.tokens >= 2) return fleet
    }
    throw new Error('the holder kept no unspent tokens to pause with')
  }

  async function pausedThenGivesBack(fleet, pause) {
    const [holder, drainer] = fleet.workers
    await pause(holder, async () => {
      // The drainer's calls move the fleet clock past the holder's margin (its slice written off)
      // while the bucket refills to full; then it drains the full bucket.
      await drainer.call('consume', { key: 'k' })
      await sleep(MARGIN_MS + 500)
      await drainer.call('consume', { key: 'k' })
      await sleep((C / R) * 1000 / 2)
      await drainer.call('burst', { key: 'k', count: C + 2 })
    })
    // Back: the holder gives its slice back at once (close()), and the drainer asks again.
    const closed = await holder.call('close')
    assert.equal(closed.closed, true, JSON.stringify(closed))
    // (A key denied here stays so for at most one second.)
    await sleep(1_000)
    await drainer.call('burst', { key: 'k', count: C })
    await fleet.stopAll()
    assertBucket(fleet.units('k'), LIMITS)
    await fleet.killAll()
  }

  const stopped = async (holder, during) => {
    process.kill(holder.pid, 'SIGSTOP')
    try {
      await during()
    } finally {
      process.kill(holder.pid, 'SIGCONT')
    }
  }
  const blocked = async (holder, during) => {
    // The worker's event loop blocked (a busy wait) for the pause: it answers when it is over.
    const busy = holder.call('busy', { ms: PAUSE_MS + 500 })
    await sleep(100)
    await during()
    await busy
  }

  for (const storeKind of ['ioredis', 'node-redis', 'mongo']) {
    test(`${storeKind}: a holder stopped (SIGSTOP) past its margin gives back a slice written off: the bound holds (C 20, R 5/s, leaseMs 1,000)`, { timeout: 60_000 }, async () => {
      await pausedThenGivesBack(await holderAndDrainer(storeKind, `stop-${storeKind}`), stopped)
    })
  }
  for (const storeKind of ['ioredis', 'mongo']) {
    test(`${storeKind}: a holder whose event loop was blocked past its margin gives back a slice written off: the bound holds`, { timeout: 60_000 }, async () => {
      await pausedThenGivesBack(await holderAndDrainer(storeKind, `busy-${storeKind}`), blocked)
    })
  }

  test('ioredis: a holder whose connection to the store stalled past its margin gives back a slice written off: the bound holds', { timeout: 60_000 }, async () => {
    const proxy = await startDelayProxy({ host: servers.redis.host, port: servers.redis.port })
    try {
      const fleet = await holderAndDrainer('ioredis', 'stalled', { client: 'ioredis', url: proxy.url })
      const stalledConnection = async (holder, during) => {
        proxy.stall()
        try {
          await during()
        } finally {
          proxy.resume()
        }
      }
      await pausedThenGivesBack(fleet, stalledConnection)
    } finally {
      await proxy.close()
    }
  })
})
