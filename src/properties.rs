//! Properties of the limiter over random clock histories: whatever the clocks do,
//! 0 ≤ tokens ≤ capacity, the quota's use never passes its limit, a denial consumes nothing,
//! waits are finite and ≥ 0, a monotonic regression latches, and the open period never moves
//! backwards. Failures found are kept in `src/properties.proptest-regressions` (committed), so
//! every later run tries them first. (A unit test module, not an integration test: with the
//! binding feature on, a test executable linking the whole library could not resolve N-API.)

use crate::anomaly::{Anomaly, AnomalyKind};
use crate::calendar::{PeriodSpec, RawPeriodSpec};
use crate::clock::{ManualClock, SuspendPolicy};
use crate::error::Error;
use crate::limiter::{Limiter, LimiterConfig};
use crate::quota::QuotaPolicy;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

const JAN_15_2024: f64 = 1_705_276_800_000.0;
const DAY_MS: f64 = 86_400_000.0;

/// One thing that happens to the clocks before a call.
#[derive(Clone, Debug)]
enum Move {
    Advance(f64),
    Suspend(f64),
    StepWall(f64),
    /// The monotonic clock moves by this (negative: a regression).
    NudgeMonotonic(f64),
    /// The wall clock is set to an absolute value (1970, far future, outside the calendar...).
    SetWall(f64),
    /// The reader alone moves (a suspend it saw that the wall did not show).
    NudgeReader(f64),
}

/// What the caller does after the move.
#[derive(Clone, Debug)]
enum Call {
    TryConsume(u64),
    Status,
}

#[derive(Clone, Debug)]
struct Setup {
    capacity: f64,
    refill_per_second: f64,
    initial_fraction: f64,
    policy: SuspendPolicy,
    quota: Option<(u64, &'static str, &'static str, Option<f64>)>,
    reader: bool,
    earliest_plausible: bool,
}

fn durations() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => 0.0..2_000.0f64,
        2 => 0.0..(3.0 * DAY_MS),
        1 => 0.0..(400.0 * DAY_MS),
        1 => Just(0.0),
        1 => Just(1e300),
    ]
}

fn signed_durations() -> impl Strategy<Value = f64> {
    (durations(), any::<bool>()).prop_map(|(ms, back)| if back { -ms } else { ms })
}

fn moves() -> impl Strategy<Value = Move> {
    prop_oneof![
        6 => durations().prop_map(Move::Advance),
        2 => durations().prop_map(Move::Suspend),
        2 => signed_durations().prop_map(Move::StepWall),
        1 => prop_oneof![Just(-1.0), Just(-0.001), 0.0..10.0f64, Just(f64::MAX)].prop_map(Move::NudgeMonotonic),
        1 => prop_oneof![Just(0.0), Just(8.64e15), Just(8.64e15 + 1.0), Just(-8.64e15 - 1.0), Just(1e308), JAN_15_2024..(JAN_15_2024 + 800.0 * DAY_MS)]
            .prop_map(Move::SetWall),
        1 => signed_durations().prop_map(Move::NudgeReader),
    ]
}

fn setups() -> impl Strategy<Value = Setup> {
    let zones = prop_oneof![
        Just("UTC"),
        Just("America/Los_Angeles"),
        Just("Pacific/Apia"),
        Just("Australia/Lord_Howe"),
        Just("America/Sao_Paulo")
    ];
    let units = prop_oneof![Just("day"), Just("week"), Just("month"), Just("year")];
    let quota = proptest::option::of((0u64..20, units, zones, proptest::option::of(1.0..=7.0f64)));
    (
        prop_oneof![0.001..10.0f64, 1.0..1e6f64, Just(1e300)],
        prop_oneof![1e-6..10.0f64, 10.0..1e9f64, Just(5e-324), Just(f64::MAX)],
        0.0..=1.0f64,
        prop_oneof![
            Just(SuspendPolicy::Ignore),
            Just(SuspendPolicy::Credit),
            Just(SuspendPolicy::Refuse)
        ],
        quota,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                capacity,
                refill_per_second,
                initial_fraction,
                policy,
                quota,
                reader,
                earliest_plausible,
            )| Setup {
                capacity,
                refill_per_second,
                initial_fraction,
                policy,
                // A week's anchor is an ISO weekday; other units take none in this generator.
                quota: quota.map(|(limit, unit, zone, anchor)| {
                    (
                        limit,
                        unit,
                        zone,
                        if unit == "week" {
                            anchor.map(f64::floor)
                        } else {
                            None
                        },
                    )
                }),
                reader,
                earliest_plausible,
            },
        )
}

fn calls() -> impl Strategy<Value = Call> {
    prop_oneof![4 => (1u64..=4).prop_map(Call::TryConsume), 1 => Just(Call::Status)]
}

fn build(setup: &Setup, clock: &mut ManualClock) -> Limiter {
    let quota = setup.quota.map(|(limit, unit, time_zone, anchor_day)| {
        let raw = RawPeriodSpec {
            unit,
            time_zone,
            anchor_day,
            anchor_month: None,
            anchor_time: None,
        };
        QuotaPolicy::new(
            limit,
            PeriodSpec::parse(&raw, "quota.period").expect("generated specs are valid"),
        )
    });
    let config = LimiterConfig {
        capacity: setup.capacity,
        refill_per_second: setup.refill_per_second,
        initial_tokens: setup.capacity * setup.initial_fraction,
        suspend_policy: setup.policy,
        quota,
        earliest_plausible_wall_ms: setup.earliest_plausible.then_some(1_577_836_800_000.0),
    };
    Limiter::new(config, clock).expect("a manual clock reads finite numbers")
}

fn apply(clock: &mut ManualClock, step: &Move) {
    match *step {
        Move::Advance(ms) => clock.advance(ms),
        Move::Suspend(ms) => clock.suspend(ms),
        Move::StepWall(ms) => clock.step_wall(ms),
        Move::NudgeMonotonic(ms) => clock.monotonic_ms += ms,
        Move::SetWall(ms) => clock.wall_ms = ms,
        Move::NudgeReader(ms) => {
            if let Some(elapsed) = clock.elapsed_realtime_ms.as_mut() {
                *elapsed += ms;
            }
        }
    }
    // Readings stay finite numbers (a manual clock refuses anything else).
    for value in [&mut clock.monotonic_ms, &mut clock.wall_ms] {
        if !value.is_finite() {
            *value = value.signum() * f64::MAX;
        }
    }
    if let Some(elapsed) = clock.elapsed_realtime_ms.as_mut() {
        if !elapsed.is_finite() {
            *elapsed = elapsed.signum() * f64::MAX;
        }
    }
}

fn config() -> Config {
    Config {
        cases: 1_000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "src/properties.proptest-regressions",
        ))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn whatever_the_clocks_do_the_limiter_keeps_its_invariants(
        setup in setups(),
        history in proptest::collection::vec((moves(), calls()), 1..60),
    ) {
        let mut clock = ManualClock::new(10_000.0, JAN_15_2024 + 10_000.0, setup.reader.then_some(10_000.0));
        let mut limiter = build(&setup, &mut clock);
        let mut latched = false;
        let mut last_slot: Option<i64> = None;
        for (step, call) in &history {
            apply(&mut clock, step);
            // What observing alone does to a copy: the yardstick for "a denial changes nothing".
            let mut observed = limiter.clone();
            let mut observed_clock = clock.clone();
            let mut observed_anomalies: Vec<Anomaly> = Vec::new();
            let observed_status = observed.status(&mut observed_clock, &mut observed_anomalies);
            // n is a positive integer no larger than capacity (the binding refuses anything else).
            let n = match call {
                Call::TryConsume(n) => (*n).min(setup.capacity.floor() as u64),
                Call::Status => 1,
            };
            if n == 0 {
                continue;
            }
            let quiet = limiter.clone().try_consume_quiet(n, clock.monotonic_ms, clock.wall_ms);

            let mut anomalies = Vec::new();
            let outcome = match call {
                Call::TryConsume(_) => limiter.try_consume(n, &mut clock, &mut anomalies).map(|decision| (Some(decision), decision.tokens)),
                Call::Status => limiter.status(&mut clock, &mut anomalies).map(|status| (None, status.tokens)),
            };

            // The regression latch: once seen, every later call fails with it.
            if latched {
                prop_assert!(matches!(outcome, Err(Error::MonotonicRegression { latched: true, .. })), "latched, got {outcome:?}");
                continue;
            }
            if let Err(Error::MonotonicRegression { .. }) = outcome {
                latched = true;
            }
            // Observing fails exactly when the call does (status and tryConsume read alike).
            prop_assert_eq!(observed_status.is_err(), outcome.is_err());
            // The limiter's own state after the call, read without observing again.
            if let Some((policy, quota)) = limiter.quota() {
                prop_assert!(quota.used <= policy.limit, "quota used {} > limit {}", quota.used, policy.limit);
                // Periods go backwards only when a hold ends (the held period's own length of
                // real time has passed), and that call says so.
                if let Some(period) = &quota.period.open {
                    if let Some(previous) = last_slot {
                        let hold_ended = anomalies.iter().any(|a| a.kind == AnomalyKind::PeriodRegression && a.detail.contains("ended"));
                        prop_assert!(period.slot.0 >= previous || hold_ended, "the period went back from slot {previous} to {} with no hold ended", period.slot.0);
                    }
                    last_slot = Some(period.slot.0);
                }
            }
            let Ok((decision, tokens)) = outcome else { continue };
            prop_assert!(tokens >= 0.0 && tokens <= setup.capacity, "tokens {tokens} outside 0..={}", setup.capacity);
            if let Some(decision) = decision {
                prop_assert!(decision.retry_after_ms.is_finite() && decision.retry_after_ms >= 0.0, "wait {}", decision.retry_after_ms);
                prop_assert!(decision.tokens >= 0.0 && decision.tokens <= setup.capacity);
                if decision.allowed {
                    prop_assert_eq!(decision.retry_after_ms, 0.0);
                    prop_assert!(decision.retry_after_basis.is_none());
                } else {
                    // A denial consumes nothing: the limiter is exactly what observing made it,
                    // with one more denial counted.
                    prop_assert_eq!(limiter.counters().denied, observed.counters().denied + 1);
                    let observed = observed.clone().with_counters(*limiter.counters());
                    prop_assert_eq!(format!("{limiter:?}"), format!("{observed:?}"));
                    prop_assert_eq!(&anomalies, &observed_anomalies);
                    prop_assert!(decision.retry_after_basis.is_some());
                }
                // The quiet path decides exactly as the general one, or not at all.
                if let Some(quiet) = quiet {
                    prop_assert_eq!(quiet, decision);
                    prop_assert!(anomalies.is_empty());
                }
            }
        }
    }
}
