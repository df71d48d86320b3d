//! `QuotaClock`'s core, tested against the spec's sentences.

use super::*;
use crate::anomaly::AnomalyKind;
use crate::calendar::{PeriodSpec, RawPeriodSpec};
use crate::clock::ManualClock;

const JAN_15_2024: f64 = 1_705_276_800_000.0;
const DAY_MS: f64 = 86_400_000.0;

fn config(policy: SuspendPolicy) -> LimiterConfig {
    LimiterConfig {
        capacity: 10.0,
        refill_per_second: 1.0,
        initial_tokens: 0.0,
        suspend_policy: policy,
        quota: None,
        earliest_plausible_wall_ms: Some(1_577_836_800_000.0),
    }
}

fn daily_utc_quota(limit: u64) -> QuotaPolicy {
    let raw = RawPeriodSpec {
        unit: "day",
        time_zone: "UTC",
        anchor_day: None,
        anchor_month: None,
        anchor_time: None,
    };
    QuotaPolicy::new(limit, PeriodSpec::parse(&raw, "quota.period").unwrap())
}

/// A limiter of `config(policy)` with `initial_tokens` and a daily UTC quota of `limit`.
fn with_daily_quota(
    policy: SuspendPolicy,
    limit: u64,
    initial_tokens: f64,
    clock: &mut ManualClock,
) -> Limiter {
    let config = LimiterConfig {
        quota: Some(daily_utc_quota(limit)),
        initial_tokens,
        ..config(policy)
    };
    Limiter::new(config, clock).unwrap()
}

fn kinds(anomalies: &[Anomaly]) -> Vec<AnomalyKind> {
    anomalies.iter().map(|a| a.kind).collect()
}

#[test]
fn refill_comes_from_monotonic_time_when_the_wall_steps_back() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.advance(3_000.0);
    clock.step_wall(-3_600_000.0);
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert!(decision.allowed);
    assert_eq!(decision.tokens, 2.0);
    assert_eq!(kinds(&anomalies), [AnomalyKind::WallStepBack]);
}

#[test]
fn a_denial_reports_the_refill_wait() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.advance(250.0);
    let decision = limiter.try_consume(2, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!(
        decision,
        Decision {
            allowed: false,
            retry_after_ms: 1_750.0,
            retry_after_basis: Some(RetryBasis::MonotonicRefill),
            tokens: 0.25,
            quota_remaining: None
        }
    );
}

#[test]
fn a_monotonic_regression_is_latched() {
    let mut clock = ManualClock::new(100.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.monotonic_ms = 50.0;
    let first = limiter
        .try_consume(1, &mut clock, &mut Vec::new())
        .unwrap_err();
    assert_eq!(first.code().as_str(), "ERR_MONOTONIC_REGRESSION");
    clock.monotonic_ms = 1_000.0;
    let later = limiter.status(&mut clock, &mut Vec::new()).unwrap_err();
    assert_eq!(later.code().as_str(), "ERR_MONOTONIC_REGRESSION");
}

#[test]
fn refuse_credits_the_monotonic_part_then_lets_the_next_call_proceed() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Refuse), &mut clock).unwrap();
    clock.advance(2_000.0);
    clock.suspend(3_600_000.0);
    let error = limiter
        .try_consume(1, &mut clock, &mut Vec::new())
        .unwrap_err();
    assert_eq!(error.code().as_str(), "ERR_AMBIGUOUS_WALL_JUMP");
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert!(decision.allowed);
    assert_eq!(decision.tokens, 1.0);
    assert!(anomalies.is_empty());
}

#[test]
fn the_reader_is_called_only_when_the_wall_runs_ahead() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, Some(0.0));
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    assert_eq!(clock.elapsed_realtime_reads, 1);
    clock.advance(1_000.0);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    clock.step_wall(-10_000.0);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!(clock.elapsed_realtime_reads, 1);
    clock.suspend(60_000.0);
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert_eq!(clock.elapsed_realtime_reads, 2);
    assert_eq!(kinds(&anomalies), [AnomalyKind::Suspend]);
    assert_eq!(decision.tokens, 9.0);
}

#[test]
fn a_suspend_hidden_by_an_opposite_step_is_claimed_at_the_next_forward_divergence() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, Some(0.0));
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.suspend(5_000.0);
    clock.step_wall(-5_000.0);
    let mut anomalies = Vec::new();
    assert_eq!(
        limiter
            .try_consume(1, &mut clock, &mut anomalies)
            .unwrap()
            .tokens,
        0.0
    );
    assert!(anomalies.is_empty());
    clock.step_wall(2_000.0);
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::Suspend, AnomalyKind::WallStepBack]
    );
    assert_eq!(anomalies[0].suspended_ms, Some(5_000.0));
    assert_eq!(anomalies[1].step_ms, Some(-3_000.0));
    assert_eq!(decision.tokens, 4.0);
}

#[test]
fn the_quota_blocks_until_the_period_ends_and_a_tie_goes_to_the_calendar() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + DAY_MS - 1_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Ignore, 1, 1.0, &mut clock);
    assert!(
        limiter
            .try_consume(1, &mut clock, &mut Vec::new())
            .unwrap()
            .allowed
    );
    let decision = limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!(decision.retry_after_basis, Some(RetryBasis::WallPeriod));
    assert_eq!(decision.retry_after_ms, 1_000.0);
    assert_eq!(decision.quota_remaining, Some(0));
    clock.advance(1_000.0);
    let decision = limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    assert!(decision.allowed);
    assert_eq!(decision.quota_remaining, Some(0));
}

#[test]
fn an_implausible_wall_clock_changes_nothing() {
    let mut clock = ManualClock::new(0.0, 0.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Credit, 5, 0.0, &mut clock);
    clock.advance(5_000.0);
    let error = limiter
        .try_consume(1, &mut clock, &mut Vec::new())
        .unwrap_err();
    assert_eq!(error.code().as_str(), "ERR_IMPLAUSIBLE_WALL_CLOCK");
    assert_eq!(limiter.reconciler.last_monotonic_ms, 0.0);
    assert_eq!(limiter.tokens, 0.0);
    clock.wall_ms = JAN_15_2024;
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert_eq!(kinds(&anomalies), [AnomalyKind::AmbiguousWallJump]);
    assert!(decision.allowed);
    assert_eq!(decision.quota_remaining, Some(4));
}

#[test]
fn a_backwards_step_across_a_boundary_holds_the_period_and_reports_once_per_episode() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Ignore, 5, 5.0, &mut clock);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    clock.step_wall(-3_600_000.0);
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::WallStepBack, AnomalyKind::PeriodRegression]
    );
    assert_eq!(decision.quota_remaining, Some(3));
    anomalies.clear();
    limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert!(anomalies.is_empty(), "one period-regression per episode");
    clock.step_wall(3_600_000.0);
    limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    clock.step_wall(-3_600_000.0);
    anomalies.clear();
    limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::WallStepBack, AnomalyKind::PeriodRegression]
    );
}

fn monthly_utc_quota(limit: u64) -> QuotaPolicy {
    let raw = RawPeriodSpec {
        unit: "month",
        time_zone: "UTC",
        anchor_day: None,
        anchor_month: None,
        anchor_time: None,
    };
    QuotaPolicy::new(limit, PeriodSpec::parse(&raw, "quota.period").unwrap())
}

#[test]
fn a_hold_lasts_at_most_the_held_periods_length_of_real_elapsed_time() {
    const JAN_1_2100: f64 = 4_102_444_800_000.0;
    const JUNE_10_2025: f64 = 1_749_513_600_000.0;
    for bogus_wall_ms in [JAN_1_2100, 8.64e15] {
        let mut clock = ManualClock::new(0.0, JUNE_10_2025, None);
        let config = LimiterConfig {
            quota: Some(monthly_utc_quota(100)),
            initial_tokens: 10.0,
            ..config(SuspendPolicy::Ignore)
        };
        let mut limiter = Limiter::new(config, &mut clock).unwrap();
        clock.advance(1_000.0);
        clock.wall_ms = bogus_wall_ms;
        limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
        let held = limiter.status(&mut clock, &mut Vec::new()).unwrap().period;
        let held = held.unwrap();
        assert!(held.start_ms <= bogus_wall_ms, "{held:?}");
        let held_length_ms = held.end_ms - held.start_ms;
        // The right time again: the bogus period is held, with its use.
        clock.advance(1_000.0);
        clock.wall_ms = JUNE_10_2025 + 2_000.0;
        let mut anomalies = Vec::new();
        let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
        assert_eq!(decision.quota_remaining, Some(98));
        assert!(kinds(&anomalies).contains(&AnomalyKind::PeriodRegression));
        // Real time passes, less than the held period's length since it was entered.
        clock.advance(held_length_ms - 10_000.0);
        let status = limiter.status(&mut clock, &mut Vec::new()).unwrap();
        assert_eq!(status.period.unwrap().id, held.id, "still held");
        // Past it: the period follows the wall clock again, and the new one starts at zero.
        clock.advance(20_000.0);
        let mut anomalies = Vec::new();
        let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
        assert_eq!(decision.quota_remaining, Some(99));
        let right = monthly_utc_quota(1).spec.period_for(clock.wall_ms);
        let status = limiter.status(&mut clock, &mut Vec::new()).unwrap();
        assert_eq!(status.period.unwrap().id, right.id);
        assert_eq!(kinds(&anomalies), [AnomalyKind::PeriodRegression]);
        assert!(
            anomalies[0].detail.contains("hold") && anomalies[0].detail.contains("ended"),
            "{}",
            anomalies[0].detail
        );
        assert_eq!(anomalies[0].period_id.as_deref(), Some(right.id.as_str()));
    }
}

#[test]
fn an_honest_step_back_across_a_boundary_is_held_until_the_wall_comes_back() {
    // Entered at the boundary; a step back of an hour is held for that hour, well within
    // the day's length, and the use stays.
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Ignore, 5, 5.0, &mut clock);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    clock.step_wall(-3_600_000.0);
    for _ in 0..59 {
        clock.advance(60_000.0);
        let status = limiter.status(&mut clock, &mut Vec::new()).unwrap();
        assert_eq!(status.period.unwrap().id, "2024-01-15");
        assert_eq!(status.quota_used, Some(1));
    }
    clock.advance(60_000.0);
    let status = limiter.status(&mut clock, &mut Vec::new()).unwrap();
    assert_eq!(status.quota_used, Some(1));
    assert_eq!(status.period.unwrap().id, "2024-01-15");
}

#[test]
fn a_wall_reading_outside_the_calendars_range_is_a_clock_reading_error_and_changes_nothing() {
    let mut clock = ManualClock::new(0.0, 8.64e15 - 1_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Ignore, 2, 5.0, &mut clock);
    assert_eq!(
        limiter
            .try_consume(1, &mut clock, &mut Vec::new())
            .unwrap()
            .quota_remaining,
        Some(1)
    );
    let before = format!("{limiter:?}");
    for wall_ms in [8.64e15 + 1.0, 1e300, -8.64e15 - 1.0] {
        clock.wall_ms = wall_ms;
        clock.monotonic_ms += 1_000.0;
        let error = limiter
            .try_consume(1, &mut clock, &mut Vec::new())
            .unwrap_err();
        assert_eq!(error.code().as_str(), "ERR_CLOCK_READING");
        assert_eq!(
            limiter
                .status(&mut clock, &mut Vec::new())
                .unwrap_err()
                .code()
                .as_str(),
            "ERR_CLOCK_READING"
        );
        assert_eq!(
            limiter.try_consume_quiet(1, clock.monotonic_ms, wall_ms),
            None
        );
        assert_eq!(format!("{limiter:?}"), before);
    }
}

#[test]
fn a_refund_reconciles_then_gives_back_tokens_and_quota_never_past_their_bounds() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Ignore, 5, 4.0, &mut clock);
    assert_eq!(
        limiter
            .try_consume(3, &mut clock, &mut Vec::new())
            .unwrap()
            .quota_remaining,
        Some(2)
    );
    clock.advance(1_000.0);
    clock.step_wall(-10_000.0);
    let mut anomalies = Vec::new();
    limiter.refund(2, &mut clock, &mut anomalies).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::WallStepBack],
        "a refund reconciles like tryConsume"
    );
    let status = limiter.status(&mut clock, &mut Vec::new()).unwrap();
    assert_eq!((status.tokens, status.quota_used), (4.0, Some(1)));
    limiter.refund(100, &mut clock, &mut Vec::new()).unwrap();
    let status = limiter.status(&mut clock, &mut Vec::new()).unwrap();
    assert_eq!(
        (status.tokens, status.quota_used),
        (10.0, Some(0)),
        "capped at capacity, never below zero"
    );
}

#[test]
fn a_quota_alone_is_a_bucket_that_is_never_short() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let config = LimiterConfig {
        capacity: f64::INFINITY,
        refill_per_second: f64::INFINITY,
        initial_tokens: f64::INFINITY,
        quota: Some(daily_utc_quota(5)),
        ..config(SuspendPolicy::Ignore)
    };
    let mut limiter = Limiter::new(config, &mut clock).unwrap();
    // No time passes (an Infinity rate times zero is no refill, not NaN), then some does.
    let decision = limiter.try_consume(4, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!((decision.allowed, decision.tokens), (true, f64::INFINITY));
    clock.advance(1.0);
    let decision = limiter.try_consume_quiet(1, clock.monotonic_ms, clock.wall_ms);
    assert_eq!(decision.map(|d| d.tokens), Some(f64::INFINITY));
    let denied = limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!(denied.retry_after_basis, Some(RetryBasis::WallPeriod));
    assert_eq!(denied.tokens, f64::INFINITY);
    limiter.give_back(2, limiter.period_slot());
    assert_eq!((limiter.tokens, limiter.quota.used), (f64::INFINITY, 3));
}

#[test]
fn a_give_back_reads_no_clock_and_returns_quota_units_only_to_the_period_they_were_taken_in() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + DAY_MS - 2_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Refuse, 5, 4.0, &mut clock);
    let decision = limiter.try_consume(3, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!(decision.quota_remaining, Some(2));
    let slot = limiter.period_slot();
    // A wall jump the refuse policy would throw for: a refund fails, a give-back does not.
    clock.step_wall(3_600_000.0);
    let before = format!("{:?}", limiter.reconciler);
    limiter.give_back(3, slot);
    assert_eq!(format!("{:?}", limiter.reconciler), before, "no clock read");
    assert_eq!((limiter.tokens, limiter.quota.used), (4.0, 0));
    // Capped at capacity, never below zero.
    limiter.give_back(100, slot);
    assert_eq!((limiter.tokens, limiter.quota.used), (10.0, 0));
    // Units taken in a period that has ended are not given to the next one.
    clock.step_wall(-3_600_000.0);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    let old_slot = limiter.period_slot();
    clock.advance(2_000.0);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    assert_ne!(limiter.period_slot(), old_slot);
    limiter.give_back(1, old_slot);
    assert_eq!(limiter.quota.used, 1, "the new day keeps its use");
    limiter.give_back(1, limiter.period_slot());
    assert_eq!(limiter.quota.used, 0);
}

#[test]
fn a_refund_throws_the_clock_errors_of_try_consume_and_gives_nothing_back() {
    let mut clock = ManualClock::new(10.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.monotonic_ms = 5.0;
    assert_eq!(
        limiter
            .refund(1, &mut clock, &mut Vec::new())
            .unwrap_err()
            .code()
            .as_str(),
        "ERR_MONOTONIC_REGRESSION"
    );
    assert_eq!(limiter.tokens, 0.0);
}

#[test]
fn a_forward_jump_over_whole_periods_counts_them() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Credit, 5, 0.0, &mut clock);
    clock.step_wall(3.0 * DAY_MS);
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(1, &mut clock, &mut anomalies).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::AmbiguousWallJump, AnomalyKind::PeriodSkip]
    );
    assert_eq!(anomalies[1].skipped, Some(2));
    assert_eq!(decision.quota_remaining, Some(4));
}

#[test]
fn counters_count_decisions_by_outcome_and_anomalies_by_kind() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = with_daily_quota(SuspendPolicy::Ignore, 3, 2.0, &mut clock);
    assert_eq!(*limiter.counters(), Counters::default());
    for _ in 0..3 {
        limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    }
    let counters = *limiter.counters();
    assert_eq!((counters.allowed, counters.denied), (2, 1));
    // A denial on the quota alone is a denial too.
    clock.advance(10_000.0);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    let denial = limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    assert_eq!(denial.retry_after_basis, Some(RetryBasis::WallPeriod));
    assert_eq!(
        (limiter.counters().allowed, limiter.counters().denied),
        (3, 2)
    );
    clock.step_wall(-3_600_000.0);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    clock.step_wall(3.0 * DAY_MS);
    limiter.try_consume(1, &mut clock, &mut Vec::new()).unwrap();
    let counters = limiter.counters();
    assert_eq!(counters.anomalies_of(AnomalyKind::WallStepBack), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::PeriodRegression), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::AmbiguousWallJump), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::PeriodSkip), 1);
    assert_eq!(counters.anomalies_of(AnomalyKind::Suspend), 0);
    assert_eq!((counters.allowed, counters.denied), (4, 3));
}

#[test]
fn status_and_refund_are_not_decisions_but_their_anomalies_count() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.advance(1_000.0);
    clock.step_wall(-10_000.0);
    limiter.status(&mut clock, &mut Vec::new()).unwrap();
    clock.advance(1_000.0);
    clock.step_wall(-10_000.0);
    limiter.refund(1, &mut clock, &mut Vec::new()).unwrap();
    let counters = limiter.counters();
    assert_eq!((counters.allowed, counters.denied), (0, 0));
    assert_eq!(counters.anomalies_of(AnomalyKind::WallStepBack), 2);
}

#[test]
fn a_call_that_throws_counts_nothing() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Refuse), &mut clock).unwrap();
    clock.suspend(3_600_000.0);
    assert!(limiter.try_consume(1, &mut clock, &mut Vec::new()).is_err());
    clock.monotonic_ms = -1.0;
    assert!(limiter.try_consume(1, &mut clock, &mut Vec::new()).is_err());
    assert_eq!(*limiter.counters(), Counters::default());
}

#[test]
fn the_quiet_path_counts_its_decisions() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = Limiter::new(config(SuspendPolicy::Ignore), &mut clock).unwrap();
    clock.advance(1_000.0);
    let allowed = limiter.try_consume_quiet(1, clock.monotonic_ms, clock.wall_ms);
    let denied = limiter.try_consume_quiet(1, clock.monotonic_ms, clock.wall_ms);
    assert_eq!(allowed.map(|d| d.allowed), Some(true));
    assert_eq!(denied.map(|d| d.allowed), Some(false));
    assert_eq!(
        (limiter.counters().allowed, limiter.counters().denied),
        (1, 1)
    );
}

/// A tiny deterministic generator (xorshift64*), so the comparison below is reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Moves the clock the way hosts do: mostly small steps, sometimes a step, a suspend, a
/// regression, a jump across days, or a reading that is not a number.
fn move_clock(clock: &mut ManualClock, rng: &mut Rng) {
    match rng.below(100) {
        0..=2 => clock.step_wall(-(rng.below(3 * DAY_MS as u64) as f64)),
        3..=5 => clock.step_wall(rng.below(3 * DAY_MS as u64) as f64),
        6..=8 => clock.suspend(rng.below(DAY_MS as u64) as f64),
        9 => clock.monotonic_ms -= rng.below(5) as f64,
        10..=12 => clock.wall_ms = [f64::NAN, f64::INFINITY, 1_000.0][rng.below(3) as usize],
        // The tolerance's edges (250 ms at dm = 0), both ways.
        13..=17 => clock
            .step_wall(if rng.below(2) == 0 { 1.0 } else { -1.0 } * (249.0 + rng.below(3) as f64)),
        _ => clock.advance(rng.below(40_000) as f64 / 8.0),
    }
    // A broken wall reading is repaired half the time (the other half, the next move meets it).
    let broken =
        clock.wall_ms.is_nan() || clock.wall_ms == f64::INFINITY || clock.wall_ms == 1_000.0;
    if broken && rng.below(2) == 0 {
        clock.wall_ms = JAN_15_2024 + clock.monotonic_ms;
    }
}

#[test]
fn the_quiet_path_decides_exactly_as_the_general_one_or_changes_nothing() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut quiet_calls, mut general_calls) = (0, 0);
    for run in 0..300 {
        let policy = [
            SuspendPolicy::Ignore,
            SuspendPolicy::Credit,
            SuspendPolicy::Refuse,
        ][run % 3];
        let quota = (run % 2 == 0).then(|| daily_utc_quota(rng.below(20)));
        let config = LimiterConfig {
            capacity: 8.0,
            refill_per_second: 3.0,
            initial_tokens: 2.0,
            quota,
            ..config(policy)
        };
        let mut clock = ManualClock::new(
            10_000.0,
            JAN_15_2024 + 10_000.0,
            (run % 4 == 1).then_some(10_000.0),
        );
        let mut limiter = Limiter::new(config, &mut clock).unwrap();
        for _ in 0..60 {
            move_clock(&mut clock, &mut rng);
            let n = 1 + rng.below(3);
            let before = format!("{limiter:?}");
            let mut general = limiter.clone();
            let mut anomalies = Vec::new();
            let expected = general.try_consume(n, &mut clock.clone(), &mut anomalies);
            match limiter.try_consume_quiet(n, clock.monotonic_ms, clock.wall_ms) {
                Some(decision) => {
                    quiet_calls += 1;
                    assert_eq!(expected, Ok(decision));
                    assert!(
                        anomalies.is_empty(),
                        "the quiet path decided a call that raises {anomalies:?}"
                    );
                    assert_eq!(format!("{limiter:?}"), format!("{general:?}"));
                }
                None => {
                    general_calls += 1;
                    assert_eq!(
                        format!("{limiter:?}"),
                        before,
                        "a refused quiet call changed the limiter"
                    );
                    limiter = general;
                }
            }
        }
    }
    // Both paths were exercised, many times.
    assert!(
        quiet_calls > 5_000 && general_calls > 1_000,
        "quiet {quiet_calls}, general {general_calls}"
    );
}
