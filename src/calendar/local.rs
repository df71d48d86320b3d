//! Local-time resolution against chrono-tz: UTC offsets, DST gaps and repeats, date-line jumps.
//!
//! All times here are whole seconds: tzdata offsets and transitions are whole seconds, and so are
//! slot start times, so every instant computed here is exact.

use chrono::{DateTime, LocalResult, Offset, TimeZone};
use chrono_tz::Tz;

use super::civil::{days_from_civil, SECONDS_PER_DAY};
use super::StartKind;

/// chrono-tz holds its transitions between 1844 and 2099 and a constant offset outside them.
/// Queries are clamped into this window, which keeps chrono's own date range out of the way.
const TABLE_FIRST_SECS: i64 = days_from_civil(1800, 1, 1) * SECONDS_PER_DAY;
const TABLE_LAST_SECS: i64 = days_from_civil(2101, 1, 1) * SECONDS_PER_DAY;

/// Larger than any UTC offset tzdata has ever used (Asia/Manila's LMT was −15:56:08).
const MAX_OFFSET_SECS: i64 = 26 * 3600;

/// The UTC offset (local minus UTC, seconds) in force at the instant `utc_secs`.
pub(super) fn offset_at(tz: Tz, utc_secs: i64) -> i64 {
    let clamped = utc_secs.clamp(TABLE_FIRST_SECS, TABLE_LAST_SECS);
    DateTime::from_timestamp(clamped, 0).map_or(0, |utc| {
        i64::from(
            tz.offset_from_utc_datetime(&utc.naive_utc())
                .fix()
                .local_minus_utc(),
        )
    })
}

/// Where a local wall time falls on the UTC time line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Resolved {
    pub utc_secs: i64,
    pub kind: StartKind,
}

/// the first instant whose local time is `local_secs` (seconds since 1970-01-01T00:00
/// local); in a DST gap, the instant the gap closes.
pub(super) fn resolve_local(tz: Tz, local_secs: i64) -> Resolved {
    let in_table = TABLE_FIRST_SECS + MAX_OFFSET_SECS < local_secs
        && local_secs < TABLE_LAST_SECS - MAX_OFFSET_SECS;
    let naive = match DateTime::from_timestamp(local_secs, 0) {
        Some(as_utc) if in_table => as_utc.naive_utc(),
        // Beyond the table the offset is constant: the local time occurs exactly once.
        _ => {
            return Resolved {
                utc_secs: local_secs - offset_at(tz, local_secs),
                kind: StartKind::Exact,
            }
        }
    };
    match tz.offset_from_local_datetime(&naive) {
        LocalResult::Single(offset) => Resolved {
            utc_secs: local_secs - i64::from(offset.fix().local_minus_utc()),
            kind: StartKind::Exact,
        },
        // The first occurrence is the one under the larger offset.
        LocalResult::Ambiguous(a, b) => Resolved {
            utc_secs: local_secs
                - i64::from(a.fix().local_minus_utc().max(b.fix().local_minus_utc())),
            kind: StartKind::Repeat,
        },
        LocalResult::None => Resolved {
            utc_secs: gap_end(tz, local_secs),
            kind: StartKind::Gap,
        },
    }
}

/// The instant a gap containing `local_secs` closes: the first instant whose local time is at
/// or after `local_secs`, found by bisection on whole seconds (exact, about 18 offset lookups).
///
/// The bracket holds because no offset reaches ±26 h: local time at `low` is before
/// `local_secs` and at `high` is at or after it. Bisection needs local time to cross
/// `local_secs` only once in the bracket, which holds here: the local time never occurs, so
/// crossing it twice would take two gaps around it with a fall-back in between, within 52 h.
fn gap_end(tz: Tz, local_secs: i64) -> i64 {
    let mut low = local_secs - MAX_OFFSET_SECS - 1;
    let mut high = local_secs + MAX_OFFSET_SECS;
    while high - low > 1 {
        let middle = low + (high - low) / 2;
        if middle + offset_at(tz, middle) >= local_secs {
            high = middle;
        } else {
            low = middle;
        }
    }
    high
}

/// A forward offset jump of at least a day (a zone moving across the date line, such as
/// Pacific/Apia on 2011-12-30). Only such a jump can swallow a whole local day and so make a
/// day slot zero-length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct DateLineJump {
    /// The instant of the transition.
    pub at_secs: i64,
    pub offset_before_secs: i64,
    pub offset_after_secs: i64,
}

/// Every forward offset jump of a day or more in the zone's table, oldest first.
///
/// The table is sampled weekly (about 15 700 lookups, a fraction of a millisecond) and each
/// sample pair whose offset rose by more than half a day is bisected to the exact instant.
/// Exact as long as no zone crosses the date line twice within one week, which no zone in
/// tzdata has ever done.
pub(super) fn date_line_jumps(tz: Tz) -> Vec<DateLineJump> {
    const SAMPLE_STEP_SECS: i64 = 7 * SECONDS_PER_DAY;
    const HALF_DAY_SECS: i64 = SECONDS_PER_DAY / 2;
    let mut jumps = Vec::new();
    let mut previous_secs = TABLE_FIRST_SECS;
    let mut previous_offset = offset_at(tz, previous_secs);
    while previous_secs < TABLE_LAST_SECS {
        let sample_secs = (previous_secs + SAMPLE_STEP_SECS).min(TABLE_LAST_SECS);
        let sample_offset = offset_at(tz, sample_secs);
        if sample_offset - previous_offset > HALF_DAY_SECS {
            let (mut low, mut high) = (previous_secs, sample_secs);
            while high - low > 1 {
                let middle = low + (high - low) / 2;
                if offset_at(tz, middle) - previous_offset > HALF_DAY_SECS {
                    high = middle;
                } else {
                    low = middle;
                }
            }
            let jump = DateLineJump {
                at_secs: high,
                offset_before_secs: offset_at(tz, high - 1),
                offset_after_secs: offset_at(tz, high),
            };
            if jump.offset_after_secs - jump.offset_before_secs >= SECONDS_PER_DAY {
                jumps.push(jump);
            }
        }
        previous_secs = sample_secs;
        previous_offset = sample_offset;
    }
    jumps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc_secs(year: i64, month: u32, day: u32, hour: i64, minute: i64) -> i64 {
        days_from_civil(year, month, day) * SECONDS_PER_DAY + hour * 3600 + minute * 60
    }

    #[test]
    fn a_gap_resolves_to_the_exact_second_it_closes() {
        let resolved = resolve_local(chrono_tz::America::New_York, utc_secs(2024, 3, 10, 2, 30));
        assert_eq!(resolved.kind, StartKind::Gap);
        assert_eq!(resolved.utc_secs, utc_secs(2024, 3, 10, 7, 0));
    }

    #[test]
    fn a_repeated_time_resolves_to_its_first_occurrence() {
        let resolved = resolve_local(chrono_tz::America::New_York, utc_secs(2024, 11, 3, 1, 30));
        assert_eq!(resolved.kind, StartKind::Repeat);
        assert_eq!(resolved.utc_secs, utc_secs(2024, 11, 3, 5, 30));
    }

    #[test]
    fn times_beyond_the_table_use_its_constant_offset() {
        let far_future = days_from_civil(275_000, 7, 1) * SECONDS_PER_DAY;
        let resolved = resolve_local(chrono_tz::Asia::Tokyo, far_future);
        assert_eq!(
            resolved,
            Resolved {
                utc_secs: far_future - 9 * 3600,
                kind: StartKind::Exact
            }
        );
        let far_past = days_from_civil(-270_000, 7, 1) * SECONDS_PER_DAY;
        assert_eq!(resolve_local(chrono_tz::UTC, far_past).utc_secs, far_past);
    }

    #[test]
    fn apia_jumped_a_whole_day_forward_on_2011_12_30() {
        let jumps = date_line_jumps(chrono_tz::Pacific::Apia);
        assert!(jumps.contains(&DateLineJump {
            at_secs: utc_secs(2011, 12, 30, 10, 0),
            offset_before_secs: -10 * 3600,
            offset_after_secs: 14 * 3600,
        }));
        assert!(date_line_jumps(chrono_tz::Europe::Berlin).is_empty());
        assert!(date_line_jumps(chrono_tz::UTC).is_empty());
    }
}
