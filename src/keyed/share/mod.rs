//! Sharing through a store (`share`): what a process holds of the store per key, beside its
//! record, and the share layer that decides on it.
//!
//! - [`book`]: the side book every kind of holding keeps per key (one lifecycle: held, dropped,
//!   failed, given back, in flight), generic over what is held;
//! - [`reservation`]: a shared quota's units reserved from the store;
//! - [`slice`] and [`slice_call`]: a key's slice of the fleet's bucket (`share.bucket`), and the
//!   store calls that take and renew it;
//! - [`terms`]: what a store call sends, its answer checked, the protocol's constants;
//! - [`layer`]: the share layer around the one decision, over the key's bucket as the keyed
//!   limiter chose it ([`OwnBucket`] or [`FleetSlice`]).

mod book;
mod layer;
mod reservation;
mod slice;
mod slice_call;
mod terms;

use crate::limiter::Decision;
pub(super) use layer::{FleetSlice, OwnBucket, Shared};
pub use reservation::{Reservation, ShareBook};
pub use slice::{Slice, SliceBook};
pub use terms::{
    bucket_kept_ms, hunger_ms, write_off_after_ms, GiveBack, More, ReserveAnswer, ReserveRequest,
    SliceAnswer, SliceRequest, QUOTA_SHORT_MS, RECORD_KEPT_AFTER_MS, SHARE_REFILL_MS,
    WRITE_OFF_FACTOR, WRITE_OFF_MARGIN_MS,
};

/// How a shared consume treats a call its reservation does not cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMode {
    /// Asks for a store call (nothing consumed).
    Reserved,
    /// Right after a store answer: denied with the quota wait when the reservation and the store
    /// together have fewer than `n`, else asks for another store call.
    AfterStore,
    /// The store is unavailable and `failOpen` is on: decided as if the quota had room; the units
    /// beyond the reservation are owed to the store.
    FailOpen,
}

/// A shared consume's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum SharedDecision {
    /// `refill`: the reservation ran low and a background store call should fetch the next one
    /// (the key is marked in flight).
    Decided { decision: Decision, refill: bool },
    /// The reservation does not cover the call: nothing was consumed; a store call must reserve
    /// at least `lacking` more units (the key is marked in flight).
    NeedsStore { lacking: u64 },
    /// A shared bucket's slice here does not cover the call (`share.bucket`): nothing was
    /// consumed; the JS face makes (or joins) a store call that takes a slice.
    NeedsSlice,
}

/// What a shared consume does instead of a decision (nothing taken or counted).
pub(super) enum Step {
    /// The reservation does not cover the call: a store call reserves `lacking` more units.
    Store { lacking: u64 },
    /// The units left here go back to the store before the call asks it again
    /// (`KeyedLimiter::release_then_store`).
    ReleaseThenStore,
    /// The key's slice does not cover the call: a store call takes one (`slices.rs`).
    Slice,
}

#[cfg(test)]
pub(super) mod tests;
