'use strict'
// What a shared consume's native decision answers when it cannot decide yet: the store must be
// asked first. A call's outcome is then a Decision or a StoreNeed, told apart by `instanceof`
// (never by sniffing a number): `quota` with the units the key's reservation lacks, or `slice`
// when its fleet bucket's slice does not cover the call.

class StoreNeed {
  /** `kind`: 'quota' or 'slice'; `lacking`: the quota units lacking (0 for a slice). */
  constructor(kind, lacking) {
    this.kind = kind
    this.lacking = lacking
    Object.freeze(this)
  }
}

/** The one need of a call its fleet bucket's slice does not cover. */
const NEEDS_SLICE = new StoreNeed('slice', 0)

/** The need of a call its quota reservation does not cover, `lacking` units short. */
function needsQuota(lacking) {
  return new StoreNeed('quota', lacking)
}

/** Whether a shared consume's outcome is a need (else it is a Decision). */
function isNeed(outcome) {
  return outcome instanceof StoreNeed
}

module.exports = { StoreNeed, NEEDS_SLICE, needsQuota, isNeed }
