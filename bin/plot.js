'use strict'
// The plot of `quota-clock-source simulate --svg FILE`: both buckets' tokens over scenario time,
// the requests each one allowed or denied, the clock events and QuotaClock's anomalies.
//
// Written by hand: it is one line chart with a few marks, and the package has no runtime
// dependencies (it installs with nothing but its platform binary), which an SVG or charting
// library would change for the sake of ~150 lines.

// QuotaClock is drawn first, so the dashed naive line stays visible where the two agree.
const SERIES = [
  { key: 'quotaClock', label: 'QuotaClock', color: '#1f5fa8', dash: null, width: 2.5 },
  { key: 'naive', label: 'naive Date.now() bucket', color: '#d62728', dash: '6 4', width: 2 },
]
const ANOMALY_COLOR = '#7b3294'
const EVENT_COLOR = '#555555'
const PERIOD_COLOR = '#2a7f3f'
const QUOTA_AXIS_WIDTH = 64

const WIDTH = 760
const PANEL_HEIGHT = 340
const MARGIN = { top: 84, right: 24, bottom: 46, left: 52 }

function escapeXml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c])
}

const num = (value) => (Math.round(value * 100) / 100).toString()

/** A tick step of 1, 2 or 5 × 10^k giving about `target` ticks over `span`. */
function tickStep(span, target) {
  const raw = span / target
  const power = 10 ** Math.floor(Math.log10(raw))
  return [1, 2, 5, 10].map((m) => m * power).find((step) => step >= raw)
}

function signedDuration(ms) {
  const sign = ms < 0 ? '−' : '+'
  const abs = Math.abs(ms)
  if (abs % 3_600_000 === 0) return `${sign}${abs / 3_600_000} h`
  if (abs % 60_000 === 0) return `${sign}${abs / 60_000} min`
  return `${sign}${abs / 1000} s`
}

/** Drops the points of a polyline (in pixels) that lie within a quarter pixel of the line through their neighbours. */
function simplify(points) {
  const kept = [points[0]]
  for (let i = 1; i < points.length - 1; i++) {
    const [ax, ay] = kept[kept.length - 1]
    const [bx, by] = points[i]
    const [cx, cy] = points[i + 1]
    const length = Math.hypot(cx - ax, cy - ay)
    const distance = length === 0 ? Math.hypot(bx - ax, by - ay) : Math.abs((cx - ax) * (ay - by) - (ax - bx) * (cy - ay)) / length
    const between = (bx - ax) * (cx - bx) + (by - ay) * (cy - by) >= 0 // not a turn back along the line
    if (distance > 0.25 || !between) kept.push(points[i])
  }
  if (points.length > 1) kept.push(points[points.length - 1])
  return kept
}

/** One scenario's chart as an SVG group, `offsetY` from the top of the document. */
function panel(run, offsetY) {
  const { meta, timeline } = run
  const requests = timeline.filter((entry) => entry.type === 'request').map((entry) => entry.step)
  const endMs = Math.max(meta.durationMs, 1000)
  // A quota has an axis of its own on the right: its count is not in tokens.
  const plotWidth = WIDTH - MARGIN.left - (meta.quota ? QUOTA_AXIS_WIDTH : MARGIN.right)
  const plotHeight = PANEL_HEIGHT - MARGIN.top - MARGIN.bottom
  const x = (ms) => MARGIN.left + (ms / endMs) * plotWidth
  const y = (tokens) => MARGIN.top + plotHeight - (tokens / meta.capacity) * plotHeight
  const out = []
  out.push(`<g class="scenario" data-scenario="${escapeXml(meta.name)}" transform="translate(0 ${offsetY})">`)
  out.push(`<text x="${MARGIN.left}" y="22" font-size="15" font-weight="bold">${escapeXml(meta.name)}</text>`)
  out.push(`<text x="${MARGIN.left}" y="40" font-size="12" fill="#333">${escapeXml(meta.title)}</text>`)

  // Suspends: a band over the time the host slept.
  for (const event of timeline) {
    if (event.type !== 'suspend') continue
    const x0 = x(event.atMs)
    const x1 = x(event.atMs + event.ms)
    out.push(`<rect class="event suspend" x="${num(x0)}" y="${MARGIN.top}" width="${num(x1 - x0)}" height="${plotHeight}" fill="#e8e8e8"/>`)
    out.push(`<text x="${num((x0 + x1) / 2)}" y="${MARGIN.top + 14}" font-size="11" text-anchor="middle" fill="${EVENT_COLOR}">host asleep ${event.ms / 1000} s</text>`)
  }

  // Axes and grid.
  const yStep = tickStep(meta.capacity, 5)
  for (let tokens = 0; tokens <= meta.capacity + 1e-9; tokens += yStep) {
    out.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotWidth}" y1="${num(y(tokens))}" y2="${num(y(tokens))}" stroke="#ddd"/>`)
    out.push(`<text x="${MARGIN.left - 6}" y="${num(y(tokens) + 4)}" font-size="11" text-anchor="end">${num(tokens)}</text>`)
  }
  const xStep = tickStep(endMs, 10)
  for (let ms = 0; ms <= endMs + 1e-9; ms += xStep) {
    out.push(`<line x1="${num(x(ms))}" x2="${num(x(ms))}" y1="${MARGIN.top + plotHeight}" y2="${MARGIN.top + plotHeight + 4}" stroke="#333"/>`)
    out.push(`<text x="${num(x(ms))}" y="${MARGIN.top + plotHeight + 17}" font-size="11" text-anchor="middle">${num(ms / 1000)}</text>`)
  }
  out.push(`<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotWidth}" height="${plotHeight}" fill="none" stroke="#333"/>`)
  out.push(`<text x="${MARGIN.left + plotWidth / 2}" y="${MARGIN.top + plotHeight + 34}" font-size="12" text-anchor="middle">scenario time (s: real time, awake or asleep)</text>`)
  out.push(`<text transform="translate(14 ${MARGIN.top + plotHeight / 2}) rotate(-90)" font-size="12" text-anchor="middle">tokens</text>`)

  // Quota periods: where each one was first seen open, with its id (QuotaClock's quota only).
  let periodId = null
  for (const entry of timeline) {
    if (entry.type !== 'request' || entry.periodId === null || entry.periodId === periodId) continue
    periodId = entry.periodId
    const at = num(x(entry.atMs))
    out.push(`<line class="period" x1="${at}" x2="${at}" y1="${MARGIN.top}" y2="${MARGIN.top + plotHeight}" stroke="${PERIOD_COLOR}" stroke-width="1"/>`)
    out.push(`<text class="period-label" x="${num(x(entry.atMs) + 4)}" y="${MARGIN.top + plotHeight - 6}" font-size="11" fill="${PERIOD_COLOR}">quota period ${escapeXml(periodId)}</text>`)
  }

  if (meta.quota) out.push(quotaSeries(meta, requests, timeline, { x, plotWidth, plotHeight }))

  // Wall steps: a mark at the top of the plot where NTP set the clock.
  for (const event of timeline) {
    if (event.type !== 'step') continue
    const at = num(x(event.atMs))
    out.push(`<line class="event step" x1="${at}" x2="${at}" y1="${MARGIN.top}" y2="${MARGIN.top + plotHeight}" stroke="${EVENT_COLOR}" stroke-dasharray="1 3"/>`)
    out.push(`<text x="${at}" y="${MARGIN.top - 4}" font-size="11" text-anchor="middle" fill="${EVENT_COLOR}">wall ${signedDuration(event.deltaMs)}</text>`)
  }

  // Each bucket's level over time. At a request: the tokens just before and just after it, as it
  // decided. Between requests: what the bucket would hold if it were asked, from its own rule and
  // the clock (sampled, since the naive bucket's level jumps with the wall clock): the naive one
  // credits the wall clock's advance since its last request, clamped at 0; QuotaClock credits the
  // time awake, plus the time asleep when a reader measures it (as in these scenarios).
  const rate = meta.refillPerSecond / 1000
  const level = {
    naive: (from, at) => Math.min(meta.capacity, from.naive + Math.max(0, at.wallMs - from.wallMs) * rate),
    quotaClock: (from, at) => Math.min(meta.capacity, from.quotaClock + (meta.reader ? at.atMs - from.atMs : at.awakeMs - from.awakeMs) * rate),
  }
  const knots = timeline.filter((entry) => entry.type === 'clock' || entry.type === 'request')
  const samplesPerMs = 240 / endMs
  for (const series of SERIES) {
    const points = []
    let from = { naive: meta.initialTokens, quotaClock: meta.initialTokens, atMs: 0, awakeMs: 0, wallMs: knots[0].wallMs }
    let previous = knots[0]
    for (const knot of knots) {
      // Between two knots the clock moves uniformly (awake or asleep), so its readings interpolate.
      const n = Math.max(1, Math.ceil((knot.atMs - previous.atMs) * samplesPerMs))
      for (let i = 1; i < n; i++) {
        const f = i / n
        const at = {
          atMs: previous.atMs + f * (knot.atMs - previous.atMs),
          awakeMs: previous.awakeMs + f * (knot.awakeMs - previous.awakeMs),
          wallMs: previous.wallMs + f * (knot.wallMs - previous.wallMs),
        }
        points.push([at.atMs, level[series.key](from, at)])
      }
      if (knot.type === 'request') {
        const { step } = knot
        const after = step[series.key].tokens
        points.push([step.atMs, Math.min(meta.capacity, after + (step[series.key].allowed ? step.n : 0))], [step.atMs, after])
        from = { ...from, [series.key]: after, atMs: knot.atMs, awakeMs: knot.awakeMs, wallMs: knot.wallMs }
      } else {
        points.push([knot.atMs, level[series.key](from, knot)])
      }
      previous = knot
    }
    const d = simplify(points.map(([ms, tokens]) => [x(ms), y(tokens)]))
      .map(([px, py], i) => `${i === 0 ? 'M' : 'L'}${num(px)} ${num(py)}`)
      .join(' ')
    const dash = series.dash ? ` stroke-dasharray="${series.dash}"` : ''
    out.push(`<path class="series ${series.key}" data-series="${series.key}" d="${d}" fill="none" stroke="${series.color}" stroke-width="${series.width}"${dash}/>`)
    for (const step of requests) {
      const cx = num(x(step.atMs))
      const cy = num(y(step[series.key].tokens))
      const fill = step[series.key].allowed ? series.color : '#fff'
      const state = step[series.key].allowed ? 'allowed' : 'denied'
      out.push(`<circle class="request ${series.key} ${state}" cx="${cx}" cy="${cy}" r="3.5" fill="${fill}" stroke="${series.color}" stroke-width="1.5"><title>${series.label} at ${num(step.atMs / 1000)} s: ${state} ${step.n}, ${num(step[series.key].tokens)} tokens left</title></circle>`)
    }
  }

  // QuotaClock's anomalies: a line, a marker and the kind at the request that raised them, the
  // label inside the plot's top (one row lower when it would run into the previous label).
  let labelRow = 0
  let lastLabelEnd = -Infinity
  for (const step of requests) {
    const kinds = step.quotaClock.anomalies.map((anomaly) => anomaly.kind)
    if (kinds.length === 0) continue
    const at = x(step.atMs)
    const label = kinds.join(' + ')
    const flip = at + 8 + label.length * 6.2 > MARGIN.left + plotWidth // near the right edge: label to the left
    labelRow = at < lastLabelEnd ? labelRow + 1 : 0
    lastLabelEnd = flip ? at : at + 8 + label.length * 6.2
    const labelY = MARGIN.top + 34 + labelRow * 14
    out.push(`<line class="anomaly" x1="${num(at)}" x2="${num(at)}" y1="${MARGIN.top}" y2="${MARGIN.top + plotHeight}" stroke="${ANOMALY_COLOR}" stroke-width="1.5" stroke-dasharray="4 3"/>`)
    out.push(`<path class="anomaly-marker" d="M${num(at)} ${MARGIN.top + 9} l-5 -9 h10 z" fill="${ANOMALY_COLOR}"/>`)
    out.push(`<text class="anomaly-label" x="${num(flip ? at - 6 : at + 6)}" y="${labelY}" font-size="11" text-anchor="${flip ? 'end' : 'start'}" fill="${ANOMALY_COLOR}" stroke="#fff" stroke-width="3" paint-order="stroke">${escapeXml(label)}</text>`)
  }

  // Legend, under the title.
  let legendX = MARGIN.left
  const legendY = 60
  for (const series of SERIES) {
    const dash = series.dash ? ` stroke-dasharray="${series.dash}"` : ''
    out.push(`<line x1="${legendX}" x2="${legendX + 28}" y1="${legendY - 4}" y2="${legendY - 4}" stroke="${series.color}" stroke-width="${series.width}"${dash}/>`)
    out.push(`<text x="${legendX + 34}" y="${legendY}" font-size="12">${escapeXml(series.label)}</text>`)
    legendX += 34 + series.label.length * 7 + 18
  }
  out.push(`<path d="M${legendX + 5} ${legendY - 1} l-5 -9 h10 z" fill="${ANOMALY_COLOR}"/>`)
  out.push(`<text x="${legendX + 15}" y="${legendY}" font-size="12" fill="${ANOMALY_COLOR}">QuotaClock anomaly</text>`)
  out.push(`<circle cx="${legendX + 162}" cy="${legendY - 4}" r="3.5" fill="#333" stroke="#333" stroke-width="1.5"/>`)
  out.push(`<text x="${legendX + 170}" y="${legendY}" font-size="12">allowed</text>`)
  out.push(`<circle cx="${legendX + 232}" cy="${legendY - 4}" r="3.5" fill="#fff" stroke="#333" stroke-width="1.5"/>`)
  out.push(`<text x="${legendX + 240}" y="${legendY}" font-size="12">denied</text>`)
  out.push('</g>')
  return out.join('\n')
}

/**
 * QuotaClock's quota: what is left in the open period after each request, as a step line on its
 * own axis (right), with a mark at each request; a request the quota denied (its wait is the
 * period's, `wall-period`) is a hollow square labelled "quota". This is what the naive bucket,
 * which has no calendar, cannot show.
 */
function quotaSeries(meta, requests, timeline, { x, plotWidth, plotHeight }) {
  const { limit } = meta.quota
  const yq = (left) => MARGIN.top + plotHeight - (left / Math.max(limit, 1)) * plotHeight
  const right = MARGIN.left + plotWidth
  const out = []
  for (let left = 0; left <= limit; left += tickStep(Math.max(limit, 1), 3)) {
    out.push(`<text class="quota-axis" x="${right + 6}" y="${num(yq(left) + 4)}" font-size="11" fill="${PERIOD_COLOR}">${num(left)}</text>`)
  }
  out.push(`<text transform="translate(${right + 42} ${MARGIN.top + plotHeight / 2}) rotate(90)" font-size="12" text-anchor="middle" fill="${PERIOD_COLOR}">quota left (of ${limit})</text>`)
  const entries = timeline.filter((entry) => entry.type === 'request')
  const points = []
  let level = limit
  for (const entry of entries) {
    points.push([x(entry.atMs), yq(level)])
    level = entry.quotaRemaining
    points.push([x(entry.atMs), yq(level)])
  }
  points.push([right, yq(level)])
  const d = points.map(([px, py], i) => `${i === 0 ? 'M' : 'L'}${num(px)} ${num(py)}`).join(' ')
  out.push(`<path class="quota" data-quota="quotaRemaining" d="${d}" fill="none" stroke="${PERIOD_COLOR}" stroke-width="1.5"/>`)
  entries.forEach((entry, i) => {
    const step = requests[i]
    const byQuota = !step.quotaClock.allowed && step.quotaClock.retryAfterBasis === 'wall-period'
    const cx = x(entry.atMs)
    const cy = yq(entry.quotaRemaining)
    const state = byQuota ? 'denied-by-quota' : step.quotaClock.allowed ? 'allowed' : 'denied'
    const what = `quota at ${num(step.atMs / 1000)} s: ${entry.quotaRemaining} of ${limit} left in ${entry.periodId}${byQuota ? ', denied by the quota' : ''}`
    out.push(`<rect class="quota-request ${state}" x="${num(cx - 3)}" y="${num(cy - 3)}" width="6" height="6" fill="${byQuota ? '#fff' : PERIOD_COLOR}" stroke="${PERIOD_COLOR}" stroke-width="1.5"><title>${escapeXml(what)}</title></rect>`)
    if (byQuota) out.push(`<text class="quota-denial" x="${num(cx)}" y="${num(cy - 7)}" font-size="10" text-anchor="middle" fill="${PERIOD_COLOR}">quota</text>`)
  })
  return out.join('\n')
}

/** An SVG document with one panel per run, stacked. */
function renderSvg(runs) {
  const height = PANEL_HEIGHT * runs.length
  const panels = runs.map((run, i) => panel(run, i * PANEL_HEIGHT))
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<title>quota-clock-source simulate: ${escapeXml(runs.map((run) => run.meta.name).join(', '))}</title>`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    ...panels,
    '</svg>',
    '',
  ].join('\n')
}

module.exports = { renderSvg }
