use super::table::{FLAG_PARKED, NIL};
use super::*;
use crate::anomaly::AnomalyKind;
use crate::calendar::{PeriodSpec, RawPeriodSpec};
use crate::clock::ManualClock;
use crate::limiter::{Limiter, LimiterConfig, RetryBasis};
use crate::quota::QuotaPolicy;

mod periods;
mod snapshot;

pub(super) const JAN_15_2024: f64 = 1_705_276_800_000.0;
pub(super) const DAY_MS: f64 = 86_400_000.0;

pub(super) fn spec(unit: &str, zone: &str) -> PeriodSpec {
    let raw = RawPeriodSpec {
        unit,
        time_zone: zone,
        anchor_day: None,
        anchor_month: None,
        anchor_time: None,
    };
    PeriodSpec::parse(&raw, "quota.period").unwrap()
}

pub(super) fn policy(capacity: f64, quota: Option<u64>) -> KeyPolicy {
    KeyPolicy {
        capacity,
        refill_per_second: 1.0,
        initial_tokens: capacity,
        quota: quota.map(|limit| QuotaPolicy::new(limit, spec("day", "UTC"))),
    }
}

pub(super) fn keyed(defaults: KeyPolicy, max_keys: usize, clock: &mut ManualClock) -> KeyedLimiter {
    let config = KeyedConfig {
        defaults,
        suspend_policy: SuspendPolicy::Ignore,
        earliest_plausible_wall_ms: Some(1_577_836_800_000.0),
        max_keys,
    };
    KeyedLimiter::new(config, clock).unwrap()
}

pub(super) fn key(text: &str) -> KeyBuf {
    KeyBuf::from_text(text)
}

/// What the binding asks for `key`: the key held, else a new key with the defaults.
pub(super) fn target_of(limiter: &KeyedLimiter, key: &KeyBuf) -> Target {
    limiter
        .find(key.key())
        .map_or(Target::New(DEFAULT_POLICY), Target::Held)
}

/// `tryConsume(key, n)` the way the binding calls it: a held key, else one with the defaults.
pub(super) fn consume(
    limiter: &mut KeyedLimiter,
    clock: &mut ManualClock,
    text: &str,
    n: u64,
) -> Result<(Decision, Vec<Anomaly>), Error> {
    let key = key(text);
    let target = target_of(limiter, &key);
    let mut anomalies = Vec::new();
    let decision = limiter.try_consume(key.key(), target, n, clock, &mut anomalies)?;
    Ok((decision, anomalies))
}

pub(super) fn status(limiter: &mut KeyedLimiter, clock: &mut ManualClock, text: &str) -> KeyStatus {
    let target = target_of(limiter, &key(text));
    limiter.status(target, clock, &mut Vec::new()).unwrap()
}

fn kinds(anomalies: &[Anomaly]) -> Vec<AnomalyKind> {
    anomalies.iter().map(|a| a.kind).collect()
}

#[test]
fn a_key_has_one_encoding() {
    // (The record's 72 bytes are a `const` assertion beside `Record`.)
    assert!(!key("tenant-1").wide);
    assert!(!key("café").wide, "Latin-1 strings are stored as bytes");
    assert!(key("東京").wide);
    let lone = KeyBuf::from_utf16(&[0xd800]);
    assert_ne!(
        lone,
        KeyBuf::from_utf16(&[0xfffd]),
        "a lone surrogate is its own key"
    );
}

#[test]
fn a_wall_step_is_one_anomaly_for_the_whole_limiter_and_every_key_refills_from_the_timeline() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = keyed(
        KeyPolicy {
            initial_tokens: 0.0,
            ..policy(10.0, None)
        },
        100,
        &mut clock,
    );
    for name in ["a", "b", "c"] {
        assert!(
            !consume(&mut limiter, &mut clock, name, 1)
                .unwrap()
                .0
                .allowed
        );
    }
    clock.advance(2_000.0);
    clock.step_wall(-30_000.0);
    let (decision, anomalies) = consume(&mut limiter, &mut clock, "a", 1).unwrap();
    assert_eq!(kinds(&anomalies), [AnomalyKind::WallStepBack]);
    assert_eq!(
        anomalies[0].credited_ms, 2_000.0,
        "creditedMs is what the timeline was credited"
    );
    assert_eq!(decision.tokens, 1.0);
    let (decision, anomalies) = consume(&mut limiter, &mut clock, "b", 1).unwrap();
    assert!(anomalies.is_empty(), "not once per key");
    assert_eq!(
        decision.tokens, 1.0,
        "b refilled by the time credited since its previous call"
    );
    clock.advance(3_000.0);
    assert_eq!(
        consume(&mut limiter, &mut clock, "c", 1).unwrap().0.tokens,
        4.0
    );
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 1).unwrap().0.tokens,
        3.0
    );
}

#[test]
fn keys_with_equal_specs_share_one_open_period_and_a_skip_is_reported_once_per_spec() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = KeyedLimiter::new(
        KeyedConfig {
            defaults: policy(10.0, Some(5)),
            suspend_policy: SuspendPolicy::Credit,
            earliest_plausible_wall_ms: None,
            max_keys: 100,
        },
        &mut clock,
    )
    .unwrap();
    let tokyo = limiter.intern(KeyPolicy {
        quota: Some(QuotaPolicy::new(5, spec("day", "Asia/Tokyo"))),
        ..policy(10.0, None)
    });
    for name in ["a", "b"] {
        consume(&mut limiter, &mut clock, name, 2).unwrap();
    }
    let mut anomalies = Vec::new();
    limiter
        .try_consume(
            key("t").key(),
            Target::New(tokyo),
            1,
            &mut clock,
            &mut anomalies,
        )
        .unwrap();
    clock.step_wall(3.0 * DAY_MS);
    let (decision, anomalies) = consume(&mut limiter, &mut clock, "a", 1).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::AmbiguousWallJump, AnomalyKind::PeriodSkip]
    );
    assert_eq!(anomalies[1].skipped, Some(2));
    assert_eq!(
        decision.quota_remaining,
        Some(4),
        "a's use of the ended period is gone"
    );
    let (decision, anomalies) = consume(&mut limiter, &mut clock, "b", 1).unwrap();
    assert!(anomalies.is_empty(), "the UTC spec's period already moved");
    assert_eq!(decision.quota_remaining, Some(4));
    let mut anomalies = Vec::new();
    let target = Target::Held(limiter.find(key("t").key()).unwrap());
    limiter
        .try_consume(key("t").key(), target, 1, &mut clock, &mut anomalies)
        .unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::PeriodSkip],
        "Tokyo's period moves when one of its keys reads the clock"
    );
}

#[test]
fn at_max_keys_an_idle_key_goes_first_then_the_least_recently_used_without_quota_use() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = keyed(policy(10.0, None), 3, &mut clock);
    consume(&mut limiter, &mut clock, "a", 10).unwrap();
    consume(&mut limiter, &mut clock, "b", 1).unwrap();
    consume(&mut limiter, &mut clock, "c", 10).unwrap();
    clock.advance(2_000.0); // b is full again: idle. a and c are not.
    consume(&mut limiter, &mut clock, "d", 1).unwrap();
    assert!(
        limiter.find(key("b").key()).is_none(),
        "the idle key was dropped"
    );
    assert!(limiter.find(key("a").key()).is_some());
    consume(&mut limiter, &mut clock, "a", 1).unwrap(); // a is now the most recent
    consume(&mut limiter, &mut clock, "e", 1).unwrap();
    assert!(
        limiter.find(key("c").key()).is_none(),
        "c was the least recently used"
    );
    assert_eq!(limiter.len(), 3);
}

#[test]
fn quota_use_is_never_dropped_and_a_refused_new_key_changes_nothing() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 60_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 2, &mut clock);
    consume(&mut limiter, &mut clock, "a", 1).unwrap();
    consume(&mut limiter, &mut clock, "b", 1).unwrap();
    clock.advance(500.0);
    clock.step_wall(-5_000.0);
    let error = consume(&mut limiter, &mut clock, "c", 1).unwrap_err();
    assert_eq!(error.code().as_str(), "ERR_KEY_LIMIT");
    assert!(error.to_string().contains("maxKeys"));
    assert_eq!(
        limiter.reconciler.last_monotonic_ms, 0.0,
        "the readings were not re-anchored"
    );
    let (_, anomalies) = consume(&mut limiter, &mut clock, "a", 1).unwrap();
    assert_eq!(
        kinds(&anomalies),
        [AnomalyKind::WallStepBack],
        "the step is still news"
    );
    // Once the day is over, the use belongs to an ended period and the key can go.
    clock.advance(DAY_MS);
    let (decision, _) = consume(&mut limiter, &mut clock, "c", 1).unwrap();
    assert!(decision.allowed);
    assert_eq!(limiter.len(), 2);
}

#[test]
fn a_key_refunded_to_no_use_can_make_room_again() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 2, &mut clock);
    consume(&mut limiter, &mut clock, "a", 1).unwrap();
    consume(&mut limiter, &mut clock, "b", 1).unwrap();
    assert_eq!(
        consume(&mut limiter, &mut clock, "c", 1)
            .unwrap_err()
            .code()
            .as_str(),
        "ERR_KEY_LIMIT"
    );
    limiter
        .refund(key("b").key(), 1, &mut clock, &mut Vec::new())
        .unwrap();
    consume(&mut limiter, &mut clock, "c", 1).unwrap();
    assert!(limiter.find(key("b").key()).is_none());
    assert!(limiter.find(key("a").key()).is_some());
}

#[test]
fn a_refund_gives_back_within_bounds_and_a_key_not_held_is_not_held_by_it() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 10, &mut clock);
    consume(&mut limiter, &mut clock, "a", 3).unwrap();
    limiter
        .refund(key("a").key(), 2, &mut clock, &mut Vec::new())
        .unwrap();
    let s = status(&mut limiter, &mut clock, "a");
    assert_eq!((s.tokens, s.quota_used), (9.0, Some(1)));
    limiter
        .refund(key("a").key(), 50, &mut clock, &mut Vec::new())
        .unwrap();
    let s = status(&mut limiter, &mut clock, "a");
    assert_eq!((s.tokens, s.quota_used), (10.0, Some(0)));
    limiter
        .refund(key("z").key(), 1, &mut clock, &mut Vec::new())
        .unwrap();
    assert_eq!(limiter.len(), 1);
}

#[test]
fn the_status_of_a_key_not_held_is_a_fresh_key_and_holds_nothing() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(
        KeyPolicy {
            initial_tokens: 4.0,
            ..policy(10.0, Some(5))
        },
        10,
        &mut clock,
    );
    let s = status(&mut limiter, &mut clock, "new");
    assert_eq!(
        (s.tokens, s.quota_used, s.quota_remaining, s.quota_limit),
        (4.0, Some(0), Some(5), Some(5))
    );
    assert_eq!(s.period.unwrap().id, "2024-01-15");
    assert!(limiter.is_empty());
}

#[test]
fn a_deleted_key_comes_back_fresh_and_its_policy_is_released() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, None), 10, &mut clock);
    let plan = limiter.intern(KeyPolicy {
        quota: Some(QuotaPolicy::new(3, spec("month", "America/Los_Angeles"))),
        ..policy(2.0, None)
    });
    limiter
        .try_consume(
            key("x").key(),
            Target::New(plan),
            2,
            &mut clock,
            &mut Vec::new(),
        )
        .unwrap();
    assert_eq!(limiter.specs.len(), 1);
    assert!(limiter.delete(key("x").key()));
    assert!(!limiter.delete(key("x").key()));
    assert_eq!(
        limiter.free_policies,
        [plan],
        "a policy no key holds is freed"
    );
    assert_eq!(limiter.free_specs.len(), 1);
    let s = status(&mut limiter, &mut clock, "x");
    assert_eq!(s.tokens, 10.0);
}

#[test]
fn many_keys_survive_removals_in_any_order() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = keyed(
        KeyPolicy {
            initial_tokens: 0.0,
            ..policy(1e9, None)
        },
        10_000,
        &mut clock,
    );
    let name = |i: u32| {
        if i.is_multiple_of(7) {
            format!("a long key, longer than the inline bytes: {i}")
        } else {
            format!("k{i}")
        }
    };
    for i in 0..3_000 {
        clock.advance(1.0);
        consume(&mut limiter, &mut clock, &name(i), 1).unwrap();
    }
    for i in (0..3_000).step_by(3) {
        assert!(limiter.delete(key(&name(i)).key()), "{}", name(i));
    }
    assert_eq!(limiter.len(), 2_000);
    for i in 0..3_000 {
        let held = limiter.find(key(&name(i)).key()).is_some();
        assert_eq!(held, i % 3 != 0, "{}", name(i));
    }
    // The recency list still links every record, least recent first.
    let order: Vec<u32> = limiter.keys_oldest_first().collect();
    assert_eq!(order.len(), 2_000);
    let first = limiter.table.key_of(order[0]).to_utf16();
    assert_eq!(String::from_utf16(&first).unwrap(), "k1");
}

/// A tiny deterministic generator (xorshift64*), so the histories below are reproducible.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn for_one_key_a_keyed_limiter_decides_exactly_as_a_quota_clock_on_the_same_history() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for run in 0..200 {
        let suspend_policy = [
            SuspendPolicy::Ignore,
            SuspendPolicy::Credit,
            SuspendPolicy::Refuse,
        ][run % 3];
        let limit = (run % 2 == 0).then(|| rng.below(30));
        let reader = (run % 4 == 1).then_some(10_000.0);
        let mut clock = ManualClock::new(10_000.0, JAN_15_2024 + 10_000.0, reader);
        let config = LimiterConfig {
            capacity: 8.0,
            refill_per_second: 3.0,
            initial_tokens: 2.0,
            suspend_policy,
            quota: limit.map(|limit| QuotaPolicy::new(limit, spec("day", "UTC"))),
            earliest_plausible_wall_ms: Some(1_577_836_800_000.0),
        };
        let mut single = Limiter::new(config, &mut clock.clone()).unwrap();
        let defaults = KeyPolicy {
            capacity: 8.0,
            refill_per_second: 3.0,
            initial_tokens: 2.0,
            quota: limit.map(|limit| QuotaPolicy::new(limit, spec("day", "UTC"))),
        };
        let config = KeyedConfig {
            defaults,
            suspend_policy,
            earliest_plausible_wall_ms: Some(1_577_836_800_000.0),
            max_keys: 10,
        };
        let mut keyed = KeyedLimiter::new(config, &mut clock.clone()).unwrap();
        // The key is first held at construction time: a key starts with its initialTokens when
        // first held, a QuotaClock when it is made.
        assert_eq!(
            consume(&mut keyed, &mut clock, "k", 1).unwrap().0,
            single
                .try_consume(1, &mut clock.clone(), &mut Vec::new())
                .unwrap()
        );
        for _ in 0..80 {
            match rng.below(100) {
                0..=3 => clock.step_wall(-(rng.below(2 * DAY_MS as u64) as f64)),
                4..=7 => clock.step_wall(rng.below(2 * DAY_MS as u64) as f64),
                8..=11 => clock.suspend(rng.below(DAY_MS as u64) as f64),
                12 => clock.monotonic_ms -= 1.0,
                _ => clock.advance(rng.below(4_000) as f64 / 4.0),
            }
            let n = 1 + rng.below(3);
            let refund = rng.below(10) == 0;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            if refund {
                let expected = single.refund(n, &mut clock.clone(), &mut a);
                assert_eq!(
                    keyed
                        .refund(key("k").key(), n, &mut clock, &mut b)
                        .map_err(|e| e.code()),
                    expected.map_err(|e| e.code())
                );
            } else {
                let expected = single.try_consume(n, &mut clock.clone(), &mut a);
                let actual =
                    consume(&mut keyed, &mut clock, "k", n).map(|(decision, anomalies)| {
                        b = anomalies;
                        decision
                    });
                assert_eq!(actual, expected, "run {run}");
            }
            assert_eq!(kinds(&a), kinds(&b), "run {run}");
        }
    }
}

#[test]
fn the_quiet_path_decides_exactly_as_the_general_one_or_changes_nothing() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut quiet = keyed(policy(5.0, Some(40)), 100, &mut clock);
    let mut general = keyed(policy(5.0, Some(40)), 100, &mut clock.clone());
    let (mut quiet_calls, mut denied) = (0, 0);
    for _ in 0..5_000 {
        match rng.below(20) {
            0 => clock.step_wall(-1_000.0),
            1 => clock.advance(DAY_MS / 3.0),
            _ => clock.advance(rng.below(800) as f64),
        }
        let name = format!("k{}", rng.below(5));
        let n = 1 + rng.below(2);
        let expected = consume(&mut general, &mut clock.clone(), &name, n)
            .unwrap()
            .0;
        let index = quiet.find(key(&name).key());
        let decided = index
            .and_then(|index| quiet.try_consume_quiet(index, n, clock.monotonic_ms, clock.wall_ms));
        let decision = match decided {
            Some(decision) => {
                quiet_calls += 1;
                decision
            }
            None => consume(&mut quiet, &mut clock.clone(), &name, n).unwrap().0,
        };
        assert_eq!(decision, expected);
        denied += usize::from(decision.retry_after_basis == Some(RetryBasis::WallPeriod));
    }
    assert!(
        quiet_calls > 3_000 && denied > 20,
        "quiet {quiet_calls}, denied by the quota {denied}"
    );
}

/// Every record is on exactly one list, reachable from its ends both ways, and found by its key.
pub(super) fn check_invariants(limiter: &KeyedLimiter) {
    let mut seen = vec![0u32; limiter.len()];
    let mut walk = |list: &List, parked: bool| {
        let mut previous = NIL;
        let mut index = list.head;
        while index != NIL {
            let record = &limiter.table.records[index as usize];
            assert_eq!(record.prev, previous, "a broken back link");
            assert_eq!(record.flags & FLAG_PARKED != 0, parked);
            seen[index as usize] += 1;
            previous = index;
            index = record.next;
        }
        assert_eq!(list.tail, previous, "a list's tail is its last record");
    };
    walk(&limiter.main, false);
    for state in &limiter.specs {
        walk(&state.parked, true);
    }
    assert!(
        seen.iter().all(|&count| count == 1),
        "every record on exactly one list: {seen:?}"
    );
    for index in 0..limiter.len() as u32 {
        assert_eq!(limiter.find(limiter.table.key_of(index)), Some(index));
    }
    let held: u32 = limiter
        .policies
        .iter()
        .enumerate()
        .filter(|(id, _)| !limiter.free_policies.contains(&(*id as u32)))
        .map(|(_, policy)| policy.keys)
        .sum();
    assert_eq!(
        held as usize,
        limiter.len(),
        "policy reference counts add up to the keys held"
    );
}

#[test]
fn random_calls_keep_the_table_the_lists_and_the_policies_consistent() {
    let mut rng = Rng(0x51_7cc1_b727_220a);
    for run in 0..120 {
        let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
        // Small limiters, and ones past the idle sweep's threshold (more than 64 keys).
        let max_keys = if run % 3 == 0 {
            65 + rng.below(100) as usize
        } else {
            1 + rng.below(12) as usize
        };
        let names = 2 * max_keys as u64;
        let mut limiter = keyed(
            KeyPolicy {
                initial_tokens: 1.0,
                ..policy(3.0, Some(4))
            },
            max_keys,
            &mut clock,
        );
        let zones = ["UTC", "Asia/Tokyo", "America/New_York"];
        // Interned at each use, as the binding does (an id no key holds is freed).
        let plan = |i: usize| KeyPolicy {
            quota: (i != 2).then(|| QuotaPolicy::new(2 + i as u64, spec("day", zones[i]))),
            ..policy(2.0 + i as f64, None)
        };
        for _ in 0..600 {
            match rng.below(12) {
                0 => clock.advance(rng.below(4 * 3_600_000) as f64),
                1 => clock.advance(rng.below(3_000) as f64),
                2 => clock.step_wall(-(rng.below(3_600_000) as f64)),
                _ => {}
            }
            let name = format!(
                "k{}{}",
                rng.below(names),
                if rng.below(4) == 0 {
                    "-with-a-name-longer-than-the-inline-words"
                } else {
                    ""
                }
            );
            let key = KeyBuf::from_text(&name);
            match rng.below(6) {
                0 => {
                    limiter.delete(key.key());
                }
                1 => limiter
                    .refund(key.key(), 1 + rng.below(2), &mut clock, &mut Vec::new())
                    .unwrap(),
                2 => {
                    let target = limiter
                        .find(key.key())
                        .map_or(Target::New(DEFAULT_POLICY), Target::Held);
                    limiter.status(target, &mut clock, &mut Vec::new()).unwrap();
                }
                _ => {
                    let target = match limiter.find(key.key()) {
                        Some(index) => Target::Held(index),
                        None => Target::New(limiter.intern(plan(rng.below(3) as usize))),
                    };
                    let outcome =
                        limiter.try_consume(key.key(), target, 1, &mut clock, &mut Vec::new());
                    if let Target::New(id) = target {
                        limiter.release_if_unused(id);
                    }
                    match outcome {
                        Ok(_) => assert!(
                            limiter.find(key.key()).is_some(),
                            "run {run}: a decided key is held"
                        ),
                        Err(error) => assert_eq!(error.code().as_str(), "ERR_KEY_LIMIT"),
                    }
                }
            }
            assert!(limiter.len() <= max_keys);
            check_invariants(&limiter);
        }
        let snapshot = Snapshot::parse(&limiter.snapshot(), max_keys as u64).unwrap();
        assert_eq!(snapshot.len(), limiter.len());
    }
}

#[test]
fn evicting_the_last_key_of_a_policy_to_hold_a_key_of_the_same_policy_keeps_that_policy() {
    // Regression: the victim's release freed the policy the new key was about to hold, and a
    // later policy took its slot (and so changed the new key's limits).
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, None), 1, &mut clock);
    let plan = |capacity| KeyPolicy {
        capacity,
        refill_per_second: 1.0,
        initial_tokens: capacity,
        quota: None,
    };
    for name in ["a", "b"] {
        let id = limiter.intern(plan(5.0));
        limiter
            .try_consume(
                key(name).key(),
                Target::New(id),
                1,
                &mut clock,
                &mut Vec::new(),
            )
            .unwrap();
        limiter.release_if_unused(id);
    }
    let other = limiter.intern(plan(7.0));
    assert_eq!(
        status(&mut limiter, &mut clock, "b").capacity,
        5.0,
        "b keeps its own limits"
    );
    limiter.release_if_unused(other);
    check_invariants(&limiter);
}
