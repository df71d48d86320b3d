//! The side book of a shared limiter: per key, beside its record (a parallel vector, so the
//! records of limiters that share nothing are untouched), what this process holds of the store
//! for the key, whatever it holds (a reservation of quota units, `reservation.rs`, or a slice of
//! the fleet's bucket, `slice.rs`), and the give-backs of keys let go of.
//!
//! One lifecycle for every kind: an entry is *held* with its record; it is *in flight* while a
//! store call for the key is under way; a call that *failed* leaves it not in flight, what the
//! call carried kept for the next one; an idle key's entry is *given back* (its units or tokens
//! go to the store); a *dropped* key's entry leaves with its record, its give-back kept until
//! the JS face sends it. A store answer that leaves the key nothing marks it *short* for a while:
//! its calls not covered are denied here on that answer, with no store call
//! ([`StoreHold::is_short`]).

use std::fmt::Debug;

use crate::keyed::table::Record;

/// What every entry of a side book records of the store, whatever the entry holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoreHold {
    /// A store call for the key is under way.
    pub in_flight: bool,
    /// When the key was last used (idle give-back): the monotonic reading for a reservation,
    /// the limiter's timeline for a slice.
    pub last_used_ms: f64,
    /// The identity of the store record the key's entry was made in, as the store's last answer
    /// said (0: none yet).
    pub record_id: u64,
    /// The store may count something as this process's for the key (a store call reported it):
    /// letting go of the key tells the store, even when nothing goes back.
    pub store_holds: bool,
    /// The key is short until this timeline: the store's last answer left it nothing (no quota
    /// units, or a bucket found empty), so a call its holding does not cover is denied here,
    /// with no store call, on that answer ([`StoreHold::is_short`]).
    pub short_until_ms: f64,
}

impl StoreHold {
    pub(super) fn fresh(now_ms: f64) -> StoreHold {
        StoreHold {
            in_flight: false,
            last_used_ms: now_ms,
            record_id: 0,
            store_holds: false,
            short_until_ms: f64::NEG_INFINITY,
        }
    }

    /// Whether the key is short at `timeline_ms` (a call its holding does not cover is denied
    /// here).
    #[inline(always)]
    pub fn is_short(&self, timeline_ms: f64) -> bool {
        timeline_ms < self.short_until_ms
    }

    /// Marks the key short until `until_ms` (the limiter's timeline).
    pub(super) fn mark_short(&mut self, until_ms: f64) {
        self.short_until_ms = until_ms;
    }

    /// The store's answer left the key something: it is not short.
    pub(super) fn clear_short(&mut self) {
        self.short_until_ms = f64::NEG_INFINITY;
    }
}

/// The give-backs of dropped keys a side book keeps until they are sent.
pub trait Dropped: Default + Debug {
    type GiveBack;
    fn keep(&mut self, give_back: Self::GiveBack);
    fn is_empty(&self) -> bool;
}

/// One key's entry of a side book.
pub trait Entry: Debug {
    /// What a dropped key leaves for the store.
    type Dropped: Dropped;
    /// The book's settings and state beside its entries.
    type Terms: Debug;
    fn hold(&self) -> &StoreHold;
    fn hold_mut(&mut self) -> &mut StoreHold;
    /// Whether the store is yet to hear from this process about the key (units or tokens to give
    /// back, units owed, a spent slice to report): the idle timer is needed.
    fn owes_word(&self, record: &Record) -> bool;
}

/// Per key, beside its record, what this process holds of the store (see the module's text).
#[derive(Debug)]
pub struct SideBook<E: Entry> {
    /// One per record, in the records' order.
    pub(super) entries: Vec<E>,
    /// Give-backs of keys dropped or deleted, for the JS face to send.
    pub(super) dropped: E::Dropped,
    pub(super) terms: E::Terms,
}

impl<E: Entry> SideBook<E> {
    pub(super) fn new(entries: Vec<E>, terms: E::Terms) -> SideBook<E> {
        SideBook {
            entries,
            dropped: E::Dropped::default(),
            terms,
        }
    }

    /// A key's entry (`None`: no such record).
    pub(super) fn get(&self, index: u32) -> Option<&E> {
        self.entries.get(index as usize)
    }

    /// A new record's entry.
    pub(super) fn held(&mut self, index: u32, entry: E) {
        debug_assert_eq!(self.entries.len(), index as usize);
        self.entries.push(entry);
    }

    /// A record removed: its entry leaves as the record leaves the table (swapped with the last),
    /// its give-back kept.
    pub(super) fn dropped(
        &mut self,
        index: u32,
        give_back: Option<<E::Dropped as Dropped>::GiveBack>,
    ) {
        self.entries.swap_remove(index as usize);
        if let Some(give_back) = give_back {
            self.dropped.keep(give_back);
        }
    }

    /// A key's store call is under way.
    pub(super) fn in_flight(&mut self, index: u32) -> &mut E {
        let entry = &mut self.entries[index as usize];
        entry.hold_mut().in_flight = true;
        entry
    }

    /// A key's store call came back, answered or failed: the key is no longer in flight; the
    /// caller credits the answer, or keeps what a failed call carried, in the entry returned
    /// (`None`: no such record).
    pub(super) fn call_ended(&mut self, index: u32) -> Option<&mut E> {
        let entry = self.entries.get_mut(index as usize)?;
        entry.hold_mut().in_flight = false;
        Some(entry)
    }

    /// Every key's short mark cleared (everything was given back).
    pub(super) fn clear_short(&mut self) {
        for entry in &mut self.entries {
            entry.hold_mut().clear_short();
        }
    }

    pub(super) fn has_dropped(&self) -> bool {
        !self.dropped.is_empty()
    }

    /// The give-backs of keys dropped since the last call.
    pub(super) fn take_dropped(&mut self) -> E::Dropped {
        std::mem::take(&mut self.dropped)
    }

    /// Whether give-backs wait or a key owes the store a word ([`Entry::owes_word`]).
    pub(super) fn owes_word(&self, records: &[Record]) -> bool {
        self.has_dropped()
            || self
                .entries
                .iter()
                .zip(records)
                .any(|(entry, record)| entry.owes_word(record))
    }
}
