'use strict'
// The middleware's own responses: an RFC 9457 problem (429 quota exceeded, 503, 500).

const PROBLEM_TYPE_QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded'
const PROBLEM_CONTENT_TYPE = 'application/problem+json'

function sendProblem(res, status, problem, extraHeaders) {
  const body = JSON.stringify(problem)
  res.statusCode = status
  if (extraHeaders !== undefined) for (const [name, value] of extraHeaders) res.setHeader(name, value)
  res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
  res.setHeader('Content-Length', Buffer.byteLength(body))
  res.end(body)
}

function waitSentence(seconds) {
  return seconds === 1 ? '1 second' : `${seconds} seconds`
}

function quotaExceededProblem(decision, violated) {
  const seconds = Math.ceil(decision.retryAfterMs / 1000)
  const which = violated.map((name) => `"${name}"`).join(' and ')
  return {
    type: PROBLEM_TYPE_QUOTA_EXCEEDED,
    title: 'Too Many Requests',
    status: 429,
    detail: `The ${which} rate limit ${violated.length > 1 ? 'policies are' : 'policy is'} exhausted; retry after ${waitSentence(seconds)}.`,
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
