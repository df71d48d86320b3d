//! A shared limiter's book-keeping calls (`share`): what a store call asks, its answer, the
//! give-backs. The store calls themselves are the JS face's; none of these is on the hot path.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::entry::NativeKeyed;
use crate::args::units;
use crate::keyed::{GiveBack, ReserveRequest};

/// A store call's arguments (the store protocol's `reserve`, less the name).
#[napi(object)]
pub struct ReserveRequestOutput {
    /// Identifies the period in `keyedShareCredit` / `keyedShareFailed`.
    pub period_slot: i32,
    pub period_id: String,
    pub period_end_ms: f64,
    pub limit: f64,
    pub lease_units: f64,
    pub lacking: f64,
    pub charge: f64,
    /// Units the key holds unadmitted as the call is made.
    pub held: f64,
    /// Units reserved in the period and not given back, less `charge`.
    pub owned: f64,
    /// The identity of the record the key reserved in (0: none yet).
    pub record_id: f64,
}

/// Units a key gives back to the store for one period, and failOpen units still to charge;
/// `key` as UTF-16 code units.
#[napi(object)]
pub struct GiveBackOutput {
    pub key: Uint16Array,
    pub period_id: String,
    pub period_end_ms: f64,
    pub units: f64,
    pub charge: f64,
    /// The identity of the record the units were reserved in (0: none known).
    pub record_id: f64,
}

/// What the share driver has to do after a decided consume of `key`.
#[napi(object)]
pub struct ShareWorkOutput {
    /// A background refill of the key's reservation.
    pub refill: Option<ReserveRequestOutput>,
    /// Give-backs of keys dropped or deleted.
    pub give_backs: Vec<GiveBackOutput>,
}

fn request_output(request: ReserveRequest) -> ReserveRequestOutput {
    ReserveRequestOutput {
        period_slot: request.period_slot,
        period_id: request.period_id,
        period_end_ms: request.period_end_ms,
        limit: request.limit as f64,
        lease_units: request.lease_units as f64,
        lacking: request.lacking as f64,
        charge: request.charge as f64,
        held: request.held as f64,
        owned: request.owned as f64,
        record_id: request.record_id as f64,
    }
}

fn give_back_outputs(give_backs: Vec<GiveBack>) -> Vec<GiveBackOutput> {
    give_backs
        .into_iter()
        .map(|give_back| GiveBackOutput {
            key: Uint16Array::new(give_back.key.key().to_utf16()),
            period_id: give_back.period_id,
            period_end_ms: give_back.period_end_ms,
            units: give_back.units as f64,
            charge: give_back.charge as f64,
            record_id: give_back.record_id as f64,
        })
        .collect()
}

/// The store call a held key needs, reserving at least `lacking` units (0: a background
/// refill), or what the `demand` units of the calls waiting for the key lack together; `null`
/// for a key not held, without a quota, or before its period opened.
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
        Ok(request.map(request_output))
    })
}

/// After a decided shared consume of `key`: its background refill (if the decision asked for
/// one; for what the `demand` units of calls waiting for the key lack, if any) and the
/// give-backs of dropped keys.
#[napi(js_name = "keyedShareWork")]
pub fn keyed_share_work(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    demand: f64,
) -> napi::Result<ShareWorkOutput> {
    limiter.state.with_key(env, &key, |state, key| {
        let demand = units(demand, "demand")?;
        let refill = match (
            std::mem::take(&mut state.refill_wanted),
            state.limiter.find(key),
        ) {
            (true, Some(index)) => state.limiter.reserve_request(index, 0, demand),
            _ => None,
        };
        Ok(ShareWorkOutput {
            refill: refill.map(request_output),
            give_backs: give_back_outputs(state.limiter.take_dropped_give_backs()),
        })
    })
}

/// A store answer for `key`'s call made for `periodSlot`, from the record of identity `recordId`
/// (0: none named): true if the units were credited to its reservation; false if they are not
/// the key's (it was dropped, or its period moved on) and must go back to the store.
#[napi(js_name = "keyedShareCredit")]
pub fn keyed_share_credit(
    env: &Env,
    limiter: &External<NativeKeyed>,
    key: Unknown<'_>,
    period_slot: i32,
    granted: f64,
    unreserved: f64,
    record_id: f64,
) -> napi::Result<bool> {
    limiter.state.with_key(env, &key, |state, key| {
        let granted = units(granted, "granted")?;
        let unreserved = units(unreserved, "unreserved")?;
        let record_id = units(record_id, "recordId")?;
        Ok(state.limiter.find(key).is_some_and(|index| {
            let limiter = &mut state.limiter;
            limiter.credit_reservation(index, period_slot, granted, unreserved, record_id)
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

/// The give-backs of keys idle for `idleMs` on the limiter's monotonic clock (every key with
/// `idleMs` 0), and of keys dropped. `monotonicMs`: a JS clock's reading (native clocks are read
/// here).
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
