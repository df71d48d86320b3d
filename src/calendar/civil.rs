//! Proleptic Gregorian date arithmetic on plain integers.
//!
//! chrono's dates stop at ±262 143 years; a JavaScript Date reaches ±275 760, so slot dates are
//! computed here (Howard Hinnant's `days_from_civil` / `civil_from_days`) and chrono is only asked
//! for UTC offsets.

pub(super) const SECONDS_PER_DAY: i64 = 86_400;

/// Days since 1970-01-01 of the proleptic Gregorian date `year-month-day`.
pub(super) const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    // Months counted from March, so that the leap day is the last day of the year.
    let month_from_march = (month as i64 + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day as i64 - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The proleptic Gregorian `(year, month, day)` of a count of days since 1970-01-01.
pub(super) const fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_from_march + 2) / 5 + 1) as u32;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    } as u32;
    let year = year_of_era + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

pub(super) const fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trips_across_eras_and_leap_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(days_from_civil(2024, 2, 29)), (2024, 2, 29));
        for days in (-100_000_500..-99_999_500)
            .chain(-1000..1000)
            .chain(99_999_500..100_000_500)
        {
            let (year, month, day) = civil_from_days(days);
            assert!((1..=12).contains(&month));
            assert!(day >= 1 && day <= days_in_month(year, month));
            assert_eq!(days_from_civil(year, month, day), days);
        }
    }

    #[test]
    fn february_has_29_days_in_leap_years_only() {
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2023, 2), 28);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
        assert_eq!(days_in_month(-4, 2), 29);
        assert_eq!(days_in_month(2024, 4), 30);
    }
}
