//! A shared limiter's reservation calls (`share`; the store calls are the JS face's).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::entry::NativeKeyed;
use crate::args::units;
use crate::keyed::{GiveBack, ReserveAnswer, ReserveRequest};
use crate::napi::object::objects;

objects! {
    #[doc = "A store call's arguments (the store protocol's `reserve`, less the name)."]
    ReserveRequestOutput from ReserveRequest as request {
        #[doc = "Identifies the period in `keyedShareCredit` / `keyedShareFailed`."]
        period_slot: i32 = request.period_slot,
        period_id: String = request.period_id,
        period_end_ms: f64 = request.period_end_ms,
        limit: f64 = request.limit as f64,
        lease_units: f64 = request.lease_units as f64,
        lacking: f64 = request.lacking as f64,
        charge: f64 = request.charge as f64,
        #[doc = "Units the key holds unadmitted as the call is made."]
        held: f64 = request.held as f64,
        #[doc = "Units reserved in the period and not given back, less `charge`."]
        owned: f64 = request.owned as f64,
        #[doc = "The identity of the record the key reserved in (0: none yet)."]
        record_id: f64 = request.record_id as f64,
    }

    #[doc = "Units a key gives back to the store for one period, and failOpen units still to"]
    #[doc = "charge; `key` as UTF-16 code units."]
    GiveBackOutput from GiveBack as give_back {
        key: Uint16Array = Uint16Array::new(give_back.key.key().to_utf16()),
        period_id: String = give_back.period_id,
        period_end_ms: f64 = give_back.period_end_ms,
        units: f64 = give_back.units as f64,
        charge: f64 = give_back.charge as f64,
        #[doc = "The identity of the record the units were reserved in (0: none known)."]
        record_id: f64 = give_back.record_id as f64,
    }
}

/// What the share driver has to do after a decided consume of `key`.
#[napi(object)]
pub struct ShareWorkOutput {
    /// A background refill of the key's reservation.
    pub refill: Option<ReserveRequestOutput>,
    /// Give-backs of keys dropped or deleted.
    pub give_backs: Vec<GiveBackOutput>,
}

fn give_back_outputs(give_backs: Vec<GiveBack>) -> Vec<GiveBackOutput> {
    give_backs.into_iter().map(GiveBackOutput::from).collect()
}

/// The store call a held key needs (`lacking`: at least; 0, a refill; `demand`: what waiting
/// calls need); `null` for a key not held, without a quota, or before its period opened.
#[napi(js_name = "keyedShareRequest")]
pub fn keyed_share_request(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    lacking: f64,
    demand: f64,
) -> napi::Result<Option<ReserveRequestOutput>> {
    limiter.state.with_key(env, &key, |state, key| {
        let (lacking, demand) = (units(lacking, "lacking")?, units(demand, "demand")?);
        let index = state.limiter.find(key);
        let request = index.and_then(|index| state.limiter.reserve_request(index, lacking, demand));
        Ok(request.map(ReserveRequestOutput::from))
    })
}

/// After a decided shared consume: `key`'s refill (if asked for) and dropped keys' give-backs.
#[napi(js_name = "keyedShareWork")]
pub fn keyed_share_work(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    demand: f64,
) -> napi::Result<ShareWorkOutput> {
    limiter.state.with_key(env, &key, |state, key| {
        let demand = units(demand, "demand")?;
        let wanted = std::mem::take(&mut state.refill_wanted);
        let refill = match (wanted, state.limiter.find(key)) {
            (true, Some(index)) => state.limiter.reserve_request(index, 0, demand),
            _ => None,
        };
        Ok(ShareWorkOutput {
            refill: refill.map(ReserveRequestOutput::from),
            give_backs: give_back_outputs(state.limiter.take_dropped_give_backs()),
        })
    })
}

/// A store answer for `key`'s call for `periodSlot` that lacked `lacking` units: false if the
/// units are not the key's any more (dropped, or its period moved on) and must go back to the
/// store. `monotonicMs`: a JS clock's reading (a native clock is read here); an answer that
/// leaves the key nothing marks it short from then.
#[napi(js_name = "keyedShareCredit")]
#[allow(clippy::too_many_arguments)]
pub fn keyed_share_credit(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    period_slot: i32,
    lacking: f64,
    granted: f64,
    unreserved: f64,
    record_id: f64,
    monotonic_ms: Option<f64>,
) -> napi::Result<bool> {
    limiter.state.with_key(env, &key, |state, key| {
        let answer = ReserveAnswer {
            lacking: units(lacking, "lacking")?,
            granted: units(granted, "granted")?,
            unreserved: units(unreserved, "unreserved")?,
            record_id: units(record_id, "recordId")?,
        };
        let monotonic_ms = state.monotonic_now(monotonic_ms);
        Ok(state.limiter.find(key).is_some_and(|index| {
            let limiter = &mut state.limiter;
            limiter.credit_reservation(index, period_slot, answer, monotonic_ms)
        }))
    })
}

/// `key`'s store call failed: it may be asked again, and its charge is owed again.
#[napi(js_name = "keyedShareFailed")]
pub fn keyed_share_failed(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    period_slot: i32,
    charge: f64,
) -> napi::Result<()> {
    limiter.state.with_key(env, &key, |state, key| {
        let charge = units(charge, "charge")?;
        if let Some(index) = state.limiter.find(key) {
            state.limiter.reservation_failed(index, period_slot, charge);
        }
        Ok(())
    })
}

/// The give-backs of keys idle for `idleMs` (0: every key) and of keys dropped.
#[napi(js_name = "keyedShareGiveBack")]
pub fn keyed_share_give_back(
    env: &Env,
    limiter: &External<NativeKeyed>,
    idle_ms: f64,
    monotonic_ms: Option<f64>,
) -> napi::Result<Vec<GiveBackOutput>> {
    limiter.state.with(env, |state| {
        let now_ms = state.monotonic_now(monotonic_ms);
        // An unreadable clock gives back nothing idle (NaN compares false), except on close.
        let give_backs = state.limiter.give_back_idle(now_ms, idle_ms);
        Ok(give_back_outputs(give_backs))
    })
}

/// Whether any key holds units it has not admitted (the idle timer is needed).
#[napi(js_name = "keyedShareHolds")]
pub fn keyed_share_holds(env: &Env, limiter: &External<NativeKeyed>) -> napi::Result<bool> {
    limiter
        .state
        .with(env, |state| Ok(state.limiter.holds_reservations()))
}
