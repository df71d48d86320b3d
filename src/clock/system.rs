//! The host's clocks, read without going through JavaScript.

use super::ClockSource;
use crate::error::Error;

/// Whether this platform has a suspend-inclusive clock (Linux `CLOCK_BOOTTIME`).
pub const BOOTTIME_SUPPORTED: bool = cfg!(any(target_os = "linux", target_os = "android"));

#[cfg(unix)]
#[inline]
fn read(clock_id: libc::clockid_t) -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; the clock ids used here exist on this platform.
    unsafe { libc::clock_gettime(clock_id, &mut now) };
    // A multiplication, not a division: this runs twice on every call.
    now.tv_sec as f64 * 1e3 + now.tv_nsec as f64 * 1e-6
}

/// `CLOCK_MONOTONIC` in milliseconds.
#[cfg(unix)]
#[inline]
pub fn monotonic_ms() -> f64 {
    read(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in milliseconds since the Unix epoch.
#[cfg(unix)]
#[inline]
pub fn wall_ms() -> f64 {
    read(libc::CLOCK_REALTIME)
}

/// `CLOCK_BOOTTIME` (the counter behind /proc/uptime) in milliseconds.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub fn boottime_ms() -> f64 {
    read(libc::CLOCK_BOOTTIME)
}

#[cfg(not(unix))]
fn process_epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// A monotonic reading from `Instant` where `clock_gettime` does not exist.
#[cfg(not(unix))]
pub fn monotonic_ms() -> f64 {
    process_epoch().elapsed().as_secs_f64() * 1e3
}

#[cfg(not(unix))]
pub fn wall_ms() -> f64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64() * 1e3,
        Err(before) => -before.duration().as_secs_f64() * 1e3,
    }
}

/// Not reachable: callers check [`BOOTTIME_SUPPORTED`] first.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub fn boottime_ms() -> f64 {
    f64::NAN
}

/// `systemClock()`: CLOCK_MONOTONIC and CLOCK_REALTIME, optionally CLOCK_BOOTTIME as the reader.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    pub with_boottime: bool,
}

impl ClockSource for SystemClock {
    fn monotonic_ms(&mut self) -> Result<f64, Error> {
        Ok(monotonic_ms())
    }
    fn wall_ms(&mut self) -> Result<f64, Error> {
        Ok(wall_ms())
    }
    fn has_elapsed_realtime(&self) -> bool {
        self.with_boottime
    }
    fn elapsed_realtime_ms(&mut self) -> Result<f64, Error> {
        Ok(boottime_ms())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clocks_read_plausible_values() {
        let first = monotonic_ms();
        let second = monotonic_ms();
        assert!(second >= first);
        assert!(
            wall_ms() > 1_577_836_800_000.0,
            "CLOCK_REALTIME should be after 2020"
        );
        if BOOTTIME_SUPPORTED {
            assert!(boottime_ms() >= monotonic_ms() - 1.0);
        }
    }
}
