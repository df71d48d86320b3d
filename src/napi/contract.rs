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
use crate::keyed::{RECORD_KEPT_AFTER_MS, WRITE_OFF_FACTOR, WRITE_OFF_MARGIN_MS};
use crate::limiter::RetryBasis;

#[napi(object)]
pub struct ErrorCodeEntry {
    pub code: String,
    /// 'QuotaClockError' | 'RangeError' | 'TypeError' | 'Error': the class the JS face throws it as.
    pub class: String,
}

#[napi(object)]
pub struct BasisEntry {
    pub name: String,
    /// The value in the result buffer's `basis` position.
    pub code: f64,
}

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

    #[doc = "The fleet bucket's store terms (`lib/share/protocol.js` checks its copies)."]
    FleetBucketTerms from () as _ {
        write_off_factor: f64 = WRITE_OFF_FACTOR,
        write_off_margin_ms: f64 = WRITE_OFF_MARGIN_MS,
        kept_after_ms: f64 = RECORD_KEPT_AFTER_MS,
    }
}

#[napi(object)]
pub struct ResultBufferLayout {
    pub length: u32,
    pub positions: BufferPositions,
    pub status: BufferStatuses,
    pub operation: BufferOperations,
    /// The `basis` value of a decision whose retryAfterBasis is null.
    pub basis_none: f64,
}

#[napi(object)]
pub struct Contract {
    pub error_codes: Vec<ErrorCodeEntry>,
    pub retry_after_basis: Vec<BasisEntry>,
    pub anomaly_kinds: Vec<String>,
    pub suspend_policies: Vec<String>,
    pub period_units: Vec<String>,
    pub start_kinds: Vec<String>,
    pub max_wall_ms: f64,
    pub result_buffer: ResultBufferLayout,
    pub stats: StatsLayout,
    pub fleet_bucket: FleetBucketTerms,
}

fn names<T: Copy>(items: &[T], name: impl Fn(T) -> &'static str) -> Vec<String> {
    items.iter().map(|&item| name(item).to_owned()).collect()
}

/// The JS↔native contract: error codes (with the class each is thrown as), the string unions'
/// values, MAX_WALL_MS and the result-buffer layout. A fresh object per call.
#[napi(js_name = "contract")]
pub fn contract() -> Contract {
    Contract {
        error_codes: ErrorCode::ALL
            .iter()
            .map(|&code| ErrorCodeEntry {
                code: code.as_str().to_owned(),
                class: class_of(code).to_owned(),
            })
            .collect(),
        retry_after_basis: RetryBasis::ALL
            .iter()
            .map(|&basis| BasisEntry {
                name: basis.as_str().to_owned(),
                code: buffer::basis_code(Some(basis)),
            })
            .collect(),
        anomaly_kinds: names(&AnomalyKind::ALL, AnomalyKind::as_str),
        suspend_policies: names(&SuspendPolicy::ALL, SuspendPolicy::as_str),
        period_units: names(&PeriodUnit::ALL, PeriodUnit::as_str),
        start_kinds: names(&StartKind::ALL, StartKind::as_str),
        max_wall_ms: MAX_WALL_MS,
        result_buffer: ResultBufferLayout {
            length: at(buffer::LENGTH),
            positions: BufferPositions::from(()),
            status: BufferStatuses::from(()),
            operation: BufferOperations::from(()),
            basis_none: buffer::BASIS_NONE,
        },
        stats: StatsLayout::from(()),
        fleet_bucket: FleetBucketTerms::from(()),
    }
}
