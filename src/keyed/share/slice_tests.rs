//! The slice book's rules, and a simulation of several processes sharing one bucket through a
//! model of the store (the protocol of `lib/share/protocol.js`, step by step): whatever the clocks,
//! deaths and losses, no interval of real time admits more than `C + R·Δ·1.001`.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::clock::ManualClock;
use crate::keyed::share::terms::{hunger_ms, write_off_after_ms, SliceAnswer, SHARE_REFILL_MS};
use crate::keyed::share::tests::consume;
use crate::keyed::tests::JAN_15_2024;
use crate::keyed::{KeyPolicy, ShareMode, SharedDecision};
use crate::limiter::{Decision, RetryBasis};

fn bucket(capacity: f64, refill_per_second: f64) -> KeyPolicy {
    KeyPolicy {
        capacity,
        refill_per_second,
        initial_tokens: capacity,
        quota: None,
    }
}

fn fleet(policy: KeyPolicy, lease_ms: f64, clock: &mut ManualClock) -> KeyedLimiter {
    let mut limiter = crate::keyed::tests::keyed(policy, 1000, clock);
    limiter.enable_share(None);
    limiter.enable_slices(lease_ms);
    limiter
}

fn at(limiter: &KeyedLimiter, text: &str) -> u32 {
    limiter.find(KeyBuf::from_text(text).key()).unwrap()
}

/// One holder's part of a record: tokens out, the fleet clock when its last call came, its lease.
#[derive(Clone, Copy, Debug)]
struct Holder {
    out: u64,
    at: f64,
    lease: f64,
    /// Given one more margin by a move of the fleet clock past its margin at once.
    extended: bool,
}

#[derive(Clone, Debug)]
struct Record {
    capacity: f64,
    refill: f64,
    tokens: f64,
    fleet: f64,
    store_at: f64,
    id: u64,
    holders: HashMap<u32, Holder>,
    /// Until when (fleet ms) each instance that found the bucket short counts as hungry.
    hungry: HashMap<u32, f64>,
}

/// The store protocol's `bucketTake` on one record, at store time `now`.
#[derive(Default)]
struct Store {
    record: Option<Record>,
    next_id: u64,
}

impl Store {
    fn take(&mut self, me: u32, lease: f64, request: &SliceRequest, now: f64) -> SliceAnswer {
        let lost = request.record_id != 0
            && self
                .record
                .as_ref()
                .is_none_or(|record| record.id != request.record_id);
        let record = self.record.get_or_insert_with(|| {
            self.next_id += 1;
            Record {
                capacity: request.capacity as f64,
                refill: request.refill_per_second,
                tokens: if request.record_id != 0 {
                    0.0
                } else {
                    request.capacity as f64
                },
                fleet: 0.0,
                store_at: now,
                id: self.next_id,
                holders: HashMap::new(),
                hungry: HashMap::new(),
            }
        });
        let out = |record: &Record| record.holders.values().map(|h| h.out as f64).sum::<f64>();
        let by_store = record.fleet + (now - record.store_at).max(0.0);
        let by_caller = if request.fleet_ms >= 0.0 && !lost {
            request.fleet_ms
        } else {
            record.fleet + record.capacity / record.refill * 1000.0
        };
        let moved = record.fleet.max(by_store.min(by_caller));
        let before = record.fleet;
        record.fleet = moved;
        record.store_at = now;
        let fleet = record.fleet;
        // Write-offs, spent for good: the latest margin passed (the refill counts them as out
        // until then). A move past a margin at once gives the slice one more margin, once.
        let mut written_off = 0.0;
        let mut written_until = before;
        record.holders.retain(|y, h| {
            let margin = write_off_after_ms(h.lease);
            if *y == me || h.at + margin >= fleet {
                return true;
            }
            if fleet - before > margin && !h.extended {
                h.at = fleet;
                h.extended = true;
                return true;
            }
            written_off += h.out as f64;
            written_until = written_until.max(h.at + margin);
            false
        });
        let prev = if lost {
            0
        } else {
            record.holders.get(&me).map_or(0, |h| h.out)
        };
        let keep = request.held.min(prev);
        let back = request.give.min((prev - keep) as f64);
        let others = record
            .holders
            .iter()
            .filter(|(y, _)| **y != me)
            .map(|(_, h)| h.out as f64)
            .sum::<f64>();
        // The refill, piece by piece: the caller's slice counts as out in full until it was
        // last spent from (`spent_ms` before now), what it keeps and gives back until now.
        let spent_until = (moved - request.spent_ms).clamp(before, moved);
        let written_until = written_until.clamp(before, moved);
        // (Both marks are within [before, moved]: the pieces are before, the nearer mark, the
        // other, moved.)
        let points = [
            before,
            spent_until.min(written_until),
            spent_until.max(written_until),
            moved,
        ];
        for pair in points.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            if to <= from {
                continue;
            }
            let mine = if from < spent_until {
                prev as f64
            } else {
                keep as f64 + back
            };
            let gone = if from < written_until {
                written_off
            } else {
                0.0
            };
            let room = record.capacity - others - gone - mine;
            if record.tokens < room {
                record.tokens = (record.tokens + (to - from) * record.refill / 1000.0).min(room);
            }
        }
        record.holders.insert(
            me,
            Holder {
                out: keep,
                at: fleet,
                lease,
                extended: false,
            },
        );
        let room = record.capacity - out(record);
        record.tokens = (record.tokens + back).min(room);
        record.tokens -= request.charge as f64;
        let others = record
            .holders
            .iter()
            .filter(|(y, h)| **y != me && h.out > 0)
            .count() as f64;
        record.hungry.retain(|y, until| *y == me || *until >= fleet);
        let hungry = record.hungry.keys().filter(|y| **y != me).count() as f64;
        let sharing = others
            + record
                .hungry
                .keys()
                .filter(|y| **y != me && record.holders.get(y).is_none_or(|h| h.out == 0))
                .count() as f64;
        let floor = u64::from(request.more != More::Nothing);
        let w = request.want.max(floor);
        let granted = if w == 0 || record.tokens < w as f64 {
            0
        } else {
            let rest = record.tokens - w as f64;
            let unlimited = w + match request.more {
                More::Nothing => 0,
                More::Share => {
                    let fair = (rest / (sharing + 1.0)).min(record.capacity / (sharing + 2.0));
                    fair.min((fair / 4.0).max(record.refill * SHARE_REFILL_MS / 1000.0))
                        .floor() as u64
                }
                More::All => (rest / (hungry + 1.0)).floor() as u64,
            };
            if request.most > 0 {
                unlimited.min(request.most.max(w))
            } else {
                unlimited
            }
        };
        record.tokens -= granted as f64;
        if (w > 0 && granted == 0) || (granted > 0 && record.tokens < 1.0) {
            let until = fleet + hunger_ms(lease, record.capacity, record.refill, record.tokens);
            record.hungry.insert(me, until);
        } else {
            record.hungry.remove(&me);
        }
        let holder = record.holders.get_mut(&me).unwrap();
        let held = holder.out + granted;
        // (A take of only what the asking call lacks is spent by it at once: none recorded.)
        if !request.spend {
            holder.out += granted;
        }
        if holder.out == 0 {
            record.holders.remove(&me);
        }
        SliceAnswer {
            granted,
            held,
            tokens: record.tokens,
            fleet_ms: fleet,
            store_now_ms: now,
            record_id: record.id,
        }
    }
}

/// A process of the simulation: its limiter, its clock (running at `rate` of real time).
struct Process {
    limiter: KeyedLimiter,
    clock: ManualClock,
    rate: f64,
    alive: bool,
}

impl Process {
    fn set_time(&mut self, real_ms: f64) {
        self.clock.monotonic_ms = real_ms * self.rate;
        self.clock.wall_ms = JAN_15_2024 + real_ms;
    }

    /// The native decision of a consume of 1, as it stands (no store call made).
    fn decide_one(&mut self) -> SharedDecision {
        consume(
            &mut self.limiter,
            &mut self.clock,
            "k",
            1,
            ShareMode::Reserved,
        )
    }

    /// A consume of `n` as the JS face makes it: decided, or one store call then decided.
    fn consume(&mut self, me: u32, store: &mut Store, store_now: f64, n: u64, lease: f64) -> bool {
        self.consume_counted(me, store, store_now, n, lease, false, &mut 0)
    }

    /// A consume of 1 as the JS face makes it, with the store calls it costs counted in `calls`:
    /// one for a call the slice does not cover, one for a background fetch a covered call marks.
    fn serve(&mut self, me: u32, store: &mut Store, now: f64, lease: f64, calls: &mut u32) -> bool {
        self.consume_counted(me, store, now, 1, lease, true, calls)
    }

    /// [`Process::consume`], and with `background` the fetch a covered call marks due; `calls`
    /// counts the store calls made.
    #[allow(clippy::too_many_arguments)]
    fn consume_counted(
        &mut self,
        me: u32,
        store: &mut Store,
        store_now: f64,
        n: u64,
        lease: f64,
        background: bool,
        calls: &mut u32,
    ) -> bool {
        let outcome = consume(
            &mut self.limiter,
            &mut self.clock,
            "k",
            n,
            ShareMode::Reserved,
        );
        let index = at(&self.limiter, "k");
        let monotonic = self.clock.monotonic_ms;
        let decision = match outcome {
            SharedDecision::Decided { decision, .. } => {
                if background && self.limiter.slice_fetch_due() {
                    if let Some(request) = self.limiter.slice_request(index, 0, 0, monotonic) {
                        *calls += 1;
                        let answer = store.take(me, lease, &request, store_now);
                        self.limiter
                            .credit_slice(index, request.sent_ms, answer, monotonic);
                    }
                }
                decision
            }
            SharedDecision::NeedsSlice => {
                let request = self.limiter.slice_request(index, n, n, monotonic).unwrap();
                *calls += 1;
                let answer = store.take(me, lease, &request, store_now);
                let (credited, _) =
                    self.limiter
                        .credit_slice(index, request.sent_ms, answer, monotonic);
                assert!(credited);
                decided(consume(
                    &mut self.limiter,
                    &mut self.clock,
                    "k",
                    n,
                    ShareMode::AfterStore,
                ))
            }
            other => panic!("unexpected {other:?}"),
        };
        decision.allowed
    }
}

fn decided(outcome: SharedDecision) -> Decision {
    match outcome {
        SharedDecision::Decided { decision, .. } => decision,
        other => panic!("expected a decision, got {other:?}"),
    }
}

/// The largest excess over `C + R·Δ·1.001` of any window of `admitted` (real ms, units).
fn worst_window(admitted: &[(f64, u64)], capacity: f64, refill: f64) -> f64 {
    let mut worst = f64::NEG_INFINITY;
    for i in 0..admitted.len() {
        let mut sum = 0.0;
        for j in i..admitted.len() {
            sum += admitted[j].1 as f64;
            let span = admitted[j].0 - admitted[i].0;
            worst = worst.max(sum - (capacity + refill * span / 1000.0 * 1.001));
        }
    }
    worst
}

fn processes(count: usize, policy: KeyPolicy, lease: f64, rates: &[f64]) -> Vec<Process> {
    (0..count)
        .map(|p| {
            let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
            let limiter = fleet(policy.clone(), lease, &mut clock);
            Process {
                limiter,
                clock,
                rate: rates[p % rates.len()],
                alive: true,
            }
        })
        .collect()
}

#[test]
fn the_first_consume_at_each_of_c_processes_is_admitted() {
    let mut store = Store::default();
    let mut fleet = processes(10, bucket(10.0, 1.0), 10_000.0, &[1.0]);
    for (p, process) in fleet.iter_mut().enumerate() {
        process.set_time(1.0);
        assert!(process.consume(p as u32, &mut store, 1.0, 1, 10_000.0));
    }
}

#[test]
fn a_round_robin_burst_of_2c_over_three_processes_admits_at_least_0_9_c() {
    let mut store = Store::default();
    let mut fleet = processes(3, bucket(100.0, 100.0 / 900.0), 10_000.0, &[1.0]);
    let mut admitted = 0;
    for i in 0..200 {
        let p = i % 3;
        fleet[p].set_time(i as f64);
        admitted += u64::from(fleet[p].consume(p as u32, &mut store, i as f64, 1, 10_000.0));
    }
    assert!(admitted >= 90, "admitted {admitted} of 100");
    assert!(admitted <= 100);
}

/// Process 0 consumes one a millisecond (store time alike, leaseMs 10 s) until denied; the time
/// then.
fn drain(process: &mut Process, store: &mut Store) -> f64 {
    let mut t = 0.0;
    process.set_time(t);
    while process.consume(0, store, t, 1, 10_000.0) {
        t += 1.0;
        process.set_time(t);
    }
    t
}

#[test]
fn an_idle_key_refills_in_the_store_for_any_process() {
    let mut store = Store::default();
    let mut fleet = processes(2, bucket(10.0, 1.0), 10_000.0, &[1.0]);
    let t = drain(&mut fleet[0], &mut store);
    // The give-back of what it kept, as its idle timer would.
    let index = at(&fleet[0].limiter, "k");
    for request in fleet[0].limiter.slice_give_backs(0.0, usize::MAX, t) {
        let answer = store.take(0, 10_000.0, &request, t);
        fleet[0]
            .limiter
            .credit_slice(index, request.sent_ms, answer, t);
    }
    // Idle 8 s, then a burst at the other process (its first call: at most C/R of refill).
    let t = t + 8_000.0;
    fleet[1].set_time(t);
    let mut admitted = 0;
    for i in 0..20 {
        admitted += u64::from(fleet[1].consume(1, &mut store, t + i as f64, 1, 10_000.0));
    }
    assert!(admitted >= 7, "admitted {admitted} after 8 s idle");
    assert!(admitted <= 9);
}

/// The bug: a key idle here past its record's lifetime in the store named the expired record
/// as one it knew, so the store made it again EMPTY, as it does a lost one: up to C stranded.
#[test]
fn a_key_idle_past_its_records_expiry_finds_a_full_bucket() {
    let mut store = Store::default();
    let mut fleet = processes(1, bucket(10.0, 1.0), 10_000.0, &[1.0]);
    let t = drain(&mut fleet[0], &mut store);
    // Idle 80 s: the store kept the record max(C / R, 1.1 * leaseMs + 1 s) + 60 s = 72 s.
    store.record = None;
    let t = t + 80_000.0;
    fleet[0].set_time(t);
    let mut admitted = 0;
    for i in 0..20 {
        admitted += u64::from(fleet[0].consume(0, &mut store, t + i as f64, 1, 10_000.0));
    }
    assert!(admitted >= 9, "admitted {admitted} after 80 s idle");
}

#[test]
fn a_short_answer_denies_locally_with_the_fleets_wait_for_at_least_an_eighth_of_the_lease() {
    let mut store = Store::default();
    let mut fleet = processes(1, bucket(2.0, 1.0), 4_000.0, &[1.0]);
    let process = &mut fleet[0];
    process.set_time(0.0);
    assert!(process.consume(0, &mut store, 0.0, 2, 4_000.0));
    assert!(!process.consume(0, &mut store, 0.0, 1, 4_000.0));
    // Denied here with no store call while short.
    process.set_time(400.0);
    let decision = decided(process.decide_one());
    assert!(!decision.allowed);
    assert_eq!(
        decision.retry_after_basis,
        Some(RetryBasis::MonotonicRefill)
    );
    assert!(decision.retry_after_ms >= 500.0 && decision.retry_after_ms <= 1000.0);
    process.set_time(1100.0);
    assert_eq!(process.decide_one(), SharedDecision::NeedsSlice);
}

/// A store answer read late (the process busy): the store's tokens were as it says at the
/// latest at the send, so the fleet's estimate and the key's short mark count from the send; once
/// the bucket may hold the tokens again the key asks the store instead of being denied here (issue
/// 44's long tail: denials with a wait of 1 ms while the fleet held its tokens).
#[test]
fn an_answer_read_late_counts_the_refill_and_the_short_mark_from_its_send() {
    let mut store = Store::default();
    let mut fleet = processes(1, bucket(2.0, 1.0), 4_000.0, &[1.0]);
    let process = &mut fleet[0];
    let consume_two = |process: &mut Process| {
        consume(
            &mut process.limiter,
            &mut process.clock,
            "k",
            2,
            ShareMode::Reserved,
        )
    };
    process.set_time(0.0);
    assert!(process.consume(0, &mut store, 0.0, 2, 4_000.0));
    // At 1,000 ms the store holds 1 of the 2 a call asks for: short for 650 ms (1.3 times the
    // floor); the answer is read at 2,000 ms.
    process.set_time(1_000.0);
    assert_eq!(consume_two(process), SharedDecision::NeedsSlice);
    let index = at(&process.limiter, "k");
    let request = process.limiter.slice_request(index, 2, 2, 1_000.0).unwrap();
    let answer = store.take(0, 4_000.0, &request, 1_000.0);
    assert_eq!((answer.granted, answer.tokens), (0, 1.0));
    process.set_time(2_000.0);
    let (credited, _) = process
        .limiter
        .credit_slice(index, request.sent_ms, answer, 2_000.0);
    assert!(credited);
    // Refilled from the send: 1 + 1 s at 1 a second.
    let fleet_tokens = process.limiter.fleet_tokens(index, 2_000.0).unwrap();
    assert!((fleet_tokens - 2.0).abs() < 1e-9, "{fleet_tokens}");
    assert!(!process.limiter.slice_short_for(index, 2, 2_000.0));
    assert_eq!(consume_two(process), SharedDecision::NeedsSlice);
    assert!(process.consume(0, &mut store, 2_000.0, 2, 4_000.0));
}

#[test]
fn a_lapsed_lease_spends_nothing() {
    let mut store = Store::default();
    let mut fleet = processes(1, bucket(100.0, 1.0), 1_000.0, &[1.0]);
    let process = &mut fleet[0];
    process.set_time(0.0);
    assert!(process.consume(0, &mut store, 0.0, 1, 1_000.0));
    assert!(process.consume(0, &mut store, 0.0, 1, 1_000.0));
    assert!(process.limiter.table.records[0].tokens > 10.0);
    process.set_time(1_000.0);
    assert_eq!(process.decide_one(), SharedDecision::NeedsSlice);
}

#[derive(Clone, Debug)]
enum Event {
    Consume {
        process: usize,
        n: u64,
    },
    Kill {
        process: usize,
    },
    /// The process stops (SIGSTOP, a blocked event loop, a stalled connection) for `ms`, past
    /// its margin, and comes back with what it held: its next calls give back a slice the store
    /// may have written off meanwhile.
    Pause {
        process: usize,
        ms: f64,
    },
    Lose,
    StepStore {
        ms: f64,
    },
}

fn event() -> impl Strategy<Value = (f64, Event)> {
    (
        0.0..400.0f64,
        prop_oneof![
            20 => (0..3usize, 1..3u64).prop_map(|(process, n)| Event::Consume { process, n }),
            1 => (0..3usize).prop_map(|process| Event::Kill { process }),
            2 => (0..3usize, 1_000.0..9_000.0f64).prop_map(|(process, ms)| Event::Pause { process, ms }),
            1 => Just(Event::Lose),
            1 => (-60_000.0..60_000.0f64).prop_map(|ms| Event::StepStore { ms }),
        ],
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Three processes with clocks 0.05% apart, dying or paused past their margins, a store that
    /// loses its record and steps its clock: no window admits more than one bucket would (C, plus C once for each store
    /// step forward, as the contract allows).
    #[test]
    fn a_fleet_never_admits_more_than_one_bucket(
        capacity in 1u64..20,
        refill in 0.5f64..50.0,
        lease in 1_000.0f64..5_000.0,
        events in prop::collection::vec(event(), 1..300),
    ) {
        let policy = bucket(capacity as f64, refill);
        let mut store = Store::default();
        let mut fleet = processes(3, policy, lease, &[1.0, 0.9995, 1.0005]);
        let mut now = 0.0;
        let mut store_offset = 0.0;
        let mut steps = 0.0;
        let mut admitted = Vec::new();
        let mut paused_until = [f64::NEG_INFINITY; 3];
        // Every process knows the record before anything is lost (a process that never dealt
        // with the key cannot tell a lost record from a new one).
        for (p, process) in fleet.iter_mut().enumerate() {
            process.set_time(0.0);
            if process.consume(p as u32, &mut store, 0.0, 1, lease) {
                admitted.push((0.0, 1));
            }
        }
        for (gap, event) in events {
            now += gap;
            match event {
                Event::Consume { process, n } => {
                    let me = process as u32;
                    let p = &mut fleet[process];
                    if !p.alive || n > capacity || now < paused_until[process] {
                        continue;
                    }
                    p.set_time(now);
                    if p.consume(me, &mut store, now + store_offset, n, lease) {
                        admitted.push((now, n));
                    }
                }
                Event::Kill { process } => fleet[process].alive = false,
                Event::Pause { process, ms } => paused_until[process] = now + ms,
                Event::Lose => store.record = None,
                Event::StepStore { ms } => {
                    store_offset += ms;
                    if ms > 0.0 {
                        steps += 1.0;
                    }
                }
            }
        }
        let allowance = capacity as f64 * steps;
        let worst = worst_window(&admitted, capacity as f64, refill) - allowance;
        prop_assert!(worst <= 1e-9, "a window admitted {worst} over the bound");
    }
}

/// What a held key of a fleet bucket costs beside its record (docs/limitations.md says it).
#[test]
fn a_slice_is_at_most_144_bytes() {
    assert!(
        std::mem::size_of::<Slice>() <= 144,
        "{}",
        std::mem::size_of::<Slice>()
    );
}

/// A saturated key (demand `demand_per_r` times R, round-robin over three processes, leaseMs
/// 4,000, for 10 s): its store calls per process per second, and what the fleet admits from the
/// third second on against R.
fn saturated(capacity: f64, refill: f64, demand_per_r: f64) -> ([f64; 3], f64) {
    let lease = 4_000.0;
    let mut store = Store::default();
    let mut fleet = processes(3, bucket(capacity, refill), lease, &[1.0]);
    let mut calls = [0u32; 3];
    let mut steady = 0u64;
    let step = 1000.0 / (demand_per_r * refill);
    let mut i = 0usize;
    loop {
        let t = i as f64 * step;
        if t >= 10_000.0 {
            break;
        }
        let p = i % 3;
        fleet[p].set_time(t);
        // (A millisecond of store latency, so the processes are not answered at one instant.)
        let admitted = fleet[p].serve(p as u32, &mut store, t + 1.0, lease, &mut calls[p]);
        if admitted && t >= 2_000.0 {
            steady += 1;
        }
        i += 1;
    }
    (
        calls.map(|n| f64::from(n) / 10.0),
        steady as f64 / (refill * 8.0),
    )
}

#[test]
fn a_saturated_key_costs_at_most_two_store_calls_a_second_and_the_fleet_admits_0_9_r() {
    for (capacity, refill, demand) in [
        (20.0, 20.0, 2.0),
        (100.0, 100.0, 6.0),
        (100.0, 100.0, 2.0),
        (10.0, 10.0, 3.0),
    ] {
        let (per_second, admitted) = saturated(capacity, refill, demand);
        for calls in per_second {
            assert!(
                calls <= 2.0,
                "C {capacity}, R {refill}, demand {demand}R: {per_second:?} store calls a second"
            );
        }
        assert!(
            admitted >= 0.9,
            "C {capacity}, R {refill}, demand {demand}R: admitted {admitted:.3} of R"
        );
    }
}

#[test]
fn a_key_first_seen_is_not_short_after_its_first_take_however_fast_the_refill() {
    // The first take is what the call lacks, 1 token: at a refill of 1e9 a second it is "no more
    // than twice the refill since" any earlier instant, but it says nothing of the key's demand.
    let mut store = Store::default();
    let mut fleet = processes(1, bucket(2f64.powi(31), 1e9), 4_000.0, &[1.0]);
    let process = &mut fleet[0];
    for (i, t) in [5.0, 5.01, 5.02].into_iter().enumerate() {
        process.set_time(t);
        assert!(process.consume(0, &mut store, t, 1, 4_000.0), "call {i}");
    }
}

/// A record lost and made again, its fleet clock behind; a process then spends the last of its
/// slice and asks at once: the store's refill since its last call counts that slice as out
/// until it was spent (it was spent just now), so the process does not find the bucket full on
/// top of what it just spent. (Found by the proptest below; the store once let the caller's
/// spent slice out of the refill's cap for the whole time since the last call.)
#[test]
fn a_slice_spent_just_before_its_call_counts_as_out_for_the_refill_until_then() {
    let capacity = 3u64;
    let refill = 28.408999948183666;
    let lease = 3330.2999692564044;
    let mut store = Store::default();
    let mut fleet = processes(
        3,
        bucket(capacity as f64, refill),
        lease,
        &[1.0, 0.9995, 1.0005],
    );
    let mut admitted = Vec::new();
    for (p, process) in fleet.iter_mut().enumerate() {
        process.set_time(0.0);
        if process.consume(p as u32, &mut store, 0.0, 1, lease) {
            admitted.push((0.0, 1));
        }
    }
    // (gap before it, process, n); process -1: the store loses the record.
    let events: [(f64, i64, u64); 13] = [
        (0.0, 0, 1),
        (0.0, 0, 1),
        (0.0, 0, 1),
        (0.0, 0, 1),
        (307.9990761012816, 0, 1),
        (0.0, 0, 1),
        (0.0, -1, 0),
        (0.0, 2, 1),
        (282.3465937271457, 1, 1),
        (248.31980722664522, 0, 1),
        (305.1758423515591, 1, 1),
        (283.17202626352355, 0, 2),
        (0.0, 0, 2),
    ];
    let mut now = 0.0;
    for (gap, p, n) in events {
        now += gap;
        if p < 0 {
            store.record = None;
            continue;
        }
        let process = &mut fleet[p as usize];
        process.set_time(now);
        if process.consume(p as u32, &mut store, now, n, lease) {
            admitted.push((now, n));
        }
    }
    // The slice's last 2 spent at 1,427 ms: the call right after asks the store, which admits
    // it at most once (a share of the refill, the other processes having found the bucket short).
    assert!(
        admitted.iter().filter(|(at, _)| *at > 1427.0).count() <= 1,
        "{admitted:?}"
    );
    let worst = worst_window(&admitted, capacity as f64, refill);
    assert!(
        worst <= 1e-9,
        "a window admitted {worst} over the bound: {admitted:?}"
    );
}

#[test]
fn an_answer_holding_less_than_it_granted_is_refused_naming_both() {
    let numbers = |granted, held| [granted, held, 0.0, 0.0, 0.0, 1.0];
    assert_eq!(SliceAnswer::checked(numbers(2.0, 3.0)).unwrap().held, 3);
    let error = SliceAnswer::checked(numbers(3.0, 2.0)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "held must be at least granted; received granted 3 and held 2"
    );
    let error = SliceAnswer::checked(numbers(-1.0, 2.0)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "granted must be a non-negative safe integer; received -1"
    );
}

/// The store's hunger window is the process's local denial, a quarter more and 50 ms; the same
/// values as `hungerMs`'s test in `__test__/stores-bucket.test.js`.
#[test]
fn the_hunger_window_is_the_local_denial_a_quarter_more_and_50_ms() {
    for ((lease, capacity, refill, tokens), denial) in [
        ((10_000.0, 10.0, 10.0, 0.0), 650.0),
        ((1_000.0, 20.0, 20.0, 0.5), 162.5),
        ((10_000.0, 100.0, 0.1, 0.0), 1_000.0),
        ((4_000.0, 100.0, 1.25, 0.0), 800.0),
    ] {
        let hunger = hunger_ms(lease, capacity, refill, tokens);
        assert!((hunger - (denial * 1.25 + 50.0)).abs() < 1e-9, "{hunger}");
    }
}

/// The idle give-backs take time in proportion to what is due, not to the keys held: with 800
/// keys each holding a slice and used just now, the first pass after their answers looks at each
/// once and queues it again for when it may be idle; passes before then look at none; once they
/// are idle, every slice goes back. (A scan of the whole table each pass cost a process of 80,000
/// busy keys 28 s of CPU, issue 44.)
#[test]
fn the_idle_give_backs_look_only_at_the_keys_due() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024, None);
    let mut limiter = fleet(bucket(100.0, 1.0), 10_000.0, &mut clock);
    let mut stores: Vec<Store> = (0..800).map(|_| Store::default()).collect();
    for (k, store) in stores.iter_mut().enumerate() {
        let key = format!("k{k}");
        for _ in 0..2 {
            match consume(&mut limiter, &mut clock, &key, 1, ShareMode::Reserved) {
                SharedDecision::NeedsSlice => {
                    let index = at(&limiter, &key);
                    let request = limiter.slice_request(index, 1, 1, 0.0).unwrap();
                    let answer = store.take(0, 10_000.0, &request, 0.0);
                    assert!(limiter.credit_slice(index, 0.0, answer, 0.0).0);
                    consume(&mut limiter, &mut clock, &key, 1, ShareMode::AfterStore);
                }
                SharedDecision::Decided { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let book = limiter.slices.as_ref().unwrap();
    let queued = book.terms.due.len();
    assert!(queued >= 800, "{queued} keys queued");
    // 100 ms on: none idle yet (idleMs 5,000); each looked at once, queued again for later.
    assert!(limiter
        .slice_give_backs(5_000.0, usize::MAX, 100.0)
        .is_empty());
    let book = limiter.slices.as_ref().unwrap();
    let Some(&std::cmp::Reverse((next_ms, _))) = book.terms.due.peek() else {
        panic!("nothing queued")
    };
    assert!(next_ms >= 5_000, "next look at {next_ms} ms");
    // Before then, a pass looks at nothing: the queue is as it was.
    let before = book.terms.due.len();
    assert!(limiter
        .slice_give_backs(5_000.0, usize::MAX, 4_000.0)
        .is_empty());
    assert_eq!(limiter.slices.as_ref().unwrap().terms.due.len(), before);
    // Idle: every slice goes back.
    let sent = limiter.slice_give_backs(5_000.0, usize::MAX, 5_100.0);
    assert_eq!(sent.len(), 800);
    assert!(sent.iter().all(|request| request.give > 0.0));
}
