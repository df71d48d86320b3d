//! `contract()`: the result buffer's layout (`buffer`), the JS names of the error codes'
//! classes (`names`) and the core's lists of the public string unions, for the JS face to read
//! at load (it copies none of them).

use napi_derive::napi;

use super::buffer;
use super::names::class_of;
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

/// Positions in the shared result buffer (a `Float64Array` of `length` numbers).
#[napi(object)]
pub struct BufferPositions {
    pub n_or_status: u32,
    pub allowed: u32,
    pub retry_after_ms: u32,
    pub basis: u32,
    pub tokens: u32,
    pub quota_remaining: u32,
    /// A QuotaClock's registry index, written as a `u32` into the position's first half.
    pub limiter: u32,
    /// A keyed limiter's operation (the same position).
    pub operation: u32,
    pub monotonic_ms: u32,
    pub wall_ms: u32,
    pub elapsed_realtime_ms: u32,
    pub has_elapsed_realtime: u32,
    pub period_slot: u32,
}

/// The values of the `nOrStatus` position after a call.
#[napi(object)]
pub struct BufferStatuses {
    pub decided: f64,
    pub decided_with_anomalies: f64,
    pub error: f64,
    pub needs_reader: f64,
    pub needs_readings: f64,
    pub needs_policy: f64,
    /// A shared consume its reservation does not cover: nothing consumed; `retryAfterMs` holds
    /// the units it lacks.
    pub needs_store: f64,
    /// A shared consume decided, with work for the share driver (a refill, give-backs).
    pub decided_with_work: f64,
    /// A shared consume its key's cells do not cover (`share.bucket`): nothing consumed; the
    /// JS face acquires cells (`keyedCellsRequest`).
    pub needs_slice: f64,
}

#[napi(object)]
pub struct BufferOperations {
    pub consume: f64,
    pub refund: f64,
    pub shared_consume: f64,
    pub shared_after_store: f64,
    pub shared_fail_open: f64,
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

/// Where `stats()` leaves a limiter's counters in its result buffer.
#[napi(object)]
pub struct StatsLayout {
    pub allowed: u32,
    pub denied: u32,
    pub keys: u32,
    pub evicted: u32,
    pub key_limit_refusals: u32,
    /// The first anomaly kind's count; the kinds follow in `anomalyKinds` order.
    pub anomalies: u32,
}

/// The fleet bucket's store terms (lib/share/protocol.js keeps copies, checked against these).
#[napi(object)]
pub struct FleetBucketTerms {
    /// A slice is written off `writeOffFactor * leaseMs + writeOffMarginMs` fleet ms after its call.
    pub write_off_factor: f64,
    pub write_off_margin_ms: f64,
    /// A record is kept `max(C / R s, the longest write-off) + keptAfterMs` after a take.
    pub kept_after_ms: f64,
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
    let position = |at: usize| at as u32;
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
            length: position(buffer::LENGTH),
            positions: BufferPositions {
                n_or_status: position(buffer::N_OR_STATUS),
                allowed: position(buffer::ALLOWED),
                retry_after_ms: position(buffer::RETRY_AFTER_MS),
                basis: position(buffer::BASIS),
                tokens: position(buffer::TOKENS),
                quota_remaining: position(buffer::QUOTA_REMAINING),
                limiter: position(buffer::LIMITER),
                operation: position(buffer::OPERATION),
                monotonic_ms: position(buffer::MONOTONIC_MS),
                wall_ms: position(buffer::WALL_MS),
                elapsed_realtime_ms: position(buffer::ELAPSED_REALTIME_MS),
                has_elapsed_realtime: position(buffer::HAS_ELAPSED_REALTIME),
                period_slot: position(buffer::PERIOD_SLOT),
            },
            status: BufferStatuses {
                decided: buffer::STATUS_DECIDED,
                decided_with_anomalies: buffer::STATUS_DECIDED_WITH_ANOMALIES,
                error: buffer::STATUS_ERROR,
                needs_reader: buffer::STATUS_NEEDS_READER,
                needs_readings: buffer::STATUS_NEEDS_READINGS,
                needs_policy: buffer::STATUS_NEEDS_POLICY,
                needs_store: buffer::STATUS_NEEDS_STORE,
                decided_with_work: buffer::STATUS_DECIDED_WITH_WORK,
                needs_slice: buffer::STATUS_NEEDS_SLICE,
            },
            operation: BufferOperations {
                consume: buffer::OPERATION_CONSUME,
                refund: buffer::OPERATION_REFUND,
                shared_consume: buffer::OPERATION_SHARED_CONSUME,
                shared_after_store: buffer::OPERATION_SHARED_AFTER_STORE,
                shared_fail_open: buffer::OPERATION_SHARED_FAIL_OPEN,
            },
            basis_none: buffer::BASIS_NONE,
        },
        stats: StatsLayout {
            allowed: position(buffer::stats::ALLOWED),
            denied: position(buffer::stats::DENIED),
            keys: position(buffer::stats::KEYS),
            evicted: position(buffer::stats::EVICTED),
            key_limit_refusals: position(buffer::stats::KEY_LIMIT_REFUSALS),
            anomalies: position(buffer::stats::ANOMALIES),
        },
        fleet_bucket: FleetBucketTerms {
            write_off_factor: WRITE_OFF_FACTOR,
            write_off_margin_ms: WRITE_OFF_MARGIN_MS,
            kept_after_ms: RECORD_KEPT_AFTER_MS,
        },
    }
}
