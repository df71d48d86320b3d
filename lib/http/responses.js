'use strict'
// The middleware's own responses: an RFC 9457 problem (429 quota exceeded, 503, 500).

const PROBLEM_TYPE_QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const PROBLEM_CONTENT_TYPE = 'application/problem+json'

function sendProblem(res, status, problem) {
  const body = JSON.stringify(problem)
  res.statusCode = status
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
  res.setHeader('Content-Length', Buffer.byteLength(body))
  res.end(body)
}

function waitSentence(seconds) {
  return seconds === 1 ? '1 second' : `${seconds} seconds`
}

// A long wait in its two largest units, the smaller rounded up: 2630963 s is '30 days 11 h'.
const WAIT_UNITS = [
  [86_400, (n) => (n === 1 ? '1 day' : `${n} days`)],
  [3_600, (n) => `${n} h`],
  [60, (n) => `${n} min`],
  [1, (n) => `${n} s`],
]

function humanWait(seconds) {
  if (seconds < 60) return waitSentence(seconds)
  const at = WAIT_UNITS.findIndex(([size]) => seconds >= size)
  const [size, name] = WAIT_UNITS[at]
  const [smaller, smallerName] = WAIT_UNITS[at + 1]
  let major = Math.floor(seconds / size)
  let minor = Math.ceil((seconds - major * size) / smaller)
  if (minor * smaller >= size) [major, minor] = [major + 1, 0]
  return minor === 0 ? name(major) : `${name(major)} ${smallerName(minor)}`
}

const localFormats = new Map()

/** `2027-01-01 00:00 America/Los_Angeles` (seconds when not 0); undefined where Intl does not know the zone. */
function localTime(ms, timeZone) {
  try {
    let format = localFormats.get(timeZone)
    if (format === undefined) {
      const fields = { year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' }
      format = new Intl.DateTimeFormat('en-US', { timeZone, ...fields })
      if (localFormats.size >= 64) localFormats.clear()
      localFormats.set(timeZone, format)
    }
    const part = {}
    for (const { type, value } of format.formatToParts(ms)) part[type] = value
    const seconds = part.second === '00' ? '' : `:${part.second}`
    return `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}${seconds} ${timeZone}`
  } catch {
    return undefined
  }
}

/**
 * When to retry, for the detail: a bucket's short wait in seconds; a quota's wait as a person reads
 * it and, with `reset` ({ atMs, timeZone } of the quota's period), the local time it resets.
 */
function retryWhen(decision, reset) {
  const seconds = Math.ceil(decision.retryAfterMs / 1000)
  if (decision.retryAfterBasis === 'block') return `in ${humanWait(seconds)}`
  if (decision.retryAfterBasis !== 'wall-period') return `after ${waitSentence(seconds)}`
  const at = reset === undefined ? undefined : localTime(reset.atMs, reset.timeZone)
  return `in ${humanWait(seconds)}${at === undefined ? '' : ` (at ${at})`}`
}

function quotaExceededProblem(decision, violated, reset) {
  const which = violated.map((name) => `"${name}"`).join(' and ')
  return {
    type: PROBLEM_TYPE_QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail:
      decision.retryAfterBasis === 'block'
        ? `This client is blocked by the ${which} rate limit policy for repeated or abusive requests; retry ${retryWhen(decision, reset)}.`
        : `The ${which} rate limit ${violated.length > 1 ? 'policies are' : 'policy is'} exhausted; retry ${retryWhen(decision, reset)}.`,
    'violated-policies': violated,
    retryAfterMs: decision.retryAfterMs,
    retryAfterBasis: decision.retryAfterBasis,
  }
}

/** `err.code` when it is a string; never throws (a user's error may have a throwing getter). */
function codeOf(err) {
  try {
    return err !== null && typeof err === 'object' && typeof err.code === 'string' ? err.code : undefined
  } catch {
    return undefined
  }
}

/** An error from a limiter, the key or cost function, or onLimited: next(err), else a 500 problem. */
function failed(err, res, next) {
  if (next) {
    next(err)
    return
  }
  if (res.headersSent) {
    res.destroy?.(err instanceof Error ? err : undefined)
    return
  }
  const problem = { type: 'about:blank', title: 'Internal Server Error', status: 500, detail: 'The rate limiter could not decide on this request.' }
  const code = codeOf(err)
  if (code !== undefined) problem.code = code
  sendProblem(res, 500, problem)
}

module.exports = { PROBLEM_CONTENT_TYPE, sendProblem, quotaExceededProblem, failed }
