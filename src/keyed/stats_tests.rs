//! The keyed limiter's counters (`stats()`): decisions, anomalies, evictions, key-limit refusals.

use super::tests::{self, keyed, policy, target_of as target, DAY_MS, JAN_15_2024};
use super::*;
use crate::anomaly::AnomalyKind;
use crate::clock::ManualClock;

/// `tryConsume(key, 1)` the way the binding calls it.
fn consume(
    limiter: &mut KeyedLimiter,
    clock: &mut ManualClock,
    text: &str,
) -> Result<Decision, Error> {
    tests::consume(limiter, clock, text, 1).map(|(decision, _)| decision)
}

#[test]
fn decisions_are_counted_by_outcome_and_a_clock_anomaly_once_for_the_whole_limiter() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = keyed(policy(1.0, Some(10)), 100, &mut clock);
    assert_eq!(*limiter.counters(), Counters::default());
    for name in ["a", "b", "a", "c", "a"] {
        consume(&mut limiter, &mut clock, name).unwrap();
    }
    assert_eq!(
        (limiter.counters().allowed, limiter.counters().denied),
        (3, 2)
    );
    clock.advance(1_000.0);
    clock.step_wall(-2.0 * DAY_MS);
    consume(&mut limiter, &mut clock, "b").unwrap();
    consume(&mut limiter, &mut clock, "c").unwrap();
    let counters = limiter.counters();
    assert_eq!(counters.anomalies_of(AnomalyKind::WallStepBack), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::PeriodRegression), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::Suspend), 0);
}

#[test]
fn status_and_refund_are_not_decisions_but_their_anomalies_count() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = keyed(policy(5.0, None), 100, &mut clock);
    consume(&mut limiter, &mut clock, "a").unwrap();
    clock.advance(1_000.0);
    clock.step_wall(-10_000.0);
    let a = KeyBuf::from_text("a");
    limiter
        .refund(a.key(), 1, &mut clock, &mut Vec::new())
        .unwrap();
    clock.advance(1_000.0);
    clock.step_wall(20_000.0);
    let mut anomalies = Vec::new();
    limiter
        .status(target(&limiter, &a), &mut clock, &mut anomalies)
        .unwrap();
    assert_eq!(anomalies.len(), 1);
    let counters = limiter.counters();
    assert_eq!((counters.allowed, counters.denied), (1, 0));
    assert_eq!(counters.anomalies_of(AnomalyKind::WallStepBack), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::AmbiguousWallJump), 1);
}

#[test]
fn a_key_dropped_to_make_room_is_an_eviction_and_a_deleted_one_is_not() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = keyed(policy(10.0, None), 2, &mut clock);
    consume(&mut limiter, &mut clock, "a").unwrap();
    consume(&mut limiter, &mut clock, "b").unwrap();
    consume(&mut limiter, &mut clock, "c").unwrap();
    assert_eq!(limiter.len(), 2);
    assert_eq!(limiter.counters().evicted, 1);
    assert!(limiter.delete(KeyBuf::from_text("c").key()));
    assert_eq!(limiter.counters().evicted, 1);
}

#[test]
fn idle_keys_swept_after_a_new_key_are_evictions() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = keyed(policy(1.0, None), 100, &mut clock);
    let held = 80;
    for i in 0..held {
        consume(&mut limiter, &mut clock, &format!("key-{i}")).unwrap();
    }
    // Every bucket is full again: every key is idle, and new keys sweep some of them.
    clock.advance(5_000.0);
    for i in held..held + 10 {
        consume(&mut limiter, &mut clock, &format!("key-{i}")).unwrap();
    }
    let evicted = limiter.counters().evicted;
    assert!(evicted > 0, "the sweep dropped idle keys");
    assert_eq!(evicted, (held + 10) as u64 - limiter.len() as u64);
}

#[test]
fn a_refused_new_key_is_counted_and_nothing_else_is() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 1, &mut clock);
    consume(&mut limiter, &mut clock, "a").unwrap();
    clock.advance(500.0);
    clock.step_wall(-5_000.0);
    for _ in 0..2 {
        let error = consume(&mut limiter, &mut clock, "b").unwrap_err();
        assert_eq!(error.code().as_str(), "ERR_KEY_LIMIT");
    }
    let counters = *limiter.counters();
    assert_eq!(counters.key_limit_refusals, 2);
    assert_eq!(
        (counters.allowed, counters.denied, counters.evicted),
        (1, 0, 0)
    );
    assert_eq!(
        counters.anomalies_of(AnomalyKind::WallStepBack),
        0,
        "a refused call raises nothing"
    );
}

#[test]
fn the_quiet_path_counts_its_decisions() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = keyed(policy(1.0, Some(10)), 10, &mut clock);
    consume(&mut limiter, &mut clock, "a").unwrap();
    let index = limiter.find(KeyBuf::from_text("a").key()).unwrap();
    clock.advance(1_000.0);
    let allowed = limiter.try_consume_quiet(index, 1, clock.monotonic_ms, clock.wall_ms);
    let denied = limiter.try_consume_quiet(index, 1, clock.monotonic_ms, clock.wall_ms);
    assert_eq!(allowed.map(|d| d.allowed), Some(true));
    assert_eq!(denied.map(|d| d.allowed), Some(false));
    assert_eq!(
        (limiter.counters().allowed, limiter.counters().denied),
        (2, 1)
    );
}
