//! calendar periods (day, week, month, year) in an IANA time zone.
//!
//! A period is a calendar slot. Slot `k` starts at the anchor time on its anchor date, resolved
//! against the zone's rules (a start inside a DST gap snaps to the instant the gap closes, a
//! repeated start takes its first occurrence) and ends where slot `k + 1` starts. Slot starts
//! never decrease with `k`, so periods tile time; a slot that comes out zero-length (a date
//! that never happened, such as 2011-12-30 in Pacific/Apia) is not a period.
//!
//! Pure Rust: no JavaScript types. Zone rules come from chrono-tz.

mod civil;
mod local;

use std::fmt;
use std::sync::OnceLock;

use chrono_tz::Tz;

use crate::error::{Error, ErrorCode};
use crate::text::{js_number, js_quoted};
use civil::{civil_from_days, days_from_civil, days_in_month, SECONDS_PER_DAY};
use local::{date_line_jumps, offset_at, resolve_local, DateLineJump, Resolved};

/// The length of a quota period.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeriodUnit {
    Day,
    Week,
    Month,
    Year,
}

impl PeriodUnit {
    /// Every unit, once.
    pub const ALL: [PeriodUnit; 4] = [
        PeriodUnit::Day,
        PeriodUnit::Week,
        PeriodUnit::Month,
        PeriodUnit::Year,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PeriodUnit::Day => "day",
            PeriodUnit::Week => "week",
            PeriodUnit::Month => "month",
            PeriodUnit::Year => "year",
        }
    }
}

/// How a period's local start time met the zone's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartKind {
    /// The local start time occurred exactly once.
    Exact,
    /// The local start time fell in a DST gap; the period starts when the gap closes.
    Gap,
    /// The local start time occurred twice; the period starts at the first occurrence.
    Repeat,
}

impl StartKind {
    /// Every kind, once.
    pub const ALL: [StartKind; 3] = [StartKind::Exact, StartKind::Gap, StartKind::Repeat];

    pub fn as_str(self) -> &'static str {
        match self {
            StartKind::Exact => "exact",
            StartKind::Gap => "gap",
            StartKind::Repeat => "repeat",
        }
    }
}

/// One calendar period: the half-open interval `[start_ms, end_ms)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Period {
    /// 'YYYY-MM-DD' for day and week (the week's anchor date), 'YYYY-MM' for month, 'YYYY' for
    /// year. Years outside 0..=9999 are written like JavaScript's `toISOString`: '+010000'.
    pub id: String,
    /// First instant of the period, Unix ms.
    pub start_ms: f64,
    /// First instant of the next period, Unix ms.
    pub end_ms: f64,
    pub start_kind: StartKind,
    pub slot: PeriodSlot,
}

/// A period's slot index, +1 per slot: days since 1970-01-01 (day), weeks since the first anchor
/// weekday on or after 1970-01-01 (week), `year * 12 + month - 1` (month), the year (year).
/// Slots of periods within the JS Date range are within ±1e8, so every form below is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeriodSlot(pub i64);

impl PeriodSlot {
    /// "No period", where a slot is stored without an `Option` (the zone's records).
    pub const NONE: PeriodSlot = PeriodSlot(i64::MIN);

    /// The number the result buffer carries for "no period" (a keyed or zone decision with no
    /// quota): the key table's `NO_PERIOD`.
    pub const NONE_NUMBER: f64 = i32::MIN as f64;

    /// The slot as the result buffer carries it.
    #[inline]
    pub fn to_number(self) -> f64 {
        self.0 as f64
    }

    /// The slot as the result buffer carries it, [`PeriodSlot::NONE`] as "no period".
    pub fn to_number_or_none(self) -> f64 {
        if self == Self::NONE {
            Self::NONE_NUMBER
        } else {
            self.to_number()
        }
    }

    /// A slot back from the result buffer (a give-back's argument): a whole number within
    /// ±(2^53 - 1) other than the "no period" number; anything else names no period.
    pub fn from_number(number: f64) -> Option<PeriodSlot> {
        (number.fract() == 0.0
            && number.abs() <= 9_007_199_254_740_991.0
            && number != Self::NONE_NUMBER)
            .then_some(PeriodSlot(number as i64))
    }

    /// The slot in the key table's 32-bit form (clamped; `NO_PERIOD`, i32::MIN, never results).
    #[inline]
    pub fn compact(self) -> i32 {
        self.0.clamp(i64::from(i32::MIN) + 1, i64::from(i32::MAX)) as i32
    }

    /// The slot in the key table's 32-bit form, if it fits exactly.
    pub fn exact_compact(self) -> Option<i32> {
        i32::try_from(self.0).ok()
    }
}

/// Whether `wall_ms` falls inside the period `[start_ms, end_ms)`: the one rule for every holder
/// of a period's bounds.
#[inline(always)]
pub fn inside_period(wall_ms: f64, start_ms: f64, end_ms: f64) -> bool {
    wall_ms >= start_ms && wall_ms < end_ms
}

impl Period {
    /// Whether `wall_ms` falls inside `[start_ms, end_ms)`.
    #[inline]
    pub fn contains(&self, wall_ms: f64) -> bool {
        inside_period(wall_ms, self.start_ms, self.end_ms)
    }
}

/// Raw, already type-checked values of a `QuotaPeriodSpec`.
#[derive(Clone, Copy, Debug)]
pub struct RawPeriodSpec<'a> {
    pub unit: &'a str,
    pub time_zone: &'a str,
    pub anchor_day: Option<f64>,
    pub anchor_month: Option<f64>,
    pub anchor_time: Option<&'a str>,
}

/// A validated spec's fields; an anchor that does not apply to the unit is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpecIdentity {
    pub unit: PeriodUnit,
    pub time_zone: Tz,
    pub anchor_day: u32,
    pub anchor_month: u32,
    /// Local reset time, seconds after midnight.
    pub anchor_time_secs: i64,
}

/// A validated `QuotaPeriodSpec`.
#[derive(Clone)]
pub struct PeriodSpec {
    unit: PeriodUnit,
    time_zone: Tz,
    /// Day of month 1..=31 (month, year) or ISO weekday 1..=7 (week); unused for day.
    anchor_day: u32,
    /// Month 1..=12 (year); unused otherwise.
    anchor_month: u32,
    /// Local reset time, seconds after midnight.
    anchor_time_secs: i64,
    /// The zone's date-line jumps, found on the first `periods_between` of a day spec.
    date_line_jumps: OnceLock<Vec<DateLineJump>>,
}

/// The spec's settings; the cache of date-line jumps is not part of what it is.
impl fmt::Debug for PeriodSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeriodSpec")
            .field("unit", &self.unit)
            .field("time_zone", &self.time_zone)
            .field("anchor_day", &self.anchor_day)
            .field("anchor_month", &self.anchor_month)
            .field("anchor_time_secs", &self.anchor_time_secs)
            .finish_non_exhaustive()
    }
}

fn start_ms(start: Resolved) -> f64 {
    // Exact: |utc_secs| stays below 2^53 / 1000 for any slot near the JavaScript Date range.
    (start.utc_secs * 1000) as f64
}

/// The largest |wall time| the calendar (and the plausibility check) accepts, in Unix ms:
/// ±8.64e15 ms, the range of a JavaScript `Date`. The calendar is defined within it.
pub const MAX_WALL_MS: f64 = 8.64e15;

impl PeriodSpec {
    /// Validates a raw spec. `option_path` prefixes option names in messages, e.g.
    /// "quota.period" → "quota.period.anchorDay".
    pub fn parse(raw: &RawPeriodSpec, option_path: &str) -> Result<PeriodSpec, Error> {
        let option = |name: &str| {
            if option_path.is_empty() {
                name.to_owned()
            } else {
                format!("{option_path}.{name}")
            }
        };
        let invalid = |message: String| Error::invalid_option(message);

        let unit = match raw.unit {
            "day" => PeriodUnit::Day,
            "week" => PeriodUnit::Week,
            "month" => PeriodUnit::Month,
            "year" => PeriodUnit::Year,
            "hour" | "minute" | "second" => {
                return Err(Error::Invalid {
                    code: ErrorCode::SubDayPeriod,
                    message: format!(
                        "{} must be 'day', 'week', 'month' or 'year': a calendar quota has no \
                         sub-day periods (use capacity and refillPerSecond for rates within a \
                         day); received {}",
                        option("unit"),
                        js_quoted(raw.unit)
                    ),
                })
            }
            other => {
                return Err(invalid(format!(
                    "{} must be 'day', 'week', 'month' or 'year'; received {}",
                    option("unit"),
                    js_quoted(other)
                )))
            }
        };

        let time_zone: Tz = raw.time_zone.parse().map_err(|_| Error::Invalid {
            code: ErrorCode::UnknownTimeZone,
            message: format!(
                "{} must be an IANA time zone name such as 'America/Los_Angeles' or 'UTC' \
                 (names are case-sensitive); received {}, which is not a known time zone",
                option("timeZone"),
                js_quoted(raw.time_zone)
            ),
        })?;

        let anchor_day = match (unit, raw.anchor_day) {
            (_, None) => 1,
            (PeriodUnit::Day, Some(value)) => {
                return Err(invalid(format!(
                    "{} does not apply to unit 'day' (a day period starts at anchorTime on every \
                     date); received {}",
                    option("anchorDay"),
                    js_number(value)
                )))
            }
            (PeriodUnit::Week, Some(value)) => integer_in(value, 1, 7).ok_or_else(|| {
                invalid(format!(
                    "{} must be an integer from 1 (Monday) to 7 (Sunday) for unit 'week'; \
                     received {}",
                    option("anchorDay"),
                    js_number(value)
                ))
            })?,
            (PeriodUnit::Month | PeriodUnit::Year, Some(value)) => integer_in(value, 1, 31)
                .ok_or_else(|| {
                    invalid(format!(
                        "{} must be an integer from 1 to 31 for unit '{}'; received {}",
                        option("anchorDay"),
                        unit.as_str(),
                        js_number(value)
                    ))
                })?,
        };

        let anchor_month = match (unit, raw.anchor_month) {
            (_, None) => 1,
            (PeriodUnit::Year, Some(value)) => integer_in(value, 1, 12).ok_or_else(|| {
                invalid(format!(
                    "{} must be an integer from 1 to 12; received {}",
                    option("anchorMonth"),
                    js_number(value)
                ))
            })?,
            (_, Some(value)) => {
                return Err(invalid(format!(
                    "{} applies only to unit 'year', not '{}'; received {}",
                    option("anchorMonth"),
                    unit.as_str(),
                    js_number(value)
                )))
            }
        };

        let anchor_time_secs = match raw.anchor_time {
            None => 0,
            Some(text) => parse_anchor_time(text).ok_or_else(|| {
                invalid(format!(
                    "{} must be a local time 'HH:MM' or 'HH:MM:SS' from '00:00' to '23:59:59'; \
                     received {}",
                    option("anchorTime"),
                    js_quoted(text)
                ))
            })?,
        };

        Ok(PeriodSpec {
            unit,
            time_zone,
            anchor_day,
            anchor_month,
            anchor_time_secs,
            date_line_jumps: OnceLock::new(),
        })
    }

    pub fn unit(&self) -> PeriodUnit {
        self.unit
    }

    /// What makes two specs the same spec (equal identities give equal periods).
    pub fn identity(&self) -> SpecIdentity {
        SpecIdentity {
            unit: self.unit,
            time_zone: self.time_zone,
            anchor_day: if self.unit == PeriodUnit::Day {
                0
            } else {
                self.anchor_day
            },
            anchor_month: if self.unit == PeriodUnit::Year {
                self.anchor_month
            } else {
                0
            },
            anchor_time_secs: self.anchor_time_secs,
        }
    }

    /// chrono-tz's name of the zone, e.g. "America/Los_Angeles".
    pub fn time_zone_name(&self) -> &'static str {
        self.time_zone.name()
    }

    /// The period containing `wall_ms`.
    ///
    /// Callers pass a finite `wall_ms` within JavaScript's Date range (±8.64e15); anything beyond
    /// is clamped to it. Never panics.
    pub fn period_for(&self, wall_ms: f64) -> Period {
        let wall_ms = wall_ms.clamp(-MAX_WALL_MS, MAX_WALL_MS);
        let utc_secs = (wall_ms / 1000.0).floor() as i64;
        let local_days =
            (utc_secs + offset_at(self.time_zone, utc_secs)).div_euclid(SECONDS_PER_DAY);
        // The slot of the local date is at most a slot or two off (anchor time, offset jumps):
        // step until start(slot) <= wall < start(slot + 1). Starts never decrease with the slot.
        let mut slot = self.slot_of_local_day(local_days);
        let mut start = self.slot_start(slot);
        while start_ms(start) > wall_ms {
            slot -= 1;
            start = self.slot_start(slot);
        }
        let mut end = self.slot_start(slot + 1);
        while start_ms(end) <= wall_ms {
            slot += 1;
            start = end;
            end = self.slot_start(slot + 1);
        }
        Period {
            id: self.slot_id(slot),
            start_ms: start_ms(start),
            end_ms: start_ms(end),
            start_kind: start.kind,
            slot: PeriodSlot(slot),
        }
    }

    /// How many non-empty periods lie strictly between `earlier` and `later`, both returned by
    /// `period_for` on this spec. O(1) in the distance between them.
    ///
    /// Only a day slot can be zero-length, and only under a forward offset jump of a day or more
    /// (a zone crossing the date line). The zone's such jumps are found once per spec (see
    /// `date_line_jumps`) and the zero-length slots under each are subtracted, so the count is
    /// exact for any distance.
    pub fn periods_between(&self, earlier: &Period, later: &Period) -> u64 {
        let slots_between = later
            .slot
            .0
            .saturating_sub(earlier.slot.0)
            .saturating_sub(1);
        if slots_between <= 0 {
            return 0;
        }
        let zero_length = match self.unit {
            PeriodUnit::Day => self.zero_length_day_slots(earlier.slot.0, later.slot.0),
            PeriodUnit::Week | PeriodUnit::Month | PeriodUnit::Year => 0,
        };
        (slots_between as u64).saturating_sub(zero_length)
    }

    /// Zero-length day slots strictly between slots `after` and `before`.
    fn zero_length_day_slots(&self, after: i64, before: i64) -> u64 {
        let jumps = self
            .date_line_jumps
            .get_or_init(|| date_line_jumps(self.time_zone));
        let mut count = 0;
        for jump in jumps {
            // Slots whose anchor local time lies in the jump's gap [before, after) of local time.
            let gap_first_local = jump.at_secs + jump.offset_before_secs - self.anchor_time_secs;
            let gap_last_local = jump.at_secs + jump.offset_after_secs - 1 - self.anchor_time_secs;
            let first_slot = (gap_first_local + SECONDS_PER_DAY - 1).div_euclid(SECONDS_PER_DAY);
            let last_slot = gap_last_local.div_euclid(SECONDS_PER_DAY);
            for slot in first_slot.max(after + 1)..=last_slot.min(before - 1) {
                if self.slot_start(slot).utc_secs == self.slot_start(slot + 1).utc_secs {
                    count += 1;
                }
            }
        }
        count
    }

    /// The slot whose anchor date is the latest on or before `local_days` (days since
    /// 1970-01-01, local).
    fn slot_of_local_day(&self, local_days: i64) -> i64 {
        match self.unit {
            PeriodUnit::Day => local_days,
            PeriodUnit::Week => (local_days - self.week_anchor_offset_days()).div_euclid(7),
            PeriodUnit::Month => {
                let (year, month, _) = civil_from_days(local_days);
                year * 12 + i64::from(month) - 1
            }
            PeriodUnit::Year => civil_from_days(local_days).0,
        }
    }

    /// Days from 1970-01-01 (a Thursday, ISO weekday 4) to the first anchor weekday on or after it.
    fn week_anchor_offset_days(&self) -> i64 {
        (i64::from(self.anchor_day) - 4).rem_euclid(7)
    }

    /// The local anchor date of a slot, in days since 1970-01-01.
    fn slot_anchor_days(&self, slot: i64) -> i64 {
        match self.unit {
            PeriodUnit::Day => slot,
            PeriodUnit::Week => slot * 7 + self.week_anchor_offset_days(),
            PeriodUnit::Month => {
                let (year, month) = (slot.div_euclid(12), slot.rem_euclid(12) as u32 + 1);
                days_from_civil(year, month, self.anchor_day.min(days_in_month(year, month)))
            }
            PeriodUnit::Year => days_from_civil(
                slot,
                self.anchor_month,
                self.anchor_day.min(days_in_month(slot, self.anchor_month)),
            ),
        }
    }

    /// The start of a slot on the UTC time line.
    fn slot_start(&self, slot: i64) -> Resolved {
        let local_secs = self.slot_anchor_days(slot) * SECONDS_PER_DAY + self.anchor_time_secs;
        resolve_local(self.time_zone, local_secs)
    }

    fn slot_id(&self, slot: i64) -> String {
        match self.unit {
            PeriodUnit::Day | PeriodUnit::Week => {
                let (year, month, day) = civil_from_days(self.slot_anchor_days(slot));
                format!("{}-{month:02}-{day:02}", IsoYear(year))
            }
            PeriodUnit::Month => {
                let month = slot.rem_euclid(12) + 1;
                format!("{}-{month:02}", IsoYear(slot.div_euclid(12)))
            }
            PeriodUnit::Year => IsoYear(slot).to_string(),
        }
    }
}

/// A year as `toISOString` writes it: four digits, or a sign and six digits outside 0..=9999.
struct IsoYear(i64);

impl fmt::Display for IsoYear {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if (0..=9999).contains(&self.0) {
            write!(f, "{:04}", self.0)
        } else {
            write!(f, "{:+07}", self.0)
        }
    }
}

fn integer_in(value: f64, min: u32, max: u32) -> Option<u32> {
    let in_range = value.fract() == 0.0 && value >= f64::from(min) && value <= f64::from(max);
    in_range.then_some(value as u32)
}

/// 'HH:MM' or 'HH:MM:SS' (two digits each, 00..23 / 00..59 / 00..59) → seconds after midnight.
fn parse_anchor_time(text: &str) -> Option<i64> {
    let two_digits = |field: &str, max: i64| -> Option<i64> {
        let bytes = field.as_bytes();
        if bytes.len() != 2 || !bytes.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = i64::from(bytes[0] - b'0') * 10 + i64::from(bytes[1] - b'0');
        (value <= max).then_some(value)
    };
    let mut fields = text.split(':');
    let hours = two_digits(fields.next()?, 23)?;
    let minutes = two_digits(fields.next()?, 59)?;
    let seconds = match fields.next() {
        Some(field) => two_digits(field, 59)?,
        None => 0,
    };
    if fields.next().is_some() {
        return None;
    }
    Some(hours * 3600 + minutes * 60 + seconds)
}

/// A received number as JavaScript's `String(value)` would write it (for the common cases).
#[cfg(test)]
mod tests;
