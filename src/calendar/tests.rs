use super::civil::{days_from_civil, SECONDS_PER_DAY};
use super::*;

const HOUR_MS: f64 = 3_600_000.0;
const DAY_MS: f64 = 86_400_000.0;

mod spec;

/// Unix ms of a UTC date and time.
fn utc_ms(year: i64, month: u32, day: u32, hour: i64, minute: i64) -> f64 {
    ((days_from_civil(year, month, day) * SECONDS_PER_DAY + hour * 3600 + minute * 60) * 1000)
        as f64
}

struct Spec<'a> {
    unit: &'a str,
    time_zone: &'a str,
    anchor_day: Option<f64>,
    anchor_month: Option<f64>,
    anchor_time: Option<&'a str>,
}

impl<'a> Spec<'a> {
    fn new(unit: &'a str, time_zone: &'a str) -> Self {
        Spec {
            unit,
            time_zone,
            anchor_day: None,
            anchor_month: None,
            anchor_time: None,
        }
    }
    fn day(mut self, anchor_day: f64) -> Self {
        self.anchor_day = Some(anchor_day);
        self
    }
    fn month(mut self, anchor_month: f64) -> Self {
        self.anchor_month = Some(anchor_month);
        self
    }
    fn time(mut self, anchor_time: &'a str) -> Self {
        self.anchor_time = Some(anchor_time);
        self
    }
    fn raw(&self) -> RawPeriodSpec<'a> {
        RawPeriodSpec {
            unit: self.unit,
            time_zone: self.time_zone,
            anchor_day: self.anchor_day,
            anchor_month: self.anchor_month,
            anchor_time: self.anchor_time,
        }
    }
    fn parse(&self) -> PeriodSpec {
        match PeriodSpec::parse(&self.raw(), "quota.period") {
            Ok(spec) => spec,
            Err(error) => panic!("{}", error.to_string()),
        }
    }
    fn error(&self) -> Error {
        match PeriodSpec::parse(&self.raw(), "quota.period") {
            Ok(spec) => panic!("expected an error, parsed {spec:?}"),
            Err(error) => error,
        }
    }
}

/// The period that follows `period`.
fn next(spec: &PeriodSpec, period: &Period) -> Period {
    spec.period_for(period.end_ms)
}

fn assert_period(period: &Period, id: &str, start_ms: f64, end_ms: f64, kind: StartKind) {
    assert_eq!(
        (
            period.id.as_str(),
            period.start_ms,
            period.end_ms,
            period.start_kind
        ),
        (id, start_ms, end_ms, kind),
        "{period:?}"
    );
}

/// Walks `count` consecutive periods from `from_ms`, checking that they tile time.
fn assert_tiles(spec: &PeriodSpec, from_ms: f64, count: usize) {
    let mut period = spec.period_for(from_ms);
    for _ in 0..count {
        assert!(period.start_ms < period.end_ms, "{spec:?} {period:?}");
        let before = spec.period_for(period.start_ms - 1.0);
        assert_eq!(
            before.end_ms, period.start_ms,
            "{spec:?} {before:?} {period:?}"
        );
        assert_eq!(
            spec.period_for(period.end_ms - 0.5).id,
            period.id,
            "{spec:?} {period:?}"
        );
        let following = next(spec, &period);
        assert_eq!(following.start_ms, period.end_ms, "{spec:?} {period:?}");
        assert!(
            following.slot > period.slot && following.id > period.id,
            "{period:?} {following:?}"
        );
        period = following;
    }
}

/// The slow count `periods_between` must match: walk every period in between.
fn count_by_walking(spec: &PeriodSpec, earlier: &Period, later: &Period) -> u64 {
    let mut count = 0;
    let mut period = next(spec, earlier);
    while period.start_ms < later.start_ms {
        count += 1;
        period = next(spec, &period);
    }
    count
}

#[test]
fn new_york_spring_forward_day_is_23_and_a_half_hours() {
    let spec = Spec::new("day", "America/New_York").time("02:30").parse();
    // 02:30 on 2024-03-10 never happened: the day starts when the gap closes, 03:00 EDT.
    let day = spec.period_for(utc_ms(2024, 3, 10, 12, 0));
    assert_period(
        &day,
        "2024-03-10",
        utc_ms(2024, 3, 10, 7, 0),
        utc_ms(2024, 3, 11, 6, 30),
        StartKind::Gap,
    );
    assert_eq!(day.end_ms - day.start_ms, 23.5 * HOUR_MS);
    let before = spec.period_for(day.start_ms - 1.0);
    assert_period(
        &before,
        "2024-03-09",
        utc_ms(2024, 3, 9, 7, 30),
        day.start_ms,
        StartKind::Exact,
    );
    assert_eq!(before.end_ms - before.start_ms, 23.5 * HOUR_MS);
}

#[test]
fn new_york_fall_back_day_starts_at_the_first_1_30_and_is_25_hours() {
    let spec = Spec::new("day", "America/New_York").time("01:30").parse();
    let day = spec.period_for(utc_ms(2024, 11, 3, 12, 0));
    // 01:30 EDT (05:30Z) comes before 01:30 EST (06:30Z).
    assert_period(
        &day,
        "2024-11-03",
        utc_ms(2024, 11, 3, 5, 30),
        utc_ms(2024, 11, 4, 6, 30),
        StartKind::Repeat,
    );
    assert_eq!(day.end_ms - day.start_ms, 25.0 * HOUR_MS);
    // The second 01:30 is inside the day, not the start of another.
    assert_eq!(spec.period_for(utc_ms(2024, 11, 3, 6, 30)).id, "2024-11-03");
    assert_eq!(
        spec.period_for(day.start_ms - 1.0).end_ms - spec.period_for(day.start_ms - 1.0).start_ms,
        DAY_MS
    );
}

#[test]
fn a_31st_anchor_clamps_to_the_end_of_february_and_returns_to_the_31st() {
    let spec = Spec::new("month", "UTC").day(31.0).parse();
    let january = spec.period_for(utc_ms(2024, 2, 10, 0, 0));
    assert_period(
        &january,
        "2024-01",
        utc_ms(2024, 1, 31, 0, 0),
        utc_ms(2024, 2, 29, 0, 0),
        StartKind::Exact,
    );
    let february = next(&spec, &january);
    assert_period(
        &february,
        "2024-02",
        utc_ms(2024, 2, 29, 0, 0),
        utc_ms(2024, 3, 31, 0, 0),
        StartKind::Exact,
    );
    let march = next(&spec, &february);
    assert_period(
        &march,
        "2024-03",
        utc_ms(2024, 3, 31, 0, 0),
        utc_ms(2024, 4, 30, 0, 0),
        StartKind::Exact,
    );
    assert_eq!(
        spec.period_for(utc_ms(2023, 3, 1, 0, 0)).start_ms,
        utc_ms(2023, 2, 28, 0, 0)
    );
}

#[test]
fn los_angeles_march_2024_is_31_days_minus_an_hour() {
    let spec = Spec::new("month", "America/Los_Angeles").parse();
    let march = spec.period_for(utc_ms(2024, 3, 15, 0, 0));
    assert_period(
        &march,
        "2024-03",
        utc_ms(2024, 3, 1, 8, 0),
        utc_ms(2024, 4, 1, 7, 0),
        StartKind::Exact,
    );
    assert_eq!(march.end_ms - march.start_ms, 31.0 * DAY_MS - HOUR_MS);
    let november = spec.period_for(utc_ms(2024, 11, 15, 0, 0));
    assert_eq!(november.end_ms - november.start_ms, 30.0 * DAY_MS + HOUR_MS);
}

#[test]
fn iso_weeks_in_berlin_start_on_monday_and_are_named_by_it() {
    let spec = Spec::new("week", "Europe/Berlin").day(1.0).parse();
    // Sunday 2024-03-31 is the day Berlin springs forward: its week is an hour short.
    let week = spec.period_for(utc_ms(2024, 3, 31, 12, 0));
    assert_period(
        &week,
        "2024-03-25",
        utc_ms(2024, 3, 24, 23, 0),
        utc_ms(2024, 3, 31, 22, 0),
        StartKind::Exact,
    );
    assert_eq!(week.end_ms - week.start_ms, 7.0 * DAY_MS - HOUR_MS);
    assert_eq!(next(&spec, &week).id, "2024-04-01");
    // Monday 00:00 local belongs to the new week; Sunday 23:59:59.999 to the old one.
    assert_eq!(spec.period_for(utc_ms(2024, 1, 7, 23, 0)).id, "2024-01-08");
    assert_eq!(
        spec.period_for(utc_ms(2024, 1, 7, 23, 0) - 1.0).id,
        "2024-01-01"
    );
    let sunday_weeks = Spec::new("week", "Europe/Berlin")
        .day(7.0)
        .time("18:00")
        .parse();
    assert_eq!(
        sunday_weeks.period_for(utc_ms(2024, 1, 10, 0, 0)).id,
        "2024-01-07"
    );
    assert_eq!(
        sunday_weeks.period_for(utc_ms(2024, 1, 7, 16, 59)).id,
        "2023-12-31"
    );
}

#[test]
fn the_uk_tax_year_runs_from_6_april_to_5_april() {
    let spec = Spec::new("year", "Europe/London")
        .month(4.0)
        .day(6.0)
        .parse();
    let tax_year = spec.period_for(utc_ms(2025, 1, 31, 12, 0));
    assert_period(
        &tax_year,
        "2024",
        utc_ms(2024, 4, 5, 23, 0),
        utc_ms(2025, 4, 5, 23, 0),
        StartKind::Exact,
    );
    assert_eq!(spec.period_for(utc_ms(2024, 4, 5, 22, 59)).id, "2023");
    assert_eq!(spec.period_for(utc_ms(2025, 4, 5, 23, 0)).id, "2025");
}

#[test]
fn a_29_february_year_anchor_clamps_to_the_28th_in_common_years() {
    let spec = Spec::new("year", "UTC").month(2.0).day(29.0).parse();
    let year = spec.period_for(utc_ms(2024, 6, 1, 0, 0));
    assert_period(
        &year,
        "2024",
        utc_ms(2024, 2, 29, 0, 0),
        utc_ms(2025, 2, 28, 0, 0),
        StartKind::Exact,
    );
}

#[test]
fn apia_2011_12_30_never_happened_and_is_not_a_period() {
    let spec = Spec::new("day", "Pacific/Apia").parse();
    // Apia went from 2011-12-29 23:59:59 (−10) to 2011-12-31 00:00 (+14) at 10:00Z.
    let december_29 = spec.period_for(utc_ms(2011, 12, 30, 9, 0));
    assert_period(
        &december_29,
        "2011-12-29",
        utc_ms(2011, 12, 29, 10, 0),
        utc_ms(2011, 12, 30, 10, 0),
        StartKind::Exact,
    );
    let december_31 = next(&spec, &december_29);
    assert_period(
        &december_31,
        "2011-12-31",
        utc_ms(2011, 12, 30, 10, 0),
        utc_ms(2011, 12, 31, 10, 0),
        StartKind::Exact,
    );
    assert_eq!(december_31.slot.0, december_29.slot.0 + 2);
    let january_1 = next(&spec, &december_31);
    assert_eq!(spec.periods_between(&december_29, &december_31), 0);
    assert_eq!(spec.periods_between(&december_29, &january_1), 1);
    let a_year_later = spec.period_for(utc_ms(2012, 12, 15, 0, 0));
    let a_year_before = spec.period_for(utc_ms(2010, 12, 15, 12, 0));
    assert_eq!(
        (a_year_before.id.as_str(), a_year_later.id.as_str()),
        ("2010-12-15", "2012-12-15")
    );
    assert_eq!(spec.periods_between(&a_year_before, &a_year_later), 730 - 1);
    assert_eq!(
        count_by_walking(&spec, &a_year_before, &a_year_later),
        730 - 1
    );
}

#[test]
fn apia_with_a_noon_anchor_keeps_every_slot() {
    // At 12:00 the skipped date still has a slot: [2011-12-29 24:00 −10, 2011-12-31 12:00 +14).
    let spec = Spec::new("day", "Pacific/Apia").time("12:00").parse();
    let december_30 = spec.period_for(utc_ms(2011, 12, 30, 10, 0));
    assert_period(
        &december_30,
        "2011-12-30",
        utc_ms(2011, 12, 30, 10, 0),
        utc_ms(2011, 12, 30, 22, 0),
        StartKind::Gap,
    );
    let before = spec.period_for(utc_ms(2011, 12, 30, 10, 0) - 1.0);
    let after = next(&spec, &december_30);
    assert_eq!(spec.periods_between(&before, &after), 1);
}

#[test]
fn kwajalein_repeated_a_day_in_1969_and_skipped_one_in_1993() {
    let spec = Spec::new("day", "Pacific/Kwajalein").parse();
    let august_20 = spec.period_for(utc_ms(1993, 8, 21, 11, 59));
    assert_eq!(august_20.id, "1993-08-20");
    assert_eq!(next(&spec, &august_20).id, "1993-08-22");
    // 1969 (−23 h: a 47-hour day) and 1993 (+24 h: a date skipped) inside one jump.
    let earlier = spec.period_for(utc_ms(1960, 1, 1, 0, 0));
    let later = spec.period_for(utc_ms(2000, 1, 1, 0, 0));
    assert_eq!(
        spec.periods_between(&earlier, &later),
        count_by_walking(&spec, &earlier, &later)
    );
    assert_eq!(
        spec.periods_between(&earlier, &later),
        (later.slot.0 - earlier.slot.0 - 1 - 1) as u64,
        "exactly one date (1993-08-21) has no period"
    );
}

#[test]
fn sao_paulo_days_start_at_1_am_when_midnight_is_skipped() {
    let spec = Spec::new("day", "America/Sao_Paulo").parse();
    // 2018-11-04 00:00 −03 never happened: clocks went to 01:00 −02 at 03:00Z.
    let day = spec.period_for(utc_ms(2018, 11, 4, 12, 0));
    assert_period(
        &day,
        "2018-11-04",
        utc_ms(2018, 11, 4, 3, 0),
        utc_ms(2018, 11, 5, 2, 0),
        StartKind::Gap,
    );
    assert_eq!(day.end_ms - day.start_ms, 23.0 * HOUR_MS);
    assert_eq!(spec.period_for(day.start_ms - 1.0).id, "2018-11-03");
}

#[test]
fn lord_howe_half_hour_gap_snaps_to_2_30_local() {
    let spec = Spec::new("day", "Australia/Lord_Howe")
        .time("02:15")
        .parse();
    // 2024-10-06 02:00 +10:30 → 02:30 +11 at 15:30Z on the 5th.
    let day = spec.period_for(utc_ms(2024, 10, 6, 0, 0));
    assert_period(
        &day,
        "2024-10-06",
        utc_ms(2024, 10, 5, 15, 30),
        utc_ms(2024, 10, 6, 15, 15),
        StartKind::Gap,
    );
    let before = spec.period_for(day.start_ms - 1.0);
    assert_period(
        &before,
        "2024-10-05",
        utc_ms(2024, 10, 4, 15, 45),
        day.start_ms,
        StartKind::Exact,
    );
    assert_eq!(before.end_ms - before.start_ms, 23.75 * HOUR_MS);
}

#[test]
fn lord_howe_half_hour_fall_back_takes_the_first_1_45() {
    let spec = Spec::new("day", "Australia/Lord_Howe")
        .time("01:45")
        .parse();
    // 2024-04-07 02:00 +11 → 01:30 +10:30 at 15:00Z on the 6th.
    let day = spec.period_for(utc_ms(2024, 4, 7, 0, 0));
    assert_period(
        &day,
        "2024-04-07",
        utc_ms(2024, 4, 6, 14, 45),
        utc_ms(2024, 4, 7, 15, 15),
        StartKind::Repeat,
    );
    assert_eq!(day.end_ms - day.start_ms, 24.5 * HOUR_MS);
}

#[test]
fn periods_tile_time_in_many_zones() {
    let zones = [
        "UTC",
        "America/New_York",
        "America/Sao_Paulo",
        "Australia/Lord_Howe",
        "Pacific/Apia",
        "Pacific/Kiritimati",
        "Europe/London",
        "Asia/Tehran",
        "America/St_Johns",
        "Africa/Casablanca",
        "Pacific/Chatham",
        "America/Santiago",
        "Asia/Kathmandu",
        "Antarctica/Troll",
    ];
    for zone in zones {
        let from_ms = utc_ms(2009, 6, 1, 0, 0);
        for time in [
            "00:00", "00:30", "01:00", "02:00", "02:30", "03:00", "23:59:59",
        ] {
            assert_tiles(&Spec::new("day", zone).time(time).parse(), from_ms, 1200);
        }
        for day in 1..=7 {
            assert_tiles(
                &Spec::new("week", zone)
                    .day(f64::from(day))
                    .time("02:00")
                    .parse(),
                from_ms,
                60,
            );
        }
        for day in [1.0, 29.0, 30.0, 31.0] {
            assert_tiles(
                &Spec::new("month", zone).day(day).time("00:30").parse(),
                from_ms,
                60,
            );
        }
        assert_tiles(
            &Spec::new("year", zone)
                .month(3.0)
                .day(31.0)
                .time("02:00")
                .parse(),
            from_ms,
            20,
        );
    }
}

#[test]
fn monthly_periods_tile_time_in_every_zone() {
    for zone in chrono_tz::TZ_VARIANTS {
        let spec = Spec::new("month", zone.name()).day(31.0).parse();
        assert_tiles(&spec, utc_ms(1900, 1, 1, 0, 0), 12 * 150);
    }
}

#[test]
fn daily_periods_tile_time_in_every_zone_around_the_date_line_moves() {
    for zone in chrono_tz::TZ_VARIANTS {
        for time in ["00:00", "12:00"] {
            let spec = Spec::new("day", zone.name()).time(time).parse();
            assert_tiles(&spec, utc_ms(1993, 8, 1, 0, 0), 40);
            assert_tiles(&spec, utc_ms(1994, 12, 15, 0, 0), 40);
            assert_tiles(&spec, utc_ms(2011, 12, 15, 0, 0), 40);
        }
    }
}

#[test]
fn periods_between_counts_small_jumps_like_a_walk() {
    let specs = [
        Spec::new("day", "Pacific/Apia"),
        Spec::new("day", "Pacific/Fakaofo"),
        Spec::new("day", "America/New_York").time("02:30"),
        Spec::new("week", "Europe/Berlin").day(3.0),
        Spec::new("month", "America/Los_Angeles").day(31.0),
        Spec::new("year", "Europe/London").month(4.0).day(6.0),
    ];
    for spec in specs.iter().map(Spec::parse) {
        let first = spec.period_for(utc_ms(2011, 12, 1, 0, 0));
        let mut later = first.clone();
        for _ in 0..60 {
            assert_eq!(
                spec.periods_between(&first, &later),
                count_by_walking(&spec, &first, &later),
                "{spec:?} {later:?}"
            );
            later = next(&spec, &later);
        }
    }
}

#[test]
fn periods_between_counts_a_thousand_years_like_a_walk() {
    let specs = [
        Spec::new("day", "Pacific/Apia"),
        Spec::new("day", "Pacific/Kiritimati"),
        Spec::new("day", "Asia/Manila"),
        Spec::new("day", "America/New_York").time("02:30"),
        Spec::new("week", "Australia/Lord_Howe")
            .day(7.0)
            .time("02:15"),
        Spec::new("month", "America/Los_Angeles").day(31.0),
        Spec::new("year", "Europe/London").month(4.0).day(6.0),
    ];
    for spec in specs.iter().map(Spec::parse) {
        let earlier = spec.period_for(utc_ms(1500, 1, 1, 0, 0));
        let later = spec.period_for(utc_ms(2500, 1, 1, 0, 0));
        assert_eq!(
            spec.periods_between(&earlier, &later),
            count_by_walking(&spec, &earlier, &later),
            "{spec:?}"
        );
    }
}

#[test]
fn periods_between_adjacent_or_equal_periods_is_zero() {
    let spec = Spec::new("day", "Europe/Paris").parse();
    let today = spec.period_for(utc_ms(2024, 5, 1, 12, 0));
    assert_eq!(spec.periods_between(&today, &today), 0);
    assert_eq!(spec.periods_between(&today, &next(&spec, &today)), 0);
    let extreme = (spec.period_for(-8.64e15), spec.period_for(8.64e15));
    assert_eq!(
        spec.periods_between(&extreme.0, &extreme.1),
        (extreme.1.slot.0 - extreme.0.slot.0 - 1) as u64
    );
}

#[test]
fn the_whole_javascript_date_range_has_periods() {
    for unit in ["day", "week", "month", "year"] {
        let spec = Spec::new(unit, "America/New_York").time("23:59:59").parse();
        for wall_ms in [-8.64e15, -8.64e15 + 1.0, -1.0, 0.0, 8.64e15 - 1.0, 8.64e15] {
            let period = spec.period_for(wall_ms);
            assert!(
                period.start_ms <= wall_ms && wall_ms < period.end_ms,
                "{unit} {period:?}"
            );
        }
    }
    let year = Spec::new("year", "UTC").parse();
    assert_eq!(year.period_for(8.64e15).id, "+275760");
    assert_eq!(year.period_for(-8.64e15).id, "-271821");
    assert_eq!(
        Spec::new("day", "UTC").parse().period_for(-8.64e15).id,
        "-271821-04-20"
    );
    assert_eq!(
        Spec::new("month", "UTC")
            .parse()
            .period_for(-62_198_755_200_000.0)
            .id,
        "-000001-01"
    );
}

#[test]
fn out_of_range_instants_are_clamped_instead_of_looping() {
    let spec = Spec::new("day", "UTC").parse();
    assert_eq!(spec.period_for(f64::INFINITY), spec.period_for(8.64e15));
    assert_eq!(
        spec.period_for(f64::NEG_INFINITY),
        spec.period_for(-8.64e15)
    );
    assert_eq!(spec.period_for(f64::NAN).id, "1970-01-01");
}

#[test]
fn fractional_instants_belong_to_the_period_they_are_in() {
    let spec = Spec::new("day", "UTC").parse();
    assert_eq!(
        spec.period_for(utc_ms(2024, 1, 2, 0, 0) - 0.25).id,
        "2024-01-01"
    );
    assert_eq!(
        spec.period_for(utc_ms(2024, 1, 2, 0, 0) + 0.25).id,
        "2024-01-02"
    );
}

#[test]
fn anchor_times_shift_the_day_boundary() {
    let spec = Spec::new("day", "Asia/Tokyo").time("05:00:30").parse();
    let day = spec.period_for(utc_ms(2024, 6, 1, 0, 0));
    assert_period(
        &day,
        "2024-06-01",
        utc_ms(2024, 5, 31, 20, 0) + 30_000.0,
        utc_ms(2024, 6, 1, 20, 0) + 30_000.0,
        StartKind::Exact,
    );
    assert_eq!(
        spec.period_for(utc_ms(2024, 5, 31, 20, 0) + 29_999.0).id,
        "2024-05-31"
    );
}

#[test]
fn the_calendar_range_is_that_of_a_javascript_date() {
    assert_eq!(MAX_WALL_MS, 8.64e15);
}
