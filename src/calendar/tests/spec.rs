//! A period spec's options: what `PeriodSpec::parse` refuses, and how its messages name them.

use super::*;

#[test]
fn the_spec_reports_its_zone_and_unit() {
    let spec = Spec::new("week", "America/Argentina/Buenos_Aires").parse();
    assert_eq!(spec.time_zone_name(), "America/Argentina/Buenos_Aires");
    assert_eq!(spec.unit(), PeriodUnit::Week);
    assert_eq!(Spec::new("day", "UTC").parse().time_zone_name(), "UTC");
    assert_eq!(StartKind::Gap.as_str(), "gap");
    assert_eq!(StartKind::Repeat.as_str(), "repeat");
    assert_eq!(StartKind::Exact.as_str(), "exact");
}

#[test]
fn sub_day_units_are_refused_with_their_own_code() {
    for unit in ["hour", "minute", "second"] {
        let error = Spec::new(unit, "UTC").error();
        assert_eq!(error.code(), ErrorCode::SubDayPeriod);
        assert_eq!(error.code().as_str(), "ERR_SUB_DAY_PERIOD");
        assert!(error
            .to_string()
            .starts_with("quota.period.unit must be 'day', 'week', 'month' or 'year'"));
        assert!(
            error.to_string().ends_with(&format!("received '{unit}'")),
            "{}",
            error.to_string()
        );
    }
}

#[test]
fn an_unknown_unit_is_an_invalid_option() {
    let error = Spec::new("fortnight", "UTC").error();
    assert_eq!(error.code().as_str(), "ERR_INVALID_OPTION");
    assert_eq!(
        error.to_string(),
        "quota.period.unit must be 'day', 'week', 'month' or 'year'; received 'fortnight'"
    );
    assert_eq!(
        Spec::new("Day", "UTC").error().code(),
        ErrorCode::InvalidOption
    );
    assert_eq!(
        Spec::new("", "UTC").error().code(),
        ErrorCode::InvalidOption
    );
}

#[test]
fn an_unknown_time_zone_is_named_in_the_message() {
    for zone in ["Mars/Olympus_Mons", "america/new_york", "", "EST5EDT "] {
        let error = Spec::new("day", zone).error();
        assert_eq!(error.code(), ErrorCode::UnknownTimeZone);
        assert_eq!(error.code().as_str(), "ERR_UNKNOWN_TIME_ZONE");
        assert!(error
            .to_string()
            .starts_with("quota.period.timeZone must be an IANA time zone name"));
        assert!(
            error.to_string().contains(&format!("received '{zone}'")),
            "{}",
            error.to_string()
        );
    }
}

#[test]
fn an_anchor_day_outside_its_range_is_refused() {
    let error = Spec::new("month", "UTC").day(0.0).error();
    assert_eq!(error.code(), ErrorCode::InvalidOption);
    assert_eq!(
        error.to_string(),
        "quota.period.anchorDay must be an integer from 1 to 31 for unit 'month'; received 0"
    );
    for value in [32.0, 1.5, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(
            Spec::new("year", "UTC").day(value).error().code(),
            ErrorCode::InvalidOption
        );
    }
    let error = Spec::new("week", "UTC").day(8.0).error();
    assert_eq!(error.to_string(), "quota.period.anchorDay must be an integer from 1 (Monday) to 7 (Sunday) for unit 'week'; received 8");
    assert!(Spec::new("week", "UTC")
        .day(0.5)
        .error()
        .to_string()
        .ends_with("received 0.5"));
    assert!(Spec::new("week", "UTC")
        .day(f64::NAN)
        .error()
        .to_string()
        .ends_with("received NaN"));
}

#[test]
fn anchors_that_do_not_apply_to_the_unit_are_refused() {
    let error = Spec::new("day", "UTC").day(1.0).error();
    assert_eq!(error.code(), ErrorCode::InvalidOption);
    assert!(
        error
            .to_string()
            .starts_with("quota.period.anchorDay does not apply to unit 'day'"),
        "{}",
        error.to_string()
    );
    for unit in ["day", "week", "month"] {
        let error = Spec::new(unit, "UTC").month(1.0).error();
        assert_eq!(error.code(), ErrorCode::InvalidOption);
        assert_eq!(
            error.to_string(),
            format!(
                "quota.period.anchorMonth applies only to unit 'year', not '{unit}'; received 1"
            )
        );
    }
}

#[test]
fn an_anchor_month_outside_1_to_12_is_refused() {
    let error = Spec::new("year", "UTC").month(13.0).error();
    assert_eq!(
        error.to_string(),
        "quota.period.anchorMonth must be an integer from 1 to 12; received 13"
    );
    assert_eq!(
        Spec::new("year", "UTC").month(0.0).error().code(),
        ErrorCode::InvalidOption
    );
    assert_eq!(
        Spec::new("year", "UTC").month(6.5).error().code(),
        ErrorCode::InvalidOption
    );
}

#[test]
fn an_anchor_time_must_be_hh_mm_or_hh_mm_ss() {
    for good in ["00:00", "23:59", "23:59:59", "09:05:07"] {
        Spec::new("day", "UTC").time(good).parse();
    }
    for bad in [
        "24:00",
        "9:00",
        "12:60",
        "12:00:60",
        "12:00:00:00",
        "",
        "12",
        "12:00:",
        "1a:00",
        "+1:00",
        "１２:00",
    ] {
        let error = Spec::new("day", "UTC").time(bad).error();
        assert_eq!(error.code(), ErrorCode::InvalidOption);
        assert_eq!(
            error.to_string(),
            format!("quota.period.anchorTime must be a local time 'HH:MM' or 'HH:MM:SS' from '00:00' to '23:59:59'; received '{bad}'")
        );
    }
}

#[test]
fn messages_without_an_option_path_name_the_bare_option() {
    let raw = RawPeriodSpec {
        unit: "week",
        time_zone: "UTC",
        anchor_day: Some(9.0),
        anchor_month: None,
        anchor_time: None,
    };
    let error = PeriodSpec::parse(&raw, "")
        .err()
        .map(|error| error.to_string());
    assert!(error.is_some_and(|message| message.starts_with("anchorDay must be")));
}
