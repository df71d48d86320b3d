//! The only code that knows about JavaScript: classes, option conversion, errors, the
//! threadsafe anomaly callback and the shared result buffer of the hot path.

mod anomaly;
mod calendar;
mod clock;
mod errors;
mod floor;
mod keyed;
mod limiter;
mod raw;
