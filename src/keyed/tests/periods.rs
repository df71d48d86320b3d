//! Periods held on a backwards step, and giving back to the period a decision counted in.

use super::*;

/// A limiter (capacity 10, a daily quota of 5) whose key "a" took `n` units on one bogus wall
/// reading of 2100-01-01 (a year-2100 RTC), a second after it was made.
fn used_in_2100(max_keys: usize, n: u64) -> (ManualClock, KeyedLimiter) {
    const JAN_1_2100: f64 = 4_102_444_800_000.0;
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), max_keys, &mut clock);
    clock.advance(1_000.0);
    clock.wall_ms = JAN_1_2100;
    consume(&mut limiter, &mut clock, "a", n).unwrap();
    (clock, limiter)
}

#[test]
fn a_keyed_specs_hold_ends_after_the_held_periods_length_of_the_limiters_real_time() {
    let (mut clock, mut limiter) = used_in_2100(10, 2);
    assert_eq!(
        status(&mut limiter, &mut clock, "a").period.unwrap().id,
        "2100-01-01"
    );
    // The right time again: the bogus day is held for every key of the spec, with its use.
    clock.wall_ms = JAN_15_2024 + 3_000.0;
    let (decision, anomalies) = consume(&mut limiter, &mut clock, "a", 1).unwrap();
    assert_eq!(decision.quota_remaining, Some(2));
    assert!(kinds(&anomalies).contains(&AnomalyKind::PeriodRegression));
    // Real time passes (calls keep being made): the limiter's timeline moves on.
    for _ in 0..23 {
        clock.advance(3_600_000.0);
        consume(&mut limiter, &mut clock, "a", 1).ok();
    }
    assert_eq!(
        status(&mut limiter, &mut clock, "a").period.unwrap().id,
        "2100-01-01"
    );
    clock.advance(3_600_000.0);
    let (decision, anomalies) = consume(&mut limiter, &mut clock, "a", 1).unwrap();
    let hold_ended: Vec<&Anomaly> = anomalies
        .iter()
        .filter(|a| a.kind == AnomalyKind::PeriodRegression)
        .collect();
    assert_eq!(hold_ended.len(), 1, "{anomalies:?}");
    assert!(hold_ended[0].detail.contains("ended"));
    assert_eq!(hold_ended[0].period_id.as_deref(), Some("2024-01-16"));
    assert_eq!(
        decision.quota_remaining,
        Some(4),
        "the right day starts at zero use"
    );
    assert_eq!(
        status(&mut limiter, &mut clock, "b").period.unwrap().id,
        "2024-01-16"
    );
}

#[test]
fn a_keyed_give_back_reads_no_clock_and_returns_units_only_to_their_open_period() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + DAY_MS - 2_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 10, &mut clock);
    consume(&mut limiter, &mut clock, "a", 3).unwrap();
    let index = limiter.find(key("a").key()).unwrap();
    let slot = limiter.period_slot_of(index);
    clock.monotonic_ms = -1.0; // any reading now would be a regression
    limiter.give_back(key("a").key(), 3, Some(slot));
    limiter.give_back(key("not-held").key(), 3, Some(slot));
    assert_eq!(
        limiter.len(),
        1,
        "a key not held is not held by a give-back"
    );
    clock.monotonic_ms = 0.0;
    let a = status(&mut limiter, &mut clock, "a");
    assert_eq!((a.tokens, a.quota_used), (10.0, Some(0)));
    // The next day: units of the day before are not given to it.
    consume(&mut limiter, &mut clock, "a", 1).unwrap();
    let old_slot = limiter.period_slot_of(index);
    clock.advance(2_000.0);
    consume(&mut limiter, &mut clock, "a", 1).unwrap();
    limiter.give_back(key("a").key(), 1, Some(old_slot));
    assert_eq!(status(&mut limiter, &mut clock, "a").quota_used, Some(1));
    let new_slot = limiter.period_slot_of(index);
    limiter.give_back(key("a").key(), 1, Some(new_slot));
    assert_eq!(status(&mut limiter, &mut clock, "a").quota_used, Some(0));
}

#[test]
fn a_new_key_at_max_keys_sees_that_a_hold_ending_now_drops_the_held_use() {
    let (mut clock, mut limiter) = used_in_2100(1, 1);
    clock.wall_ms = JAN_15_2024 + 3_000.0;
    // While the bogus day is held, "a" has use in it: no room for "b".
    let refused = consume(&mut limiter, &mut clock, "b", 1).unwrap_err();
    assert_eq!(refused.code().as_str(), "ERR_KEY_LIMIT");
    // A day of real time later the hold ends on this very call: "a"'s use is of an ended
    // period, so it makes room.
    clock.advance(DAY_MS);
    let (decision, _) = consume(&mut limiter, &mut clock, "b", 1).unwrap();
    assert!(decision.allowed);
    assert_eq!(limiter.len(), 1);
    assert!(limiter.find(key("b").key()).is_some());
}
