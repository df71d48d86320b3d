//! The only code that knows about JavaScript, by concern:
//! - `contract`: the JS↔native contract (codes, unions, result-buffer layout), read at load;
//! - `options`: the create entry points' input objects and their checks;
//! - `buffer`: the shared result buffer of the hot paths;
//! - `registry`, `consume`, `limiter`: `QuotaClock`'s registries, its `tryConsume`, its other
//!   entry points; `keyed/`: `KeyedQuotaClock`'s;
//! - `clock`, `manual_clock`, `calendar`, `anomaly`, `errors`, `raw`: clock sources, the manual
//!   clock, `periodFor`, anomaly delivery, coded errors, raw N-API functions;
//! - `probes` (cargo feature `probes` only): the benchmark's and the lifecycle tests' probes.

mod anomaly;
mod buffer;
mod calendar;
mod clock;
mod consume;
mod contract;
mod errors;
mod keyed;
mod limiter;
mod manual_clock;
mod options;
#[cfg(feature = "probes")]
mod probes;
mod raw;
mod registry;
