//! `contract()`: the buffer's layout, the error codes' classes and the core's string unions, read
//! by the JS face at load (it copies none of them).

use napi_derive::napi;

use super::buffer;
use super::names::class_of;
use super::object::objects;
use crate::anomaly::AnomalyKind;
use crate::calendar::{PeriodUnit, StartKind, MAX_WALL_MS};
use crate::clock::SuspendPolicy;
use crate::error::ErrorCode;
use crate::keyed::{RECORD_KEPT_AFTER_MS, SHARE_REFILL_MS, WRITE_OFF_FACTOR, WRITE_OFF_MARGIN_MS};
use crate::limiter::RetryBasis;

fn at(position: usize) -> u32 {
    position as u32
}

objects! {
    #[doc = "Positions in the result buffer, a `Float64Array` of `length` numbers (see `buffer`)."]
    BufferPositions from () as _ {
        n_or_status: u32 = at(buffer::N_OR_STATUS),
        allowed: u32 = at(buffer::ALLOWED),
        retry_after_ms: u32 = at(buffer::RETRY_AFTER_MS),
        basis: u32 = at(buffer::BASIS),
        tokens: u32 = at(buffer::TOKENS),
        quota_remaining: u32 = at(buffer::QUOTA_REMAINING),
        limiter: u32 = at(buffer::LIMITER),
        operation: u32 = at(buffer::OPERATION),
        monotonic_ms: u32 = at(buffer::MONOTONIC_MS),
        wall_ms: u32 = at(buffer::WALL_MS),
        elapsed_realtime_ms: u32 = at(buffer::ELAPSED_REALTIME_MS),
        has_elapsed_realtime: u32 = at(buffer::HAS_ELAPSED_REALTIME),
        period_slot: u32 = at(buffer::PERIOD_SLOT),
    }

    #[doc = "The values of the `nOrStatus` position after a call."]
    BufferStatuses from () as _ {
        decided: f64 = buffer::STATUS_DECIDED,
        decided_with_anomalies: f64 = buffer::STATUS_DECIDED_WITH_ANOMALIES,
        error: f64 = buffer::STATUS_ERROR,
        needs_reader: f64 = buffer::STATUS_NEEDS_READER,
        needs_readings: f64 = buffer::STATUS_NEEDS_READINGS,
        needs_policy: f64 = buffer::STATUS_NEEDS_POLICY,
        needs_store: f64 = buffer::STATUS_NEEDS_STORE,
        decided_with_work: f64 = buffer::STATUS_DECIDED_WITH_WORK,
        needs_slice: f64 = buffer::STATUS_NEEDS_SLICE,
    }

    #[doc = "The values of the `operation` position."]
    BufferOperations from () as _ {
        consume: f64 = buffer::OPERATION_CONSUME,
        refund: f64 = buffer::OPERATION_REFUND,
        shared_consume: f64 = buffer::OPERATION_SHARED_CONSUME,
        shared_after_store: f64 = buffer::OPERATION_SHARED_AFTER_STORE,
        shared_fail_open: f64 = buffer::OPERATION_SHARED_FAIL_OPEN,
    }

    #[doc = "Where `stats()` writes a limiter's counters (`anomalies`: the first kind's)."]
    StatsLayout from () as _ {
        allowed: u32 = at(buffer::stats::ALLOWED),
        denied: u32 = at(buffer::stats::DENIED),
        keys: u32 = at(buffer::stats::KEYS),
        evicted: u32 = at(buffer::stats::EVICTED),
        key_limit_refusals: u32 = at(buffer::stats::KEY_LIMIT_REFUSALS),
        anomalies: u32 = at(buffer::stats::ANOMALIES),
    }

    #[doc = "The fleet bucket's store terms, which `lib/share/protocol.js` reads (the Lua script and the MongoDB pipeline take them from there)."]
    FleetBucketTerms from () as _ {
        write_off_factor: f64 = WRITE_OFF_FACTOR,
        write_off_margin_ms: f64 = WRITE_OFF_MARGIN_MS,
        record_kept_after_ms: f64 = RECORD_KEPT_AFTER_MS,
        share_refill_ms: f64 = SHARE_REFILL_MS,
    }
}

objects! {
    ErrorCodeEntry from &ErrorCode as code {
        code: String = code.as_str().to_owned(),
        #[doc = "'QuotaClockError' | 'RangeError' | 'TypeError' | 'Error': its class in JS."]
        class: String = class_of(*code).to_owned(),
    }

    BasisEntry from &RetryBasis as basis {
        name: String = basis.as_str().to_owned(),
        #[doc = "The value in the result buffer's `basis` position."]
        code: f64 = buffer::basis_code(Some(*basis)),
    }

    ResultBufferLayout from () as _ {
        length: u32 = at(buffer::LENGTH),
        positions: BufferPositions = BufferPositions::from(()),
        status: BufferStatuses = BufferStatuses::from(()),
        operation: BufferOperations = BufferOperations::from(()),
        #[doc = "The `basis` value of a decision whose retryAfterBasis is null."]
        basis_none: f64 = buffer::BASIS_NONE,
    }

    #[doc = "The JS↔native contract (see the module doc); a fresh object per call."]
    Contract from () as _ {
        error_codes: Vec<ErrorCodeEntry> = ErrorCode::ALL.iter().map(Into::into).collect(),
        #[doc = "Every basis a decision can have: the core's, then `'block'` (the JS face's)."]
        retry_after_basis: Vec<BasisEntry> = basis_entries(),
        anomaly_kinds: Vec<String> = names(&AnomalyKind::ALL, AnomalyKind::as_str),
        suspend_policies: Vec<String> = names(&SuspendPolicy::ALL, SuspendPolicy::as_str),
        period_units: Vec<String> = names(&PeriodUnit::ALL, PeriodUnit::as_str),
        start_kinds: Vec<String> = names(&StartKind::ALL, StartKind::as_str),
        max_wall_ms: f64 = MAX_WALL_MS,
        result_buffer: ResultBufferLayout = ResultBufferLayout::from(()),
        stats: StatsLayout = StatsLayout::from(()),
        fleet_bucket: FleetBucketTerms = FleetBucketTerms::from(()),
    }
}

/// The core's bases, then a block's (decided by the JS face, lib/keyed/blocks.js).
fn basis_entries() -> Vec<BasisEntry> {
    let mut entries: Vec<BasisEntry> = RetryBasis::ALL.iter().map(Into::into).collect();
    entries.push(BasisEntry {
        name: "block".to_owned(),
        code: buffer::BASIS_BLOCK,
    });
    entries
}

fn names<T: Copy>(items: &[T], name: impl Fn(T) -> &'static str) -> Vec<String> {
    items.iter().map(|&item| name(item).to_owned()).collect()
}

/// The JS↔native contract: read once by the JS face at load.
#[napi(js_name = "contract")]
pub fn contract() -> Contract {
    Contract::from(())
}
