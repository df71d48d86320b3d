use std::collections::HashMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

use super::*;
use crate::anomaly::Anomaly;
use crate::clock::ManualClock;
use crate::kernel::RetryBasis;
use crate::keyed::tests::{keyed, policy, spec, target_of, DAY_MS, JAN_15_2024};
use crate::keyed::{slot_i32, KeyBuf, KeyedLimiter};

fn shared(capacity: f64, limit: u64, lease: Option<u64>, clock: &mut ManualClock) -> KeyedLimiter {
    let mut limiter = keyed(policy(capacity, Some(limit)), 1000, clock);
    limiter.enable_share(lease);
    limiter
}

/// A shared consume of `text` (held, or a new key with the defaults).
pub(in crate::keyed) fn consume(
    limiter: &mut KeyedLimiter,
    clock: &mut ManualClock,
    text: &str,
    n: u64,
    mode: ShareMode,
) -> SharedDecision {
    let key = KeyBuf::from_text(text);
    let target = target_of(limiter, &key);
    let mut anomalies: Vec<Anomaly> = Vec::new();
    limiter
        .consume_shared(key.key(), target, n, mode, clock, &mut anomalies)
        .unwrap()
}

fn index(limiter: &KeyedLimiter, text: &str) -> u32 {
    limiter.find(KeyBuf::from_text(text).key()).unwrap()
}

/// The store's answer to `request`.
fn answer(
    request: &ReserveRequest,
    granted: u64,
    unreserved: u64,
    record_id: u64,
) -> ReserveAnswer {
    ReserveAnswer {
        lacking: request.lacking,
        granted,
        unreserved,
        record_id,
    }
}

/// Reserves for `text` as the store protocol would against a store with `room` unreserved.
fn grant(limiter: &mut KeyedLimiter, text: &str, lacking: u64, room: &mut u64) -> u64 {
    let at = index(limiter, text);
    let request = limiter.reserve_request(at, lacking, lacking).unwrap();
    let want = lacking.max(request.lease_units.min(room.div_ceil(8)));
    let granted = if *room >= want { want } else { 0 };
    *room -= granted;
    let now_ms = limiter.reconciler.last_monotonic_ms;
    assert!(limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, granted, *room, 0),
        now_ms
    ));
    granted
}

#[test]
fn a_call_its_reservation_does_not_cover_asks_the_store_and_consumes_nothing() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 100, Some(5), &mut clock);
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::Reserved),
        SharedDecision::NeedsStore { lacking: 2 }
    );
    let at = index(&limiter, "a");
    assert_eq!(limiter.table.records[at as usize].tokens, 10.0);
    assert!(limiter.reservation(at).unwrap().hold.in_flight);
    let mut room = 100;
    assert_eq!(grant(&mut limiter, "a", 2, &mut room), 5);
    let SharedDecision::Decided { decision, refill } =
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::AfterStore)
    else {
        panic!("covered");
    };
    assert!(decision.allowed);
    assert_eq!(decision.quota_remaining, Some(95 + 3));
    // 3 left of a lease of 5: not below half a lease yet.
    assert!(!refill);
    let SharedDecision::Decided { refill, .. } =
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::Reserved)
    else {
        panic!("covered");
    };
    assert!(refill, "1 left of 5 is below half a lease");
    // Asked once: the key is in flight until the answer.
    let SharedDecision::Decided { refill, .. } =
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved)
    else {
        panic!("covered");
    };
    assert!(!refill);
}

#[test]
fn after_the_store_answered_too_little_the_call_is_denied_with_the_quota_wait() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = shared(10.0, 3, None, &mut clock);
    let mut room = 1; // two units were taken by other processes
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::Reserved),
        SharedDecision::NeedsStore { lacking: 2 }
    );
    assert_eq!(grant(&mut limiter, "a", 2, &mut room), 0);
    let SharedDecision::Decided { decision, .. } =
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::AfterStore)
    else {
        panic!("decided");
    };
    assert!(!decision.allowed);
    assert_eq!(decision.retry_after_basis, Some(RetryBasis::WallPeriod));
    assert_eq!(decision.retry_after_ms, DAY_MS - 1_000.0);
    assert_eq!(decision.quota_remaining, Some(1));
    assert_eq!(
        limiter.table.records[index(&limiter, "a") as usize].tokens,
        10.0
    );
}

#[test]
fn a_store_call_asks_for_what_the_waiting_calls_lack_together_as_far_as_the_store_has_it() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 100, Some(5), &mut clock);
    consume(&mut limiter, &mut clock, "a", 2, ShareMode::Reserved);
    let at = index(&limiter, "a");
    assert_eq!(limiter.reserve_request(at, 2, 30).unwrap().lacking, 30);
    let mut room = 100;
    grant(&mut limiter, "a", 2, &mut room);
    // 95 unreserved at the last answer, 5 left here: at most 95 asked, never less than the call lacks.
    assert_eq!(limiter.reserve_request(at, 1, 500).unwrap().lacking, 95);
    assert_eq!(limiter.reserve_request(at, 3, 4).unwrap().lacking, 3);
}

#[test]
fn a_refill_tops_the_reservation_up_to_one_lease_never_past_it() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 1_000, Some(10), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let mut room = 1_000;
    grant(&mut limiter, "a", 1, &mut room);
    for _ in 0..6 {
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    }
    // 10 reserved, 6 admitted: 4 left, so the refill asks for at most 6.
    let at = index(&limiter, "a");
    assert_eq!(limiter.reserve_request(at, 0, 0).unwrap().lease_units, 6);
}

#[test]
fn units_left_that_cannot_cover_the_call_go_back_before_the_store_is_asked_again() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 100, Some(5), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let at = index(&limiter, "a");
    let request = limiter.reserve_request(at, 1, 1).unwrap();
    // 5 granted, the last 5 of the period: 95 were taken by others.
    assert!(limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, 5, 0, 0),
        clock.monotonic_ms
    ));
    for _ in 0..4 {
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    }
    // 1 left here, 0 in the store, 2 wanted: the 1 goes back, and the call asks for both.
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::AfterStore),
        SharedDecision::NeedsStore { lacking: 2 }
    );
    let back = limiter.take_dropped_give_backs();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].units, 1);
    // Nothing left here: now the store's answer decides, and too little is a denial.
    let SharedDecision::Decided { decision, .. } =
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::AfterStore)
    else {
        panic!("decided");
    };
    assert!(!decision.allowed);
}

/// A `Reserved` consume of `n` on `text`: whether it was decided and allowed (panics on a step).
fn allowed(limiter: &mut KeyedLimiter, clock: &mut ManualClock, text: &str, n: u64) -> bool {
    match consume(limiter, clock, text, n, ShareMode::Reserved) {
        SharedDecision::Decided { decision, .. } => decision.allowed,
        other => panic!("decided, not {other:?}"),
    }
}

/// The store answers a call for `text` that lacks `lacking` units (0: a refill): `granted`
/// units, `unreserved` left after them.
fn answered(limiter: &mut KeyedLimiter, clock: &ManualClock, text: &str, answer_of: [u64; 3]) {
    let [lacking, granted, unreserved] = answer_of;
    let at = index(limiter, text);
    let request = limiter.reserve_request(at, lacking, lacking).unwrap();
    let answer = answer(&request, granted, unreserved, 0);
    assert!(limiter.credit_reservation(at, request.period_slot, answer, clock.monotonic_ms));
}

fn is_short(limiter: &KeyedLimiter, text: &str) -> bool {
    let hold = limiter.reservation(index(limiter, text)).unwrap().hold;
    hold.is_short(limiter.timeline_ms)
}

fn needs_store(lacking: u64) -> SharedDecision {
    SharedDecision::NeedsStore { lacking }
}

#[test]
fn an_answer_that_leaves_the_key_nothing_denies_its_uncovered_calls_here_for_a_second() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(1_000.0, 100, Some(5), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    // Nothing granted, nothing unreserved: the key is short for QUOTA_SHORT_MS.
    answered(&mut limiter, &clock, "a", [1, 0, 0]);
    assert!(is_short(&limiter, "a"));
    clock.advance(QUOTA_SHORT_MS - 1.0);
    let SharedDecision::Decided { decision, .. } =
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved)
    else {
        panic!("decided here");
    };
    assert!(!decision.allowed);
    assert_eq!(decision.retry_after_basis, Some(RetryBasis::WallPeriod));
    // Decided here: the key is not marked in flight for a store call nobody makes.
    let at = index(&limiter, "a");
    assert!(!limiter.reservation(at).unwrap().hold.in_flight);
    // The second is over: the call asks the store again.
    clock.advance(1.0);
    let asked = consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    assert_eq!(asked, needs_store(1));
}

#[test]
fn a_short_key_admits_what_its_reservation_covers_and_asks_the_store_as_right_after_an_answer() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(1_000.0, 100, Some(5), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    // 3 granted, the last of the store's: short (none unreserved), 3 held here.
    answered(&mut limiter, &clock, "a", [1, 3, 0]);
    assert!(allowed(&mut limiter, &mut clock, "a", 2));
    assert!(allowed(&mut limiter, &mut clock, "a", 1));
    answered(&mut limiter, &clock, "a", [0, 2, 0]);
    // 2 left here, 3 wanted, none in the store: the 2 go back first (split units are not lost
    // between processes), and the call asks the store for all 3, as right after an answer.
    let asked = consume(&mut limiter, &mut clock, "a", 3, ShareMode::Reserved);
    assert_eq!(asked, needs_store(3));
    assert_eq!(limiter.take_dropped_give_backs()[0].units, 2);

    // A store that had units left at its answer (too few for this call) is asked for fewer.
    let mut limiter = shared(1_000.0, 100, Some(5), &mut clock);
    consume(&mut limiter, &mut clock, "b", 4, ShareMode::Reserved);
    answered(&mut limiter, &clock, "b", [4, 0, 3]);
    assert!(!allowed(&mut limiter, &mut clock, "b", 4));
    let asked = consume(&mut limiter, &mut clock, "b", 3, ShareMode::Reserved);
    assert_eq!(asked, needs_store(3));
}

#[test]
fn a_grant_that_leaves_units_clears_the_short_mark_and_so_does_giving_everything_back() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(1_000.0, 100, Some(5), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    answered(&mut limiter, &clock, "a", [1, 0, 0]);
    // An operator's grant: the next answer (a refill's, lacking nothing) leaves units.
    answered(&mut limiter, &clock, "a", [0, 0, 25]);
    assert!(!is_short(&limiter, "a"));
    let asked = consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    assert_eq!(asked, needs_store(1));
    // Short again (30 lacking, 25 unreserved); everything given back (close()): the next call
    // asks the store at once.
    answered(&mut limiter, &clock, "a", [30, 0, 25]);
    assert!(!allowed(&mut limiter, &mut clock, "a", 30));
    limiter.give_back_idle(clock.monotonic_ms, 0.0);
    let asked = consume(&mut limiter, &mut clock, "a", 30, ShareMode::Reserved);
    assert_eq!(asked, needs_store(30));
}

#[test]
fn a_refill_is_asked_for_below_half_of_what_the_next_store_call_would_bring() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    // A lease far above what the store hands out near the end of a period (an eighth of 100).
    let mut limiter = shared(1_000.0, 100, Some(50), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let mut room = 100;
    assert_eq!(grant(&mut limiter, "a", 1, &mut room), 13);
    let mut refills = Vec::new();
    for i in 0..12 {
        if let SharedDecision::Decided { refill: true, .. } =
            consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved)
        {
            refills.push(i);
        }
    }
    // 87 unreserved: the next call would bring 11, so the refill comes at 5 left, once.
    assert_eq!(refills, vec![7]);
}

/// Consumes one unit at a time until a call asks for a background refill; returns how many
/// units were left then.
fn left_when_refill_is_asked(limiter: &mut KeyedLimiter, clock: &mut ManualClock) -> u64 {
    loop {
        match consume(limiter, clock, "a", 1, ShareMode::Reserved) {
            SharedDecision::Decided { refill: true, .. } => {
                let at = index(limiter, "a");
                let admitted = limiter.table.records[at as usize].quota_used;
                return limiter.reservation(at).unwrap().left(admitted);
            }
            SharedDecision::Decided { .. } => {}
            SharedDecision::NeedsStore { .. } | SharedDecision::NeedsSlice => {
                panic!("covered until the refill is asked for")
            }
        }
    }
}

#[test]
fn after_a_refill_that_came_too_late_the_next_is_asked_for_at_an_eighth_and_brings_more() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(1e9, 1_000_000, Some(1_000), &mut clock);
    let mut room = 1_000_000;
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    assert_eq!(grant(&mut limiter, "a", 1, &mut room), 1_000);
    // In time: asked for below half a lease, answered before the reservation ran out.
    assert_eq!(left_when_refill_is_asked(&mut limiter, &mut clock), 499);
    let at = index(&limiter, "a");
    let request = limiter.reserve_request(at, 0, 0).unwrap();
    assert_eq!(request.lease_units, 501);
    assert!(limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, 501, room - 501, 0),
        clock.monotonic_ms
    ));
    room -= 501;
    assert_eq!(
        left_when_refill_is_asked(&mut limiter, &mut clock),
        499,
        "still below half"
    );
    // Too late: the reservation runs out while the fetch is under way, and a call waits for it.
    let request = limiter.reserve_request(at, 0, 0).unwrap();
    for _ in 0..499 {
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    }
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved),
        SharedDecision::NeedsStore { lacking: 1 }
    );
    assert!(limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, 501, room - 501, 0),
        clock.monotonic_ms
    ));
    // The next fetch is asked for at an eighth of a lease, and tops up to one lease (never past it).
    assert_eq!(left_when_refill_is_asked(&mut limiter, &mut clock), 124);
    let request = limiter.reserve_request(at, 0, 0).unwrap();
    assert_eq!(request.lease_units, 876);
    // That one came in time: the one after it is asked for below half again.
    assert!(limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, 876, 1_000_000, 0),
        clock.monotonic_ms
    ));
    assert_eq!(left_when_refill_is_asked(&mut limiter, &mut clock), 499);
}

#[test]
fn more_than_the_limit_is_denied_without_a_store_call() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 0, None, &mut clock);
    let SharedDecision::Decided { decision, refill } =
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved)
    else {
        panic!("decided locally");
    };
    assert!(!decision.allowed && !refill);
    assert_eq!(decision.retry_after_basis, Some(RetryBasis::WallPeriod));
}

#[test]
fn fail_open_admits_and_charges_the_units_at_the_next_store_call() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 100, Some(10), &mut clock);
    let SharedDecision::Decided { decision, .. } =
        consume(&mut limiter, &mut clock, "a", 3, ShareMode::FailOpen)
    else {
        panic!("decided");
    };
    assert!(decision.allowed);
    let at = index(&limiter, "a");
    let request = limiter.reserve_request(at, 0, 0).unwrap();
    assert_eq!(request.charge, 3);
    // The call fails: the units are owed again, and charged by the next one.
    limiter.reservation_failed(at, request.period_slot, request.charge);
    assert_eq!(limiter.reserve_request(at, 0, 0).unwrap().charge, 3);
    assert_eq!(limiter.reserve_request(at, 0, 0).unwrap().charge, 0);
}

#[test]
fn idle_keys_give_back_what_they_did_not_admit_and_dropped_keys_too() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 100, Some(10), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let mut room = 100;
    grant(&mut limiter, "a", 1, &mut room);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::AfterStore);
    consume(&mut limiter, &mut clock, "b", 1, ShareMode::Reserved);
    grant(&mut limiter, "b", 1, &mut room);
    assert!(limiter.give_back_idle(5_000.0, 10_000.0).is_empty());
    let back = limiter.give_back_idle(10_000.0, 10_000.0);
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].units, 9);
    assert_eq!(back[0].period_id, "2024-01-15");
    assert_eq!(back[1].units, 10);
    assert!(!limiter.holds_reservations());
    // A refund returns units to the reservation; deleting the key gives them back.
    limiter
        .refund(KeyBuf::from_text("a").key(), 1, &mut clock, &mut Vec::new())
        .unwrap();
    assert!(limiter.holds_reservations());
    assert!(limiter.delete(KeyBuf::from_text("a").key()));
    let dropped = limiter.take_dropped_give_backs();
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].units, 1);
    assert_eq!(dropped[0].key, KeyBuf::from_text("a"));
}

#[test]
fn a_new_period_starts_the_reservation_over_and_a_late_answer_for_the_old_one_is_refused() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(10.0, 100, Some(10), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let at = index(&limiter, "a");
    let request = limiter.reserve_request(at, 1, 1).unwrap();
    clock.advance(DAY_MS);
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved),
        SharedDecision::NeedsStore { lacking: 1 }
    );
    assert!(!limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, 10, 90, 0),
        clock.monotonic_ms
    ));
    assert_eq!(limiter.reservation(at).unwrap().reserved, 0);
}

#[test]
fn a_limiter_without_share_has_no_book_and_its_records_stay_72_bytes() {
    assert_eq!(std::mem::size_of::<super::super::table::Record>(), 72);
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let limiter = keyed(policy(1.0, None), 10, &mut clock);
    assert!(!limiter.is_shared());
}

/// What a process and the store do, in any order.
#[derive(Clone, Debug)]
enum BookEvent {
    Consume {
        key: u8,
        n: u64,
        after_store: bool,
    },
    /// The answer to the key's request, if one was made.
    Answer {
        key: u8,
    },
    /// The key's store call failed.
    Fail {
        key: u8,
    },
    Refund {
        key: u8,
        n: u64,
    },
    Advance(f64),
    Idle,
    Delete {
        key: u8,
    },
}

fn steps() -> impl Strategy<Value = Vec<BookEvent>> {
    let step = prop_oneof![
        6 => (0u8..3, 1u64..6, any::<bool>()).prop_map(|(key, n, after_store)| BookEvent::Consume { key, n, after_store }),
        4 => (0u8..3).prop_map(|key| BookEvent::Answer { key }),
        1 => (0u8..3).prop_map(|key| BookEvent::Fail { key }),
        1 => (0u8..3, 1u64..4).prop_map(|(key, n)| BookEvent::Refund { key, n }),
        2 => prop_oneof![0.0..20_000.0f64, Just(DAY_MS)].prop_map(BookEvent::Advance),
        1 => Just(BookEvent::Idle),
        1 => (0u8..3).prop_map(|key| BookEvent::Delete { key }),
    ];
    proptest::collection::vec(step, 1..120)
}

proptest! {
    #![proptest_config(Config {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("src/keyed/share/tests.proptest-regressions"))),
        ..Config::default()
    })]

    /// Per key and period, the units admitted (less the refunded) never exceed the units the
    /// store granted less those given back, and the store never grants past the limit.
    #[test]
    fn never_admits_more_quota_units_than_were_granted(
        limit in 0u64..60,
        lease in prop_oneof![Just(None), (1u64..20).prop_map(Some)],
        steps in steps(),
    ) {
        let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
        let mut limiter = shared(1e9, limit, lease, &mut clock);
        // Per (key, period id): the store's count, and what this process admitted net.
        let mut store: HashMap<(u8, String), u64> = HashMap::new();
        let mut admitted: HashMap<(u8, String), i64> = HashMap::new();
        let mut requests: HashMap<u8, ReserveRequest> = HashMap::new();
        let name = |key: u8| format!("k{key}");
        let period_id = |clock: &ManualClock| {
            crate::calendar::PeriodSpec::period_for(&spec("day", "UTC"), clock.wall_ms).id
        };
        for step in steps {
            match step {
                BookEvent::Consume { key, n, after_store } => {
                    let mode = if after_store { ShareMode::AfterStore } else { ShareMode::Reserved };
                    match consume(&mut limiter, &mut clock, &name(key), n, mode) {
                        SharedDecision::Decided { decision, refill } => {
                            if decision.allowed {
                                *admitted.entry((key, period_id(&clock))).or_default() += n as i64;
                            }
                            if refill {
                                let at = index(&limiter, &name(key));
                                requests.insert(key, limiter.reserve_request(at, 0, 0).unwrap());
                            }
                        }
                        SharedDecision::NeedsStore { lacking } => {
                            prop_assert!(lacking >= 1 && lacking <= n);
                            let at = index(&limiter, &name(key));
                            requests.insert(key, limiter.reserve_request(at, lacking, lacking).unwrap());
                        }
                        SharedDecision::NeedsSlice => prop_assert!(false, "no shared bucket"),
                    }
                }
                BookEvent::Answer { key } => {
                    let Some(request) = requests.remove(&key) else { continue };
                    let count = store.entry((key, request.period_id.clone())).or_default();
                    *count += request.charge;
                    let room = request.limit.saturating_sub(*count);
                    let want = request.lacking.max(request.lease_units.min(room.div_ceil(8)));
                    let granted = if room >= want { want } else { 0 };
                    *count += granted;
                    prop_assert!(*count <= limit);
                    let credited = limiter
                        .find(KeyBuf::from_text(&name(key)).key())
                        .is_some_and(|at| limiter.credit_reservation(at, request.period_slot, answer(&request, granted, room - granted, 0), clock.monotonic_ms));
                    if !credited {
                        // Not the key's any more: given straight back.
                        *count -= granted;
                    }
                }
                BookEvent::Fail { key } => {
                    let Some(request) = requests.remove(&key) else { continue };
                    if let Some(at) = limiter.find(KeyBuf::from_text(&name(key)).key()) {
                        limiter.reservation_failed(at, request.period_slot, request.charge);
                    }
                }
                BookEvent::Refund { key, n } => {
                    let open_slot = slot_i32(Some(spec("day", "UTC").period_for(clock.wall_ms).slot));
                    let before = limiter
                        .find(KeyBuf::from_text(&name(key)).key())
                        .map(|at| limiter.table.records[at as usize])
                        .filter(|record| record.period_slot == open_slot)
                        .map_or(0, |record| record.quota_used);
                    limiter.refund(KeyBuf::from_text(&name(key)).key(), n, &mut clock, &mut Vec::new()).unwrap();
                    *admitted.entry((key, period_id(&clock))).or_default() -= before.min(n) as i64;
                }
                BookEvent::Advance(ms) => clock.advance(ms),
                BookEvent::Idle => {
                    for back in limiter.give_back_idle(clock.monotonic_ms, 10_000.0) {
                        let key = back.key.to_text_index();
                        let count = store.entry((key, back.period_id)).or_default();
                        prop_assert!(back.units <= *count);
                        *count -= back.units;
                    }
                }
                BookEvent::Delete { key } => {
                    limiter.delete(KeyBuf::from_text(&name(key)).key());
                    for back in limiter.take_dropped_give_backs() {
                        let key = back.key.to_text_index();
                        let count = store.entry((key, back.period_id)).or_default();
                        prop_assert!(back.units <= *count);
                        *count -= back.units;
                    }
                }
            }
            for ((key, period), &net) in &admitted {
                let count = store.get(&(*key, period.clone())).copied().unwrap_or(0);
                prop_assert!(net <= count as i64, "key {key} period {period}: admitted {net} of {count} reserved");
            }
        }
    }
}

impl KeyBuf {
    /// The property's keys are "k0".."k2".
    fn to_text_index(&self) -> u8 {
        let units = self.key().to_utf16();
        (units[1] - u16::from(b'0')) as u8
    }
}

#[test]
fn a_request_says_what_the_key_holds_what_it_owns_and_the_record_it_reserved_in() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(100.0, 100, Some(10), &mut clock);
    consume(&mut limiter, &mut clock, "a", 3, ShareMode::Reserved);
    let at = index(&limiter, "a");
    let first = limiter.reserve_request(at, 3, 3).unwrap();
    assert_eq!((first.held, first.owned, first.record_id), (0, 0, 0));
    assert!(limiter.credit_reservation(
        at,
        first.period_slot,
        answer(&first, 10, 90, 77),
        clock.monotonic_ms
    ));
    consume(&mut limiter, &mut clock, "a", 3, ShareMode::AfterStore);
    // 10 reserved, 3 admitted: 7 held, 10 owned, in record 77.
    let next = limiter.reserve_request(at, 0, 0).unwrap();
    assert_eq!((next.held, next.owned, next.record_id), (7, 10, 77));
    // An answer naming no record keeps the one known.
    assert!(limiter.credit_reservation(
        at,
        next.period_slot,
        answer(&next, 0, 90, 0),
        clock.monotonic_ms
    ));
    assert_eq!(limiter.reservation(at).unwrap().hold.record_id, 77);
    // A give-back names the record its units were reserved in; what was admitted stays owned.
    let back = limiter.give_back_idle(f64::INFINITY, 0.0);
    assert_eq!((back[0].units, back[0].record_id), (7, 77));
    let after = limiter.reserve_request(at, 0, 0).unwrap();
    assert_eq!((after.held, after.owned), (0, 3));
}

#[test]
fn a_key_the_store_counts_as_holding_units_tells_it_0_when_let_go_even_with_none_left() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = shared(100.0, 100, Some(4), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let at = index(&limiter, "a");
    let request = limiter.reserve_request(at, 1, 1).unwrap();
    assert!(limiter.credit_reservation(
        at,
        request.period_slot,
        answer(&request, 4, 96, 9),
        clock.monotonic_ms
    ));
    for _ in 0..4 {
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::AfterStore);
    }
    // All 4 admitted: nothing goes back, but the store still counts 4 held from the last call.
    let back = limiter.give_back_idle(f64::INFINITY, 0.0);
    assert_eq!(back.len(), 1);
    assert_eq!(
        (back[0].units, back[0].charge, back[0].record_id),
        (0, 0, 9)
    );
    // Told once: nothing more to say.
    assert!(limiter.give_back_idle(f64::INFINITY, 0.0).is_empty());
    assert!(!limiter.holds_reservations());
}
