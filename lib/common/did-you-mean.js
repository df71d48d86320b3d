'use strict'
// "Did you mean": the one rule every refusal of an unknown name uses (a limiter's options, the
// HTTP middleware's, the CLI's commands, options and values). The candidate nearest by edit
// distance, letter case ignored, when it is near enough for the name's length (optimal string
// alignment, so a swapped pair of letters counts as one edit); else the only candidate the name
// begins (two letters at least); else none. Hand-written, to keep the package free of runtime
// dependencies.

/** The edit distance of `a` and `b` (insertions, deletions, substitutions, adjacent swaps). */
function editDistance(a, b) {
  const rows = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) rows[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      rows[i][j] = Math.min(rows[i - 1][j] + 1, rows[i][j - 1] + 1, rows[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) rows[i][j] = Math.min(rows[i][j], rows[i - 2][j - 2] + 1)
    }
  }
  return rows[a.length][b.length]
}

/** The candidate `input` most likely meant, or null. */
function nearest(input, candidates) {
  const needle = input.toLowerCase()
  let best = null
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const distance = editDistance(needle, candidate.toLowerCase())
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance]
  }
  if (best !== null && bestDistance <= Math.min(3, Math.max(1, Math.floor(needle.length / 3)))) return best
  const prefixed = needle.length >= 2 ? candidates.filter((candidate) => candidate.toLowerCase().startsWith(needle)) : []
  return prefixed.length === 1 ? prefixed[0] : null
}

/** ` (did you mean 'x'?)` for a suggestion, '' for none. */
function didYouMean(suggestion) {
  return suggestion === null ? '' : ` (did you mean '${suggestion}'?)`
}

let timeZones
/** The IANA time zone names this runtime knows (its ICU's canonical ones), and 'UTC'. */
function knownTimeZones() {
  if (timeZones === undefined) {
    timeZones = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : []
    if (!timeZones.includes('UTC')) timeZones = [...timeZones, 'UTC']
  }
  return timeZones
}

/** ` (did you mean 'Europe/Berlin'?)` for a mistyped time zone name, '' when none is near. */
function didYouMeanTimeZone(name) {
  return didYouMean(nearest(name, knownTimeZones()))
}

module.exports = { editDistance, nearest, didYouMean, didYouMeanTimeZone }
