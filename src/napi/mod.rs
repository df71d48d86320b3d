//! The only code that knows about JavaScript, by concern:
//! - `buffer`: the shared result buffer (its layout, statuses and codes, defined here once), and
//!   `Needs`, what a call asks of the JS face before it can go on;
//! - `names`: the JS names of the core's values (error classes, a JS clock's methods);
//! - `contract`: `contract()`, which exports both for the JS face to read at load;
//! - `options`: the create entry points' input objects and their checks;
//! - `registry`, `consume`, `limiter`: `QuotaClock`'s registries, its `tryConsume` (and the
//!   registry's creation with its raw functions), its other entry points; `keyed/`:
//!   `KeyedQuotaClock`'s;
//! - `clock`, `manual_clock`, `calendar`, `anomaly`, `errors`, `raw`: clock sources, the manual
//!   clock, `periodFor`, anomaly delivery, coded errors, raw N-API functions;
//! - `probes` (cargo feature `probes` only): the benchmark's and the lifecycle tests' probes.
//!
//! `buffer` and `names` are pure Rust, compiled by `cargo test` too; the rest needs Node.

mod buffer;
mod names;

#[cfg(not(test))]
mod anomaly;
#[cfg(not(test))]
mod calendar;
#[cfg(not(test))]
mod clock;
#[cfg(not(test))]
mod consume;
#[cfg(not(test))]
mod contract;
#[cfg(not(test))]
mod errors;
#[cfg(not(test))]
mod keyed;
#[cfg(not(test))]
mod limiter;
#[cfg(not(test))]
mod manual_clock;
#[cfg(not(test))]
mod options;
#[cfg(all(feature = "probes", not(test)))]
mod probes;
#[cfg(not(test))]
mod raw;
#[cfg(not(test))]
mod registry;
