//! The zone's protocol under concurrency and under a process dying at each step of a write.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;
use crate::keyed::KeyBuf;
use crate::reconciler::Anchors;

fn temp_path(name: &str) -> String {
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm".to_owned()
    } else {
        std::env::temp_dir().display().to_string()
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{dir}/qcs-zone-unit-{name}-{}-{nanos}", std::process::id())
}

struct Removed(String);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn config(path: &str, capacity: f64, max_keys: u64) -> ZoneConfig {
    ZoneConfig {
        path: path.to_owned(),
        defaults: KeyPolicy {
            capacity,
            refill_per_second: 1e-9,
            initial_tokens: capacity,
            quota: None,
        },
        suspend_policy: SuspendPolicy::Ignore,
        earliest_plausible_wall_ms: None,
        max_keys,
        reader: false,
    }
}

fn consume(zone: &Zone, key: &str, n: u64) -> Result<Decision, Error> {
    let key = KeyBuf::from_text(key);
    let mut anomalies = Vec::new();
    match zone.call(
        key.key(),
        Operation::Consume,
        n,
        PolicyChoice::Defaults,
        |_| Ok(n),
        &mut anomalies,
    )? {
        Outcome::Decided(decision, _) => Ok(decision),
        other => panic!("not a decision: {other:?}"),
    }
}

fn tokens(zone: &Zone, key: &str) -> f64 {
    let key = KeyBuf::from_text(key);
    match zone
        .call(
            key.key(),
            Operation::Status,
            1,
            PolicyChoice::Defaults,
            |_| Ok(1),
            &mut Vec::new(),
        )
        .unwrap()
    {
        Outcome::Status(status) => status.tokens,
        other => panic!("not a status: {other:?}"),
    }
}

/// The group and slot holding `key`.
fn locate(zone: &Zone, key: &KeyBuf, hash: u64) -> (usize, usize) {
    let (first, second) = zone.groups_of(hash);
    [first, second]
        .into_iter()
        .find_map(|group| {
            zone.find_in(group, key.key(), hash)
                .map(|slot| (group, slot))
        })
        .unwrap()
}

/// A pid no process has any more: a reaped child's.
fn dead_owner() -> u64 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    u64::from(pid) << 32
}

#[test]
fn threads_with_their_own_handles_drain_a_key_exactly() {
    let path = temp_path("threads");
    let _removed = Removed(path.clone());
    let config = config(&path, 20_000.0, 1000);
    drop(Zone::open(&config, None).unwrap());
    let admitted: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|thread| {
                let config = config.clone();
                scope.spawn(move || {
                    let zone = Zone::open(&config, None).unwrap();
                    let mut allowed = 0;
                    for i in 0..8_000 {
                        let key = if i % 3 == 0 {
                            format!("k{}", (i + thread) % 40)
                        } else {
                            "hot".to_owned()
                        };
                        if key == "hot" && consume(&zone, &key, 1).unwrap().allowed {
                            allowed += 1;
                        } else if key != "hot" {
                            consume(&zone, &key, 1).unwrap();
                        }
                    }
                    allowed
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().unwrap())
            .sum()
    });
    assert_eq!(admitted, 20_000);
}

#[test]
fn a_lock_left_by_a_dead_process_is_taken_over_and_its_unflipped_write_is_not_seen() {
    let path = temp_path("takeover");
    let _removed = Removed(path.clone());
    let zone = Zone::open(&config(&path, 10.0, 10), None).unwrap();
    consume(&zone, "k", 3).unwrap();
    let key = KeyBuf::from_text("k");
    let hash = hash_key(zone.seed, key.key());
    let (group, slot) = locate(&zone, &key, hash);
    // A process wrote half of the next state, then died holding the group's lock.
    let record = zone.slot(group, slot);
    let other = usize::from(record.meta.load(Ordering::Relaxed) & META_CURRENT == 0);
    record.state[other][0].store(0.5f64.to_bits(), Ordering::Relaxed);
    zone.group(group)
        .lock
        .store(dead_owner(), Ordering::Relaxed);
    let started = Instant::now();
    assert_eq!(consume(&zone, "k", 1).unwrap().tokens.round(), 6.0);
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(zone.takeovers(), 1);
}

#[test]
fn a_key_being_added_when_its_process_died_gives_its_room_back() {
    let path = temp_path("intent");
    let _removed = Removed(path.clone());
    let zone = Zone::open(&config(&path, 10.0, 1), None).unwrap();
    let key = KeyBuf::from_text("new");
    let hash = hash_key(zone.seed, key.key());
    let group = zone.groups_of(hash).0;
    // Killed after counting the key, before publishing its tag.
    zone.header().held.fetch_add(1, Ordering::Relaxed);
    zone.group(group)
        .intent
        .store(1 | INTENT_RESERVED, Ordering::Relaxed);
    zone.group(group)
        .lock
        .store(dead_owner(), Ordering::Relaxed);
    assert!(consume(&zone, "new", 1).unwrap().allowed);
    assert_eq!(zone.len(), 1);
}

#[test]
fn a_panic_while_a_key_is_added_gives_its_room_back_as_a_takeover_would() {
    let path = temp_path("panic");
    let _removed = Removed(path.clone());
    let zone = Zone::open(&config(&path, 10.0, 1), None).unwrap();
    PANIC_BEFORE_TAG.with(|armed| armed.set(true));
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| consume(&zone, "a", 1)));
    assert!(unwound.is_err(), "the armed panic happened");
    assert_eq!(zone.header().held.load(Ordering::Relaxed), 0);
    assert_eq!(zone.len(), 0);
    // The room is there again: with maxKeys 1, another key fits.
    assert!(consume(&zone, "b", 1).unwrap().allowed);
    assert_eq!(zone.len(), 1);
}

#[test]
fn a_reconciler_write_not_published_changes_nothing() {
    let path = temp_path("recon");
    let _removed = Removed(path.clone());
    let zone = Zone::open(&config(&path, 10.0, 10), None).unwrap();
    let (head, before) = zone.read_recon();
    // A limiter wrote its slot and died before its CAS.
    let mine = (zone.seat * 2) as u64;
    let index = if head & 0xffff == mine {
        mine + 1
    } else {
        mine
    };
    let garbage = ReconState {
        timeline_ms: 1e12,
        ..before
    };
    garbage.store(zone.recon_slot(index));
    assert_eq!(zone.read_recon(), (head, before));
    consume(&zone, "k", 1).unwrap();
    assert!(zone.read_recon().1.timeline_ms < 1e6);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// For any history of calls and any store a dying writer stopped after, the next call is not
    /// blocked and sees the key as it was before the dead call or after it, never in between.
    #[test]
    fn a_write_cut_at_any_step_leaves_the_state_before_or_after(
        history in proptest::collection::vec((0usize..3, 1u64..4), 0..12),
        steps in 0usize..=WRITE_STEPS,
        taken in 1u64..4,
    ) {
        let path = temp_path("model");
        let _removed = Removed(path.clone());
        let zone = Zone::open(&config(&path, 1000.0, 16), None).unwrap();
        let keys = ["a", "b", "c"];
        let mut model = [1000.0f64; 3];
        for &(key, n) in &history {
            consume(&zone, keys[key], n).unwrap();
            model[key] -= n as f64;
        }
        consume(&zone, "a", 1).unwrap();
        model[0] -= 1.0;
        let key = KeyBuf::from_text("a");
        let hash = hash_key(zone.seed, key.key());
        let (group, slot) = locate(&zone, &key, hash);
        let record = zone.slot(group, slot);
        let before = read_state(record);
        let after = KeyState { tokens: before.tokens - taken as f64, quota_used: before.quota_used + taken, ..before };
        // The dead writer held the lock and made `steps` of its stores.
        zone.group(group).lock.store(dead_owner(), Ordering::Relaxed);
        write_state_cut(record, after, steps);
        if steps == WRITE_STEPS {
            model[0] -= taken as f64;
        }
        let started = Instant::now();
        let seen = tokens(&zone, "a");
        prop_assert!(started.elapsed() < Duration::from_secs(1));
        prop_assert_eq!(seen.round(), model[0]);
        let state = read_state(record);
        prop_assert!(state == before || state.tokens == after.tokens && state.quota_used == after.quota_used);
        for (index, key) in keys.iter().enumerate().skip(1) {
            if history.iter().any(|&(k, _)| k == index) {
                prop_assert_eq!(tokens(&zone, key).round(), model[index]);
            }
        }
    }
}

#[test]
fn after_a_reboot_the_old_locks_and_readings_are_dropped_and_the_keys_kept() {
    let path = temp_path("reboot");
    let _removed = Removed(path.clone());
    let config = config(&path, 10.0, 10);
    let zone = Zone::open(&config, None).unwrap();
    consume(&zone, "k", 4).unwrap();
    let key = KeyBuf::from_text("k");
    let group = zone.groups_of(hash_key(zone.seed, key.key())).0;
    // Left by the boot before: a lock owned by a pid that is alive now (init), readings from
    // far ahead on a monotonic clock that has restarted, another boot id.
    zone.group(group).lock.store(1 << 32, Ordering::Relaxed);
    let (head, state) = zone.read_recon();
    assert!(zone.publish(
        head,
        &ReconState {
            anchors: Anchors {
                last_monotonic_ms: 1e15,
                ..state.anchors
            },
            ..state
        }
    ));
    zone.header().boot_id[0].store(0, Ordering::Relaxed);
    drop(zone);
    let zone = Zone::open(&config, None).unwrap();
    assert_eq!(consume(&zone, "k", 1).unwrap().tokens.round(), 5.0);
    assert_eq!(zone.len(), 1);
}

#[test]
fn a_closed_limiter_gives_its_cell_back_even_when_its_slot_is_published() {
    let path = temp_path("seats");
    let _removed = Removed(path.clone());
    let config = config(&path, 10.0, 10);
    for round in 0..(SEATS + 10) {
        let zone = Zone::open(&config, None).unwrap();
        // This limiter's call publishes its slot; then it closes.
        consume(&zone, "k", 1).unwrap();
        assert!(
            zone.read_recon().0 & 0xffff < (SEATS * 2) as u64,
            "round {round}"
        );
    }
    let zone = Zone::open(&config, None).unwrap();
    assert_eq!(tokens(&zone, "k").round(), 0.0);
}

fn consume_with_anomalies(zone: &Zone, key: &str) -> Vec<Anomaly> {
    let key = KeyBuf::from_text(key);
    let mut anomalies = Vec::new();
    zone.call(
        key.key(),
        Operation::Consume,
        1,
        PolicyChoice::Defaults,
        |_| Ok(1),
        &mut anomalies,
    )
    .unwrap();
    anomalies
}

#[test]
fn a_clock_anomaly_is_raised_once_for_the_zone_on_the_call_that_saw_it() {
    let path = temp_path("anomaly");
    let _removed = Removed(path.clone());
    let config = config(&path, 100.0, 10);
    let first = Zone::open(&config, None).unwrap();
    let second = Zone::open(&config, None).unwrap();
    consume(&first, "k", 1).unwrap();
    // The previous reading's wall clock an hour ahead: the next reading sees the wall set back.
    let (head, state) = first.read_recon();
    assert!(first.publish(
        head,
        &ReconState {
            anchors: Anchors {
                last_wall_ms: state.anchors.last_wall_ms + 3_600_000.0,
                ..state.anchors
            },
            ..state
        }
    ));
    let seen = consume_with_anomalies(&second, "other");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].kind, crate::anomaly::AnomalyKind::WallStepBack);
    assert!(consume_with_anomalies(&first, "k").is_empty());
    assert!(consume_with_anomalies(&second, "k").is_empty());
}

#[test]
fn a_period_regression_is_raised_once_for_the_zone_and_a_hold_ends_after_the_periods_length() {
    let path = temp_path("period");
    let _removed = Removed(path.clone());
    let mut config = config(&path, 100.0, 10);
    let spec = PeriodSpec::parse(
        &RawPeriodSpec {
            unit: "day",
            time_zone: "UTC",
            anchor_day: None,
            anchor_month: None,
            anchor_time: None,
        },
        "quota.period",
    )
    .unwrap();
    config.defaults.quota = Some(QuotaPolicy::new(50, spec));
    let first = Zone::open(&config, None).unwrap();
    let second = Zone::open(&config, None).unwrap();
    consume(&first, "k", 1).unwrap();
    // The open period moved to tomorrow (a bogus reading ahead), entered just now.
    let (head, recon) = first.read_recon();
    let tomorrow = first
        .local_spec(0)
        .period_for(recon.anchors.last_wall_ms + 86_400_000.0);
    {
        let _held = first.lock_spec(first.spec_entry(0));
        first.write_period(0, PeriodState::of(&tomorrow, head >> 16, recon.timeline_ms));
    }
    let held = consume_with_anomalies(&second, "k");
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].kind, crate::anomaly::AnomalyKind::PeriodRegression);
    assert!(
        consume_with_anomalies(&first, "k").is_empty(),
        "once per episode"
    );
    // Entered a day of credited time ago: the hold is over and the period follows the wall clock.
    {
        let _held = first.lock_spec(first.spec_entry(0));
        let period = PeriodState {
            entered_at_ms: recon.timeline_ms - 86_400_000.0,
            ..first.read_period(0)
        };
        first.write_period(0, period);
    }
    let ended = consume_with_anomalies(&first, "k");
    assert_eq!(ended.len(), 1);
    assert!(ended[0].detail.contains("ended"), "{}", ended[0].detail);
    assert!(consume_with_anomalies(&second, "k").is_empty());
}

/// A consume's outcome: `Some(left_ms)` when a block denied it, `None` when it was decided.
fn blocked(zone: &Zone, key: &str) -> Option<f64> {
    let key = KeyBuf::from_text(key);
    let outcome = zone.call(
        key.key(),
        Operation::Consume,
        1,
        PolicyChoice::Defaults,
        |_| Ok(1),
        &mut Vec::new(),
    );
    match outcome.unwrap() {
        Outcome::Blocked { left_ms, .. } => Some(left_ms),
        Outcome::Decided(..) => None,
        other => panic!("not a decision: {other:?}"),
    }
}

#[test]
fn a_block_made_through_one_handle_denies_through_another_and_unblock_lifts_it() {
    let path = temp_path("blocks");
    let _removed = Removed(path.clone());
    let one = Zone::open(&config(&path, 5.0, 64), None).unwrap();
    let other = Zone::open(&config(&path, 5.0, 64), None).unwrap();
    let key = KeyBuf::from_text("k");
    let answer = one
        .block(key.key(), 60_000.0, PolicyChoice::Defaults, &mut Vec::new())
        .unwrap()
        .unwrap();
    assert!(answer.started && answer.left_ms == 60_000.0, "{answer:?}");
    assert_eq!(other.len(), 1, "block held the key");
    let left = blocked(&other, "k").expect("denied by the block");
    assert!(left > 59_000.0 && left <= 60_000.0, "{left}");
    assert_eq!(tokens(&other, "k"), 5.0, "a blocked call consumes nothing");
    let shorter = other
        .block(key.key(), 1_000.0, PolicyChoice::Defaults, &mut Vec::new())
        .unwrap()
        .unwrap();
    assert!(
        !shorter.started && shorter.left_ms > 59_000.0,
        "a longer block stays"
    );
    assert!(other.unblock(key.key(), &mut Vec::new()).unwrap());
    assert!(!one.unblock(key.key(), &mut Vec::new()).unwrap());
    assert_eq!(blocked(&one, "k"), None);
}

#[test]
fn a_run_of_denials_from_every_handle_blocks_once_and_a_blocked_key_is_never_dropped() {
    let path = temp_path("runs");
    let _removed = Removed(path.clone());
    let one = Zone::open(&config(&path, 1.0, 2), None).unwrap();
    let other = Zone::open(&config(&path, 1.0, 2), None).unwrap();
    assert!(consume(&one, "k", 1).unwrap().allowed);
    let key = KeyBuf::from_text("k");
    let first = one.denied(key.key(), 60_000.0, 2, 30_000.0).unwrap();
    assert_eq!(first.left_ms, 0.0);
    let second = other.denied(key.key(), 60_000.0, 2, 30_000.0).unwrap();
    assert!(second.started && second.left_ms == 30_000.0, "{second:?}");
    for i in 0..20 {
        let _ = consume(&one, &format!("other{i}"), 1);
    }
    assert!(blocked(&other, "k").is_some(), "still held, still blocked");
    assert_eq!(one.blocks().len(), 1);
    assert!(one.delete(key.key()));
    assert_eq!(one.blocked_ms(key.key()), 0.0, "delete ended it");
}
