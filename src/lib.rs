//! quota-clock-source: a rate limiter that keeps the monotonic and the wall clock apart.
//!
//! The core (everything but `napi`) is pure Rust and knows nothing of JavaScript.

pub mod anomaly;
pub mod bucket;
pub mod calendar;
pub mod clock;
pub mod contract;
pub mod error;
pub mod keyed;
pub mod limiter;
pub mod quota;
pub mod reconciler;
pub mod stats;

// Property tests of the limiter over random clock histories.
#[cfg(test)]
mod properties;

// `cargo test` covers the core; the binding is exercised by the JS suite against the built addon.
#[cfg(all(feature = "napi-binding", not(test)))]
mod napi;
