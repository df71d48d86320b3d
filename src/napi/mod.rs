//! The only code that knows about JavaScript: classes, option conversion, errors, the
//! threadsafe anomaly callback and the shared result buffer of the hot path.

mod anomaly;
mod buffer;
mod calendar;
mod clock;
mod consume;
mod contract;
mod errors;
mod keyed;
mod limiter;
mod options;
#[cfg(feature = "probes")]
mod probes;
mod raw;
mod registry;
