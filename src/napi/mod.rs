//! The only code that knows about JavaScript (its modules: ARCHITECTURE.md's binding table).
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
mod object;
#[cfg(not(test))]
mod options;
#[cfg(all(feature = "probes", not(test)))]
mod probes;
#[cfg(not(test))]
mod raw;
#[cfg(not(test))]
mod registry;
