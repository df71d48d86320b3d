'use strict'
// A process of a zone test: opens the zone with the options in argv[2] (JSON) and runs a mode.
//   drain <key> <calls>: calls tryConsume(key) that many times, prints the count allowed.
//   loop <countFile>: calls tryConsume forever, on the key 'hot' and (every other call) on one
//     of 1000 churning keys that make room for each other; after each allowed call on 'hot' it
//     writes the running count into countFile (8 bytes, LE), so a kill loses at most the one
//     call in flight.
//   spin: calls tryConsume('hot') forever, nothing else (most of its time is inside a lock).
//   run <script>: runs a script with `limiter` and `print` in scope.
const fs = require('node:fs')
const path = require('node:path')
const { KeyedQuotaClock } = require(path.join(__dirname, '..', '..'))

const [mode, ...rest] = process.argv.slice(3)
const options = JSON.parse(process.argv[2])
if (options.policyOf !== undefined) {
  const plans = options.policyOf
  delete options.policyOf
  options.policy = (key) => {
    if (plans.throwFor === key) throw new Error(`policy called for ${key} in ${process.pid}`)
    // A plan named 'prefix*' is every key that starts with prefix.
    const prefix = Object.keys(plans).find((name) => name.endsWith('*') && key.startsWith(name.slice(0, -1)))
    return prefix === undefined ? plans[key] : plans[prefix]
  }
}
const limiter = new KeyedQuotaClock(options)
const print = (value) => process.stdout.write(JSON.stringify(value) + '\n')
// The endless modes end with the test process that started them (should it die first).
const parent = process.ppid
const orphaned = (i) => (i & 0x3fff) === 0 && process.ppid !== parent

if (mode === 'drain') {
  const [key, calls] = rest
  let allowed = 0
  for (let i = 0; i < Number(calls); i++) if (limiter.tryConsume(key).allowed) allowed++
  print({ allowed })
} else if (mode === 'loop') {
  const fd = fs.openSync(rest[0], 'w')
  const buffer = Buffer.alloc(8)
  let allowed = 0
  let i = 0
  print({ ready: true })
  while (!orphaned(i)) {
    if (i++ % 2 === 0) {
      limiter.tryConsume(`churn${Math.floor(Math.random() * 1000)}`)
      continue
    }
    if (limiter.tryConsume('hot').allowed) {
      allowed++
      buffer.writeBigUInt64LE(BigInt(allowed))
      fs.writeSync(fd, buffer, 0, 8, 0)
    }
  }
} else if (mode === 'spin') {
  print({ ready: true })
  for (let i = 0; !orphaned(i); i++) limiter.tryConsume('hot')
} else if (mode === 'run') {
  new Function('limiter', 'print', rest[0])(limiter, print)
}
