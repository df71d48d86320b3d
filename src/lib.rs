//! quota-clock-source: a rate limiter that keeps the monotonic and the wall clock apart.
//!
//! The core (everything but `napi`) is pure Rust and knows nothing of JavaScript.

pub mod anomaly;
pub mod bucket;
pub mod calendar;
pub mod clock;
pub mod limiter;
pub mod quota;

#[cfg(feature = "napi-binding")]
mod napi;
