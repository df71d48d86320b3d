//! The reconciliation's shared state, published lock-free: each open limiter owns a seat of two
//! slots, writes the one not published and swings the header's head to it by CAS.

use super::*;
use crate::clock::SystemClock;
use crate::kernel::CallReading;
use crate::reconciler::Anchors;

/// The reconciler's state, as published.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct ReconState {
    /// The previous readings, the reader's baseline and the regression latch: what the reading
    /// rule reads.
    pub(super) anchors: Anchors,
    pub(super) timeline_ms: f64,
}

impl ReconState {
    pub(super) fn fresh(monotonic_ms: f64, wall_ms: f64, reader: bool) -> ReconState {
        ReconState {
            anchors: Anchors {
                last_monotonic_ms: monotonic_ms,
                last_wall_ms: wall_ms,
                reader_baseline: reader.then(|| ReaderBaseline {
                    elapsed_realtime_ms: clock::elapsed_realtime_ms(),
                    monotonic_ms,
                }),
                regression: None,
            },
            timeline_ms: 0.0,
        }
    }

    pub(super) fn store(&self, slot: &ReconSlot) {
        let Anchors {
            last_monotonic_ms,
            last_wall_ms,
            reader_baseline: baseline,
            regression,
        } = self.anchors;
        let words = [
            last_monotonic_ms.to_bits(),
            last_wall_ms.to_bits(),
            self.timeline_ms.to_bits(),
            u64::from(baseline.is_some()) | u64::from(regression.is_some()) << 1,
            baseline.map_or(0.0, |b| b.elapsed_realtime_ms).to_bits(),
            baseline.map_or(0.0, |b| b.monotonic_ms).to_bits(),
            regression.map_or(0.0, |r| r.0).to_bits(),
            regression.map_or(0.0, |r| r.1).to_bits(),
            0,
            0,
        ];
        for (word, value) in slot.words.iter().zip(words) {
            word.store(value, Ordering::Relaxed);
        }
    }

    pub(super) fn load(slot: &ReconSlot) -> ReconState {
        let word = |i: usize| slot.words[i].load(Ordering::Relaxed);
        let float = |i: usize| f64::from_bits(word(i));
        let flags = word(3);
        ReconState {
            anchors: Anchors {
                last_monotonic_ms: float(0),
                last_wall_ms: float(1),
                reader_baseline: (flags & 1 != 0).then(|| ReaderBaseline {
                    elapsed_realtime_ms: float(4),
                    monotonic_ms: float(5),
                }),
                regression: (flags & 2 != 0).then(|| (float(6), float(7))),
            },
            timeline_ms: float(2),
        }
    }
}

/// Readings reconciled against a published state, not yet published.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    pub(super) head: u64,
    pub(super) next: ReconState,
    /// The readings as the rest of the call uses them (on the timeline of `next`).
    pub(super) reading: CallReading,
    pub(super) refused: bool,
}

impl Zone {
    /// The published state and the head naming it.
    pub(super) fn read_recon(&self) -> (u64, ReconState) {
        let head_word = &self.header().recon_head;
        loop {
            let head = head_word.load(Ordering::Acquire);
            let state = ReconState::load(self.recon_slot(ReconHead(head).index()));
            fence(Ordering::Acquire);
            if head_word.load(Ordering::Relaxed) == head {
                return (head, state);
            }
        }
    }

    /// Publishes `next` over `head` (`false`: another call published first).
    pub(super) fn publish(&self, head: u64, next: &ReconState) -> bool {
        let mine = (self.seat * 2) as u64;
        let index = if ReconHead(head).index() == mine {
            mine + 1
        } else {
            mine
        };
        fence(Ordering::Release);
        next.store(self.recon_slot(index));
        let new_head = ReconHead(head).next(index).0;
        self.header()
            .recon_head
            .compare_exchange(head, new_head, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the two readings and reconciles them against the published state, not publishing
    /// anything but a monotonic regression (which latches the zone).
    pub(super) fn prepare(
        &self,
        check_plausible: bool,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Pending, Error> {
        let rule = self.rule.checking(check_plausible);
        // The zone reads the system's clocks, the host's suspend-inclusive clock as the elapsed-realtime reader.
        let mut clock = SystemClock {
            with_elapsed_realtime: true,
        };
        loop {
            let (head, state) = self.read_recon();
            let reconciled = match rule.read(&state.anchors, &mut clock, anomalies) {
                Ok(reconciled) => reconciled,
                Err(Error::MonotonicRegression {
                    previous_ms,
                    now_ms,
                    latched: false,
                }) => {
                    let mut latched = state;
                    latched.anchors.regression = Some((previous_ms, now_ms));
                    if !self.publish(head, &latched) {
                        continue;
                    }
                    return Err(Error::MonotonicRegression {
                        previous_ms,
                        now_ms,
                        latched: false,
                    });
                }
                Err(error) => return Err(error),
            };
            let timeline_ms = state.timeline_ms + reconciled.deltas.credited_ms;
            return Ok(Pending {
                head,
                next: ReconState {
                    anchors: Anchors {
                        last_monotonic_ms: reconciled.monotonic_ms,
                        last_wall_ms: reconciled.wall_ms,
                        reader_baseline: reconciled.reader_baseline,
                        regression: None,
                    },
                    timeline_ms,
                },
                reading: reconciled.reading(timeline_ms),
                refused: reconciled.refused,
            });
        }
    }

    /// Reconciles and publishes (again on a lost publication); the generation published. A
    /// call adding a key names its group (`room_in`): room is made in it at each try's
    /// reading (its slot returned), and given up when the try loses or is refused.
    pub(super) fn reconcile_with(
        &self,
        check_plausible: bool,
        room_in: Option<usize>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<(Pending, u64, Option<usize>), Error> {
        let first = anomalies.len();
        let give_up = |room: Option<usize>| {
            if let (Some(group), Some(_)) = (room_in, room) {
                self.give_up_key_room(group);
            }
        };
        loop {
            anomalies.truncate(first);
            let prepared = self
                .prepare(check_plausible, anomalies)
                .and_then(|pending| {
                    let room = room_in
                        .map(|group| self.room_for(group, &pending))
                        .transpose()?;
                    Ok((pending, room))
                });
            let (pending, room) = match prepared {
                Ok(prepared) => prepared,
                Err(error) => {
                    // Nothing changes: the readings are not even taken in.
                    anomalies.truncate(first);
                    return Err(error);
                }
            };
            if !self.publish(pending.head, &pending.next) {
                give_up(room);
                continue;
            }
            if pending.refused {
                give_up(room);
                return Err(refused(&pending));
            }
            return Ok((pending, ReconHead(pending.head).generation() + 1, room));
        }
    }
}

pub(super) fn refused(pending: &Pending) -> Error {
    Error::AmbiguousWallJump {
        monotonic_delta_ms: pending.reading.deltas.monotonic_delta_ms,
        wall_delta_ms: pending.reading.deltas.wall_delta_ms,
    }
}
