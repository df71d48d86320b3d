//! A simulation of several processes sharing buckets through a model of the store (its two
//! operations, acquire and renew): whatever the traffic, ticks, partitions and deaths, the fleet
//! never admits more than one bucket.

use std::collections::HashMap;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};

use super::*;

/// One holder's fields in a store record.
#[derive(Clone, Copy, Debug)]
struct Holder {
    cells: u64,
    renewed_at_ms: f64,
    lease_ms: f64,
}

/// The store's record of one key: capacity, free tokens, identity, holders, waiters.
#[derive(Debug, Default)]
struct StoreRecord {
    capacity: u64,
    free_tokens: f64,
    identity: u64,
    holders: HashMap<usize, Holder>,
    waiters: HashMap<usize, f64>,
}

impl StoreRecord {
    fn free(&self) -> u64 {
        self.capacity
            - self
                .holders
                .values()
                .map(|holder| holder.cells)
                .sum::<u64>()
    }

    fn reclaim(&mut self, me: usize, now: f64) {
        self.holders.retain(|&other, holder| {
            other == me || now <= holder.renewed_at_ms + 1.1 * holder.lease_ms + 1_000.0
        });
        self.waiters
            .retain(|other, asked| now <= *asked + LEASE_MS || *other == me);
    }

    fn fair(&self, me: usize) -> (u64, bool) {
        let mut processes: Vec<usize> = self
            .holders
            .iter()
            .filter(|(_, holder)| holder.cells > 0)
            .map(|(&who, _)| who)
            .chain(self.waiters.keys().copied())
            .chain(std::iter::once(me))
            .collect();
        processes.sort_unstable();
        processes.dedup();
        let n = processes.len() as u64;
        let waiting = self.waiters.keys().any(|&who| who != me);
        (self.capacity.div_ceil(n), waiting)
    }

    fn acquire(&mut self, me: usize, request: &CellsRequest, now: f64) -> CellsAnswer {
        if self.capacity == 0 {
            self.capacity = request.capacity;
            self.free_tokens = request.initial;
            self.identity = 1;
        }
        self.reclaim(me, now);
        let lost = request.record_id != 0 && request.record_id != self.identity;
        let mine = if lost {
            0
        } else {
            self.holders.get(&me).map_or(0, |holder| holder.cells)
        };
        if request.held < mine {
            self.holders.get_mut(&me).unwrap().cells = request.held;
        }
        let mine = mine.min(request.held);
        let free = self.free();
        let (fair, waiting) = self.fair(me);
        let take = if waiting {
            free.min(fair.saturating_sub(mine))
        } else {
            free
        };
        let tokens = if free > 0 {
            self.free_tokens * take as f64 / free as f64
        } else {
            0.0
        };
        self.free_tokens -= tokens;
        let held = mine + take;
        self.holders.insert(
            me,
            Holder {
                cells: held,
                renewed_at_ms: now,
                lease_ms: LEASE_MS,
            },
        );
        let others_hold = self
            .holders
            .iter()
            .any(|(&who, h)| who != me && h.cells > 0);
        if others_hold {
            self.waiters.insert(me, now);
        } else {
            self.waiters.remove(&me);
        }
        CellsAnswer {
            granted: take,
            tokens,
            held,
            fair,
            waiting: waiting as u64 > 0,
            record_id: self.identity,
            store_now_ms: now,
        }
    }

    fn renew(&mut self, me: usize, renewal: &CellsRenewal, now: f64) -> RenewAnswer {
        if self.capacity == 0 || (renewal.record_id != 0 && renewal.record_id != self.identity) {
            return RenewAnswer {
                held: 0,
                waiting: false,
                fair: 0,
            };
        }
        self.reclaim(me, now);
        let mine = self.holders.get(&me).map_or(0, |holder| holder.cells);
        let kept = mine.min(renewal.held);
        let freed = mine - kept;
        self.free_tokens += renewal.tokens.min(freed as f64);
        if kept > 0 {
            self.holders.insert(
                me,
                Holder {
                    cells: kept,
                    renewed_at_ms: now,
                    lease_ms: LEASE_MS,
                },
            );
        } else {
            self.holders.remove(&me);
            self.waiters.remove(&me);
        }
        self.free_tokens = self.free_tokens.min(self.free() as f64);
        let (fair, waiting) = self.fair(me);
        RenewAnswer {
            held: kept,
            waiting,
            fair,
        }
    }
}

#[derive(Clone, Debug)]
enum Event {
    /// Real time passes.
    Wait(u32),
    /// A process consumes `n` of key `key`; an acquire it makes takes `latency` ms to reach the
    /// store and as long to come back.
    Consume {
        process: usize,
        key: u8,
        n: u64,
        latency: u32,
    },
    /// A process's ticks stop reaching the store (a partition) until it is healed.
    Partition(usize),
    Heal(usize),
    /// A process dies (never heard of again).
    Die(usize),
    /// A process deletes a key (its cells go back at the next tick, unless it comes back first).
    Delete(usize, u8),
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        60 => (1u32..400).prop_map(Event::Wait),
        100 => (0usize..3, 0u8..2, 1u64..4, 0u32..80).prop_map(|(process, key, n, latency)| Event::Consume { process, key, n, latency }),
        3 => (0usize..3).prop_map(Event::Partition),
        8 => (0usize..3).prop_map(Event::Heal),
        // (Process 0 lives on.)
        1 => (1usize..3).prop_map(Event::Die),
        3 => (0usize..3, 0u8..2).prop_map(|(process, key)| Event::Delete(process, key)),
    ]
}

struct Process {
    limiter: KeyedLimiter,
    clock: ManualClock,
    /// Its clock's rate against real time.
    rate: f64,
    partitioned: bool,
    dead: bool,
    next_tick_ms: f64,
}

const C: u64 = 8;
const R: f64 = 4.0;

struct Fleet {
    real_ms: f64,
    processes: Vec<Process>,
    store: HashMap<u8, StoreRecord>,
    /// (real ms, units) of every admission, per key.
    admitted: HashMap<u8, Vec<(f64, u64)>>,
}

impl Fleet {
    fn new() -> Fleet {
        let processes = (0..3)
            .map(|i| {
                let mut clock = ManualClock::new(1_000.0 * i as f64, JAN_15_2024, None);
                let limiter = fleet(bucket(C as f64, R, None), &mut clock);
                Process {
                    limiter,
                    clock,
                    rate: 1.0 + (i as f64 - 1.0) * 0.0004,
                    partitioned: false,
                    dead: false,
                    next_tick_ms: LEASE_MS / 8.0,
                }
            })
            .collect();
        Fleet {
            real_ms: 0.0,
            processes,
            store: HashMap::new(),
            admitted: HashMap::new(),
        }
    }

    fn advance(&mut self, ms: f64) {
        self.real_ms += ms;
        for process in &mut self.processes {
            process.clock.advance(ms * process.rate);
        }
        for p in 0..self.processes.len() {
            while !self.processes[p].dead && self.processes[p].next_tick_ms <= self.real_ms {
                self.processes[p].next_tick_ms += LEASE_MS / 8.0;
                self.tick(p, false);
            }
        }
    }

    fn tick(&mut self, p: usize, urgent_only: bool) {
        let process = &mut self.processes[p];
        let sent = process
            .limiter
            .cells_tick(idle_ms(), urgent_only, process.clock.monotonic_ms);
        let mut due = false;
        for renewal in sent {
            let process = &mut self.processes[p];
            let index = process.limiter.find(renewal.key.key());
            if process.partitioned {
                if let Some(index) = index {
                    process.limiter.cells_failed(index);
                }
                continue;
            }
            let key = key_of(&renewal.key);
            let answer = self
                .store
                .entry(key)
                .or_default()
                .renew(p, &renewal, self.real_ms);
            let process = &mut self.processes[p];
            if let Some(index) = index {
                let monotonic_ms = process.clock.monotonic_ms;
                due |= process
                    .limiter
                    .cells_renewed(index, renewal.sent_ms, answer, self.real_ms, monotonic_ms)
                    .0;
            }
        }
        if due && !urgent_only {
            self.tick(p, true);
        }
    }

    fn consume(&mut self, p: usize, key: u8, n: u64, latency_ms: f64) {
        if self.processes[p].dead {
            return;
        }
        let text = format!("k{key}");
        let mut mode = ShareMode::Reserved;
        loop {
            let process = &mut self.processes[p];
            match consume(&mut process.limiter, &mut process.clock, &text, n, mode) {
                SharedDecision::Decided { decision, .. } => {
                    if decision.allowed {
                        self.admitted
                            .entry(key)
                            .or_default()
                            .push((self.real_ms, n));
                    }
                    return;
                }
                SharedDecision::NeedsCells if mode == ShareMode::Reserved => {
                    let index = at(&process.limiter, &text);
                    let monotonic_ms = process.clock.monotonic_ms;
                    let request = process.limiter.cells_request(index, monotonic_ms).unwrap();
                    if process.partitioned {
                        process.limiter.cells_failed(index);
                        return;
                    }
                    // (Ticks go on meanwhile; the key in flight is left alone.)
                    self.advance(latency_ms);
                    let answer =
                        self.store
                            .entry(key)
                            .or_default()
                            .acquire(p, &request, self.real_ms);
                    self.advance(latency_ms);
                    let process = &mut self.processes[p];
                    let index = at(&process.limiter, &text);
                    let monotonic_ms = process.clock.monotonic_ms;
                    process
                        .limiter
                        .credit_cells(index, request.sent_ms, answer, monotonic_ms);
                    mode = ShareMode::AfterStore;
                }
                other => panic!("{other:?} in mode {mode:?}"),
            }
        }
    }

    /// Σ held + free = C in the store; a process never holds (usably) more cells than the store
    /// counts for it; tokens never exceed cells.
    fn check_cells(&mut self) -> Result<(), TestCaseError> {
        for (key, record) in &self.store {
            let held: u64 = record.holders.values().map(|holder| holder.cells).sum();
            prop_assert!(held <= record.capacity);
            prop_assert!(record.free_tokens <= record.free() as f64 + 1e-9);
            for (p, process) in self.processes.iter_mut().enumerate() {
                let text = format!("k{key}");
                let Some(index) = process.limiter.find(KeyBuf::from_text(&text).key()) else {
                    continue;
                };
                if process.dead {
                    continue;
                }
                let timeline = process.limiter.timeline_at(process.clock.monotonic_ms);
                process.limiter.look_at_cells(index, timeline);
                let cell = *process.limiter.cell(index).unwrap();
                let tokens = process.limiter.table.records[index as usize].tokens;
                prop_assert!(tokens <= cell.cells as f64 + 1e-9);
                let counted = record.holders.get(&p).map_or(0, |holder| holder.cells);
                prop_assert!(
                    cell.cells <= counted,
                    "process {p} holds {} cells of k{key}, the store counts {counted}",
                    cell.cells
                );
            }
        }
        Ok(())
    }

    /// Over every window of real time, what all admitted for a key is at most `C + R·Δ·1.001`.
    fn check_windows(&self) -> Result<(), TestCaseError> {
        for (key, log) in &self.admitted {
            for (i, &(start, _)) in log.iter().enumerate() {
                let mut units = 0;
                for &(end, n) in &log[i..] {
                    units += n;
                    let bound = C as f64 + R * (end - start) / 1000.0 * 1.001;
                    prop_assert!(
                        units as f64 <= bound + 1e-9,
                        "k{key}: {units} units in [{start}, {end}] ms, more than {bound}"
                    );
                }
            }
        }
        Ok(())
    }
}

fn idle_ms() -> f64 {
    5_000.0
}

fn key_of(key: &KeyBuf) -> u8 {
    let text = String::from_utf16(&key.key().to_utf16()).unwrap();
    text[1..].parse().unwrap()
}

proptest! {
    #![proptest_config(Config {
        cases: 96,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    })]

    /// Three processes on clocks of slightly different rates share two keys' buckets through
    /// the model store: random traffic, ticks, partitions (leases lapse), deaths.
    #[test]
    fn a_fleet_never_admits_more_than_one_bucket(events in proptest::collection::vec(event(), 1..400)) {
        let mut fleet = Fleet::new();
        for event in events {
            match event {
                Event::Wait(ms) => fleet.advance(ms as f64),
                Event::Consume { process, key, n, latency } => fleet.consume(process, key, n, latency as f64),
                Event::Partition(p) => fleet.processes[p].partitioned = true,
                Event::Heal(p) => fleet.processes[p].partitioned = false,
                Event::Die(p) => fleet.processes[p].dead = true,
                Event::Delete(p, key) => {
                    fleet.processes[p].limiter.delete(KeyBuf::from_text(&format!("k{key}")).key());
                }
            }
            fleet.check_cells()?;
        }
        fleet.check_windows()?;
    }
}
