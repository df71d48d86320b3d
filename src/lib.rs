//! quota-clock-source: a rate limiter that keeps the monotonic and the wall clock apart.
//!
//! The core (everything but `napi`) is pure Rust and knows nothing of the binding: no N-API type,
//! no result buffer or status, no JS class or method name (a clock error names its reading, and
//! the binding says which JS method that is). Its messages are written for the package's users,
//! so they name options as the public API spells them and print numbers as JavaScript does
//! (`text`). `napi` imports the core; nothing in the core imports `napi`. See ARCHITECTURE.md.

pub mod anomaly;
pub mod args;
pub mod bucket;
pub mod calendar;
pub mod clock;
pub mod error;
pub mod kernel;
pub mod keyed;
pub mod limiter;
pub mod limits;
pub mod quota;
pub mod reconciler;
pub mod stats;
pub mod text;
#[cfg(target_os = "linux")]
pub mod zone;

// Property tests of the limiter over random clock histories.
#[cfg(test)]
mod properties;

// `cargo test` covers the core and the binding's pure parts (the result buffer's layout, the JS
// names); the rest of the binding is exercised by the JS suite against the built addon.
#[cfg(any(test, feature = "napi-binding"))]
mod napi;
