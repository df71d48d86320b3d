//! The host's clocks, read without going through JavaScript: a monotonic clock that stops while
//! the host is suspended, the wall clock, and (where the platform has one) a suspend-inclusive
//! elapsed-realtime clock.
//!
//! | platform | monotonic (stops in suspend) | elapsed realtime (counts suspend) | wall |
//! |---|---|---|---|
//! | Linux | `CLOCK_MONOTONIC` | `CLOCK_BOOTTIME` | `CLOCK_REALTIME` |
//! | macOS | `mach_absolute_time` | `mach_continuous_time` | `CLOCK_REALTIME` |
//! | Windows | `QueryUnbiasedInterruptTimePrecise` | `QueryInterruptTimePrecise` | `GetSystemTimePreciseAsFileTime` |
//!
//! (macOS's own `CLOCK_MONOTONIC` keeps counting while the Mac sleeps, so it is not used there.)

use super::ClockSource;
use crate::error::Error;

/// Whether Linux `CLOCK_BOOTTIME` exists here (`procUptimeElapsedRealtime()`).
pub const BOOTTIME_SUPPORTED: bool = cfg!(any(target_os = "linux", target_os = "android"));

/// Whether this platform has a native suspend-inclusive clock (`hostElapsedRealtime()`).
pub const ELAPSED_REALTIME_SUPPORTED: bool = cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    windows
));

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

/// `CLOCK_REALTIME` in milliseconds since the Unix epoch.
#[cfg(unix)]
#[inline]
pub fn wall_ms() -> f64 {
    read(libc::CLOCK_REALTIME)
}

/// `CLOCK_MONOTONIC` in milliseconds.
#[cfg(all(unix, not(target_vendor = "apple")))]
#[inline]
pub fn monotonic_ms() -> f64 {
    read(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_BOOTTIME` (the counter behind /proc/uptime) in milliseconds.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
pub fn elapsed_realtime_ms() -> f64 {
    read(libc::CLOCK_BOOTTIME)
}

#[cfg(target_vendor = "apple")]
mod apple {
    use mach2::mach_time::{
        mach_absolute_time, mach_continuous_time, mach_timebase_info, mach_timebase_info_data_t,
    };
    use std::sync::OnceLock;

    /// Milliseconds per tick of the Mach clocks (1e-6 on Intel, 125/3 * 1e-6 on Apple silicon).
    #[inline]
    fn ms_per_tick() -> f64 {
        static MS_PER_TICK: OnceLock<f64> = OnceLock::new();
        *MS_PER_TICK.get_or_init(|| {
            let mut info = mach_timebase_info_data_t::default();
            // SAFETY: `info` is a valid, writable mach_timebase_info.
            let status = unsafe { mach_timebase_info(&mut info) };
            if status != 0 || info.denom == 0 {
                return 1e-6;
            }
            f64::from(info.numer) / f64::from(info.denom) * 1e-6
        })
    }

    /// `mach_absolute_time` (stops while the Mac sleeps) in milliseconds.
    #[inline]
    pub fn monotonic_ms() -> f64 {
        // SAFETY: no arguments, no failure.
        (unsafe { mach_absolute_time() }) as f64 * ms_per_tick()
    }

    /// `mach_continuous_time` (keeps counting while the Mac sleeps; macOS 10.12 and later) in
    /// milliseconds.
    #[inline]
    pub fn elapsed_realtime_ms() -> f64 {
        // SAFETY: no arguments, no failure.
        (unsafe { mach_continuous_time() }) as f64 * ms_per_tick()
    }
}

#[cfg(target_vendor = "apple")]
pub use apple::{elapsed_realtime_ms, monotonic_ms};

#[cfg(windows)]
mod windows {
    // Windows 10 and later (what Node itself requires).
    windows_link::link!("api-ms-win-core-realtime-l1-1-1.dll" "system" fn QueryInterruptTimePrecise(lpinterrupttimeprecise: *mut u64));
    windows_link::link!("api-ms-win-core-realtime-l1-1-1.dll" "system" fn QueryUnbiasedInterruptTimePrecise(lpunbiasedinterrupttimeprecise: *mut u64));

    /// The interrupt time counts 100 ns units.
    const MS_PER_UNIT: f64 = 1e-4;

    /// `QueryUnbiasedInterruptTimePrecise` (stops while the host sleeps or hibernates) in milliseconds.
    #[inline]
    pub fn monotonic_ms() -> f64 {
        let mut now = 0u64;
        // SAFETY: `now` is a valid, writable u64.
        unsafe { QueryUnbiasedInterruptTimePrecise(&mut now) };
        now as f64 * MS_PER_UNIT
    }

    /// `QueryInterruptTimePrecise` (counts sleep and hibernation) in milliseconds.
    #[inline]
    pub fn elapsed_realtime_ms() -> f64 {
        let mut now = 0u64;
        // SAFETY: `now` is a valid, writable u64.
        unsafe { QueryInterruptTimePrecise(&mut now) };
        now as f64 * MS_PER_UNIT
    }
}

#[cfg(windows)]
pub use windows::{elapsed_realtime_ms, monotonic_ms};

/// A monotonic reading from `Instant` where the platform has none of the above.
#[cfg(not(any(unix, windows)))]
pub fn monotonic_ms() -> f64 {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_secs_f64()
        * 1e3
}

/// The wall clock (`GetSystemTimePreciseAsFileTime` on Windows) in milliseconds since the Unix epoch.
#[cfg(not(unix))]
pub fn wall_ms() -> f64 {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64() * 1e3,
        Err(before) => -before.duration().as_secs_f64() * 1e3,
    }
}

/// Not reachable: callers check [`ELAPSED_REALTIME_SUPPORTED`] first.
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    windows
)))]
pub fn elapsed_realtime_ms() -> f64 {
    f64::NAN
}

/// `systemClock()`: the host's monotonic and wall clocks, optionally its suspend-inclusive clock
/// as the elapsed-realtime reader.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    pub with_elapsed_realtime: bool,
}

impl ClockSource for SystemClock {
    fn monotonic_ms(&mut self) -> Result<f64, Error> {
        Ok(monotonic_ms())
    }
    fn wall_ms(&mut self) -> Result<f64, Error> {
        Ok(wall_ms())
    }
    fn has_elapsed_realtime(&self) -> bool {
        self.with_elapsed_realtime
    }
    fn elapsed_realtime_ms(&mut self) -> Result<f64, Error> {
        Ok(elapsed_realtime_ms())
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
            "the wall clock should be after 2020"
        );
        if ELAPSED_REALTIME_SUPPORTED {
            assert!(elapsed_realtime_ms() >= monotonic_ms() - 1.0);
        }
    }

    #[test]
    fn both_host_clocks_move_and_the_suspend_inclusive_one_is_never_behind() {
        if !ELAPSED_REALTIME_SUPPORTED {
            return;
        }
        let (monotonic, elapsed) = (monotonic_ms(), elapsed_realtime_ms());
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let (monotonic_later, elapsed_later) = (monotonic_ms(), elapsed_realtime_ms());
        assert!(
            monotonic_later - monotonic >= 15.0,
            "{monotonic} -> {monotonic_later}"
        );
        assert!(
            elapsed_later - elapsed >= 15.0,
            "{elapsed} -> {elapsed_later}"
        );
        assert!(elapsed_later >= monotonic_later - 1.0);
    }
}
