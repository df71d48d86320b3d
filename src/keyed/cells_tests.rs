//! The cell book's rules, each on its own. The simulation of several processes sharing buckets
//! through a model of the store is in `cells_fleet_tests.rs`.

use super::*;
use crate::anomaly::AnomalyKind;
use crate::clock::ManualClock;
use crate::keyed::share::tests::consume;
use crate::keyed::tests::{spec, target_of, JAN_15_2024};
use crate::keyed::{KeyPolicy, KeyStatus, Target};
use crate::quota::QuotaPolicy;

#[path = "cells_fleet_tests.rs"]
mod fleet;

const LEASE_MS: f64 = 10_000.0;

fn bucket(capacity: f64, refill_per_second: f64, quota: Option<u64>) -> KeyPolicy {
    KeyPolicy {
        capacity,
        refill_per_second,
        initial_tokens: capacity,
        quota: quota.map(|limit| QuotaPolicy::new(limit, spec("day", "UTC"))),
    }
}

fn fleet(policy: KeyPolicy, clock: &mut ManualClock) -> KeyedLimiter {
    let mut limiter = crate::keyed::tests::keyed(policy, 1000, clock);
    limiter.enable_share(None);
    limiter.enable_cells(LEASE_MS);
    limiter
}

fn decided(outcome: SharedDecision) -> Decision {
    match outcome {
        SharedDecision::Decided { decision, .. } => decision,
        other => panic!("expected a decision, got {other:?}"),
    }
}

/// A shared consume's decision (it must be one).
fn decide(
    limiter: &mut KeyedLimiter,
    clock: &mut ManualClock,
    text: &str,
    n: u64,
    mode: ShareMode,
) -> Decision {
    decided(consume(limiter, clock, text, n, mode))
}

fn at(limiter: &KeyedLimiter, text: &str) -> u32 {
    limiter.find(KeyBuf::from_text(text).key()).unwrap()
}

fn tokens(limiter: &KeyedLimiter, text: &str) -> f64 {
    limiter.table.records[at(limiter, text) as usize].tokens
}

fn answer(granted: u64, tokens: f64, held: u64, store_now_ms: f64) -> CellsAnswer {
    CellsAnswer {
        granted,
        tokens,
        held,
        fair: held.max(1),
        waiting: false,
        record_id: 7,
        store_now_ms,
    }
}

/// An acquire answered at once with `granted` cells carrying `tokens`.
fn acquire(limiter: &mut KeyedLimiter, clock: &ManualClock, text: &str, granted: u64, tokens: f64) {
    let index = at(limiter, text);
    let request = limiter.cells_request(index, clock.monotonic_ms).unwrap();
    let held = request.held + granted;
    let (credited, anomaly) = limiter.credit_cells(
        index,
        request.sent_ms,
        answer(granted, tokens, held, clock.monotonic_ms),
        clock.monotonic_ms,
    );
    assert!(credited);
    assert_eq!(anomaly, None);
}

fn status(limiter: &mut KeyedLimiter, clock: &mut ManualClock, text: &str) -> KeyStatus {
    let target = target_of(limiter, &KeyBuf::from_text(text));
    limiter.status(target, clock, &mut Vec::new()).unwrap()
}

#[test]
fn a_new_key_holds_no_cell_and_asks_for_them_consuming_nothing() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved),
        SharedDecision::NeedsCells
    );
    assert_eq!(tokens(&limiter, "a"), 0.0);
    let request = limiter.cells_request(at(&limiter, "a"), 0.0).unwrap();
    assert_eq!(
        request,
        CellsRequest {
            capacity: 10,
            refill_per_second: 1.0,
            initial: 10.0,
            held: 0,
            record_id: 0,
            sent_ms: 0.0,
        }
    );
    assert!(limiter.cell(at(&limiter, "a")).unwrap().in_flight);
    let status = status(&mut limiter, &mut clock, "a");
    assert_eq!((status.tokens, status.cells), (0.0, Some(0)));
}

#[test]
fn holding_every_cell_it_decides_as_an_unshared_bucket() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 2.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 10, 10.0);
    for _ in 0..10 {
        assert!(decide(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved).allowed);
    }
    // Every cell held: denied locally with the whole bucket's wait, no store call.
    let denial = decide(&mut limiter, &mut clock, "a", 3, ShareMode::Reserved);
    assert!(!denial.allowed);
    assert_eq!(denial.retry_after_ms, 1_500.0);
    assert_eq!(denial.retry_after_basis, Some(RetryBasis::MonotonicRefill));
    clock.advance(1_500.0);
    assert!(decide(&mut limiter, &mut clock, "a", 3, ShareMode::Reserved).allowed);
    assert_eq!(status(&mut limiter, &mut clock, "a").cells, Some(10));
}

#[test]
fn k_cells_refill_at_k_r_over_c_and_hold_at_most_k_tokens() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 2.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 5, 0.0);
    clock.advance(1_000.0);
    // 5 cells of 10 refill 5 * 2 / 10 = 1 per second.
    assert_eq!(status(&mut limiter, &mut clock, "a").tokens, 1.0);
    clock.advance(8_000.0);
    assert_eq!(status(&mut limiter, &mut clock, "a").tokens, 5.0);
    // A credit never makes tokens exceed the cells.
    acquire(&mut limiter, &clock, "a", 0, 3.0);
    assert_eq!(tokens(&limiter, "a"), 5.0);
    // A refund is capped at the cells too.
    let key = KeyBuf::from_text("a");
    limiter
        .refund(key.key(), 1, &mut clock, &mut Vec::new())
        .unwrap();
    assert_eq!(tokens(&limiter, "a"), 5.0);
}

#[test]
fn a_lapsed_lease_drops_cells_and_tokens_and_the_next_call_asks_again() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 10, 10.0);
    clock.advance(LEASE_MS - 1.0);
    assert!(decide(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved).allowed);
    clock.advance(1.0);
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved),
        SharedDecision::NeedsCells
    );
    let status = status(&mut limiter, &mut clock, "a");
    assert_eq!((status.tokens, status.cells), (0.0, Some(0)));
}

#[test]
fn the_lease_runs_from_when_the_call_was_sent() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let index = at(&limiter, "a");
    let request = limiter.cells_request(index, 0.0).unwrap();
    clock.advance(3_000.0);
    limiter.credit_cells(index, request.sent_ms, answer(10, 10.0, 10, 0.0), 3_000.0);
    assert_eq!(limiter.cell(index).unwrap().lease_end_ms, LEASE_MS);
}

#[test]
fn none_free_denies_locally_for_a_quarter_lease_then_asks_again() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 4, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 2, 0.0);
    acquire(&mut limiter, &clock, "a", 0, 0.0);
    // 4 > 2 cells: wait until the quarter lease is over.
    let denial = decide(&mut limiter, &mut clock, "a", 4, ShareMode::Reserved);
    assert_eq!(
        (denial.allowed, denial.retry_after_ms),
        (false, LEASE_MS / 4.0)
    );
    // 1 <= 2 cells: the wait of its own cells (2 of 10 refill 0.2/s).
    let denial = decide(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    assert_eq!(denial.retry_after_ms, 5_000.0);
    assert_eq!(denial.retry_after_basis, Some(RetryBasis::MonotonicRefill));
    clock.advance(LEASE_MS / 4.0);
    assert_eq!(
        consume(&mut limiter, &mut clock, "a", 4, ShareMode::Reserved),
        SharedDecision::NeedsCells
    );
}

#[test]
fn after_a_cells_answer_it_never_asks_again() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 4, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 2, 1.0);
    let denial = decide(&mut limiter, &mut clock, "a", 4, ShareMode::AfterStore);
    assert!(!denial.allowed);
    assert!(denial.retry_after_ms >= 1.0);
    let denial = decide(&mut limiter, &mut clock, "a", 2, ShareMode::AfterStore);
    // 2 cells, 1 token, 0.2 per second: 5 s.
    assert_eq!(denial.retry_after_ms, 5_000.0);
    assert!(decide(&mut limiter, &mut clock, "a", 1, ShareMode::AfterStore).allowed);
}

#[test]
fn fail_open_decides_on_a_full_outage_bucket_dropped_at_the_next_answer() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(4.0, 1.0, None), &mut clock);
    for _ in 0..4 {
        assert!(decide(&mut limiter, &mut clock, "a", 1, ShareMode::FailOpen).allowed);
    }
    let denial = decide(&mut limiter, &mut clock, "a", 1, ShareMode::FailOpen);
    assert_eq!((denial.allowed, denial.retry_after_ms), (false, 1_000.0));
    assert_eq!(
        tokens(&limiter, "a"),
        0.0,
        "the cells' tokens are untouched"
    );
    clock.advance(1_000.0);
    assert!(decide(&mut limiter, &mut clock, "a", 1, ShareMode::FailOpen).allowed);
    acquire(&mut limiter, &clock, "a", 1, 0.0);
    assert_eq!(limiter.cell(at(&limiter, "a")).unwrap().open, None);
    // A new outage starts full again.
    assert!(decide(&mut limiter, &mut clock, "a", 4, ShareMode::FailOpen).allowed);
}

#[test]
fn with_the_store_away_a_call_its_leased_cells_cover_is_decided_from_them() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(4.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 2, 2.0);
    let decision = decide(&mut limiter, &mut clock, "a", 2, ShareMode::FailOpen);
    assert!(decision.allowed);
    assert_eq!(tokens(&limiter, "a"), 0.0, "taken from the cells");
    assert_eq!(limiter.cell(at(&limiter, "a")).unwrap().open, None);
    // Beyond them: the outage bucket, full.
    let decision = decide(&mut limiter, &mut clock, "a", 3, ShareMode::FailOpen);
    assert!(decision.allowed);
    assert_eq!(decision.tokens, 1.0);
}

#[test]
fn a_key_waiting_with_no_cell_keeps_its_wait_until_idle() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(4.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 0, 0.0);
    assert!(limiter.holds_cells(), "the store keeps its wait");
    assert!(limiter.cells_tick(5_000.0, false, 0.0).is_empty());
    clock.advance(5_000.0);
    let sent = limiter.cells_tick(5_000.0, false, 5_000.0);
    assert_eq!((sent.len(), sent[0].held), (1, 0));
    assert!(!limiter.holds_cells());
}

#[test]
fn with_a_quota_both_limits_hold_and_nothing_is_taken_unless_both_admit() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, Some(100)), &mut clock);
    consume(&mut limiter, &mut clock, "a", 2, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 10, 10.0);
    // Cells admit; the quota reservation does not cover: the quota store call, nothing taken.
    assert!(matches!(
        consume(&mut limiter, &mut clock, "a", 2, ShareMode::Reserved),
        SharedDecision::NeedsStore { lacking: 2 }
    ));
    assert_eq!(tokens(&limiter, "a"), 10.0);
    let index = at(&limiter, "a");
    let request = limiter.reserve_request(index, 2, 2).unwrap();
    assert!(limiter.credit_reservation(index, request.period_slot, 5, 95, 1));
    let decision = decide(&mut limiter, &mut clock, "a", 2, ShareMode::AfterStore);
    assert!(decision.allowed);
    assert_eq!((decision.tokens, decision.quota_remaining), (8.0, Some(98)));
    // The cells do not cover 9: a bucket denial, the quota untouched.
    let denial = decide(&mut limiter, &mut clock, "a", 9, ShareMode::Reserved);
    assert!(!denial.allowed);
    assert_eq!(limiter.table.records[index as usize].quota_used, 2);
}

#[test]
fn a_tick_renews_gives_back_to_waiters_and_releases_idle_keys() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 10, 8.0);
    assert!(limiter.holds_cells());
    // A plain renewal: every cell kept, no token given.
    let sent = limiter.cells_tick(60_000.0, false, 0.0);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].held, sent[0].tokens, sent[0].record_id),
        (10, 0.0, 7)
    );
    let index = at(&limiter, "a");
    assert!(limiter.cell(index).unwrap().in_flight);
    assert!(
        limiter.cells_tick(60_000.0, false, 0.0).is_empty(),
        "in flight"
    );
    clock.advance(1_000.0);
    // Others wait; fair share 4: give back 6 cells with 6/10 of the tokens.
    let answer = RenewAnswer {
        held: 10,
        waiting: true,
        fair: 4,
    };
    let (due, _) = limiter.cells_renewed(index, sent[0].sent_ms, answer, 1_000.0, 1_000.0);
    assert!(due);
    assert_eq!(limiter.cell(index).unwrap().lease_end_ms, LEASE_MS);
    assert!(decide(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved).allowed);
    // (8 + 1 s of refill = 9, less 1 = 8 tokens.)
    let sent = limiter.cells_tick(60_000.0, true, 1_000.0);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].held, 4);
    assert!((sent[0].tokens - 8.0 * 6.0 / 10.0).abs() < 1e-9);
    assert_eq!(
        limiter.cell(index).unwrap().cells,
        4,
        "cells drop at send time"
    );
    assert!((tokens(&limiter, "a") - 3.2).abs() < 1e-9);
    limiter.cells_renewed(
        index,
        sent[0].sent_ms,
        RenewAnswer {
            held: 4,
            waiting: true,
            fair: 2,
        },
        1_000.0,
        1_000.0,
    );
    // Not used since the last tick: every cell goes to the waiters.
    let sent = limiter.cells_tick(60_000.0, true, 1_000.0);
    assert_eq!((sent.len(), sent[0].held), (1, 0));
    assert!((sent[0].tokens - 3.2).abs() < 1e-9);
    limiter.cells_renewed(
        index,
        sent[0].sent_ms,
        RenewAnswer {
            held: 0,
            waiting: true,
            fair: 2,
        },
        1_000.0,
        1_000.0,
    );
    assert!(!limiter.holds_cells());
}

#[test]
fn urgent_ticks_send_give_backs_only_and_idle_keys_go_back_whole() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 5, 5.0);
    assert!(limiter.cells_tick(60_000.0, true, 0.0).is_empty());
    clock.advance(2_000.0);
    let sent = limiter.cells_tick(2_000.0, false, 2_000.0);
    assert_eq!((sent[0].held, sent[0].tokens), (0, 5.0));
    assert_eq!(status(&mut limiter, &mut clock, "a").cells, Some(0));
    let index = at(&limiter, "a");
    limiter.cells_failed(index);
    // A failed release is sent again.
    assert!(limiter.holds_cells());
    let sent = limiter.cells_tick(2_000.0, false, 2_000.0);
    assert_eq!((sent.len(), sent[0].held, sent[0].tokens), (1, 0, 0.0));
}

#[test]
fn dropped_and_deleted_keys_release_their_cells_at_the_next_tick_and_close_releases_all() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    for key in ["a", "b", "c"] {
        consume(&mut limiter, &mut clock, key, 1, ShareMode::Reserved);
        acquire(&mut limiter, &clock, key, 3, 2.0);
    }
    assert!(limiter.delete(KeyBuf::from_text("b").key()));
    let index = at(&limiter, "c");
    limiter.cells_request(index, 0.0).unwrap();
    let sent = limiter.cells_tick(60_000.0, false, 0.0);
    let released: Vec<_> = sent.iter().filter(|renewal| renewal.held == 0).collect();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].key, KeyBuf::from_text("b"));
    assert_eq!(released[0].tokens, 2.0);
    assert_eq!(sent.len(), 2, "c is in flight");
    let all = limiter.cells_release_all(0.0);
    assert_eq!(all.len(), 2);
    assert!(all
        .iter()
        .all(|renewal| renewal.held == 0 && renewal.tokens == 2.0));
    assert!(!limiter.holds_cells());
}

#[test]
fn a_key_held_again_before_the_tick_cancels_its_release() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 3, 2.0);
    assert!(limiter.delete(KeyBuf::from_text("a").key()));
    assert!(limiter.holds_cells(), "its release waits for the tick");
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    acquire(&mut limiter, &clock, "a", 3, 0.0);
    // Sent after that acquire, a release would free the cells it brought.
    let sent = limiter.cells_tick(60_000.0, false, 0.0);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].held, 3);
}

#[test]
fn the_timeline_is_estimated_from_the_monotonic_advance_never_ahead() {
    let mut clock = ManualClock::new(5_000.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    clock.advance(2_000.0);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    assert_eq!(limiter.timeline_at(7_000.0), 2_000.0);
    assert_eq!(limiter.timeline_at(7_500.0), 2_500.0);
    // An earlier reading, or none (a JS clock that passed nothing): the last call's.
    assert_eq!(limiter.timeline_at(6_000.0), 2_000.0);
    assert_eq!(limiter.timeline_at(f64::NAN), 2_000.0);
    // A request sent at the estimate, its lease from there.
    let index = at(&limiter, "a");
    assert_eq!(
        limiter.cells_request(index, 7_500.0).unwrap().sent_ms,
        2_500.0
    );
}

#[test]
fn a_credit_for_a_key_without_a_shared_bucket_is_refused() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = crate::keyed::tests::keyed(bucket(10.0, 1.0, None), 10, &mut clock);
    crate::keyed::tests::consume(&mut limiter, &mut clock, "a", 1).unwrap();
    let index = at(&limiter, "a");
    assert_eq!(limiter.cells_request(index, 0.0), None);
    assert_eq!(
        limiter.credit_cells(index, 0.0, answer(1, 1.0, 1, 0.0), 0.0),
        (false, None)
    );
    assert!(limiter.cells_tick(0.0, false, 0.0).is_empty());
    assert_eq!(status(&mut limiter, &mut clock, "a").cells, None);
}

#[test]
fn the_store_clock_check_raises_store_clock_step_beyond_the_tolerance() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    consume(&mut limiter, &mut clock, "a", 1, ShareMode::Reserved);
    let index = at(&limiter, "a");
    let store = 5e12;
    let call = |limiter: &mut KeyedLimiter, sent: f64, received: f64, store_now: f64| {
        limiter
            .credit_cells(index, sent, answer(1, 0.0, 1, store_now), received)
            .1
    };
    assert_eq!(call(&mut limiter, 0.0, 10.0, store), None);
    // 10 s later, the store's clock 10 s later too (within the 20 ms round trips).
    assert_eq!(
        call(&mut limiter, 10_000.0, 10_020.0, store + 10_005.0),
        None
    );
    // The store's clock jumps 1 s ahead.
    let anomaly = call(&mut limiter, 20_000.0, 20_010.0, store + 21_005.0).unwrap();
    assert_eq!(anomaly.kind, AnomalyKind::StoreClockStep);
    assert_eq!(anomaly.credited_ms, 0.0);
    assert_eq!(anomaly.wall_delta_ms, 11_000.0);
    assert_eq!(anomaly.monotonic_delta_ms, 9_990.0);
    assert_eq!(anomaly.step_ms, Some(11_000.0 - 10_010.0));
    assert!(
        anomaly.detail.contains("store's clock"),
        "{}",
        anomaly.detail
    );
    // Re-anchored: the next consistent answer raises nothing; a step back does.
    assert_eq!(
        call(&mut limiter, 30_000.0, 30_010.0, store + 31_005.0),
        None
    );
    let back = call(&mut limiter, 40_000.0, 40_010.0, store + 31_005.0).unwrap();
    assert!(back.step_ms.unwrap() < 0.0);
    assert_eq!(
        limiter.counters().anomalies_of(AnomalyKind::StoreClockStep),
        2
    );
}

#[test]
fn a_shared_bucket_capacity_is_an_integer_from_1_to_2_pow_31() {
    assert!(is_cell_capacity(1.0) && is_cell_capacity(MAX_CELLS));
    for bad in [
        0.0,
        0.5,
        1.5,
        MAX_CELLS + 1.0,
        f64::INFINITY,
        f64::NAN,
        -1.0,
    ] {
        assert!(!is_cell_capacity(bad), "{bad}");
    }
}

#[test]
fn a_key_not_held_reports_no_cells_and_no_tokens() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(10.0, 1.0, None), &mut clock);
    let status = limiter
        .status(
            Target::New(crate::keyed::DEFAULT_POLICY),
            &mut clock,
            &mut Vec::new(),
        )
        .unwrap();
    assert_eq!((status.tokens, status.cells), (0.0, Some(0)));
}
