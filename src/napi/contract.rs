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

/// `#[napi(object)]` structs of the layout's numbers, each field with its value (a position
/// as `at(...)`): a name is written once, where it gets its value. (Docs as `#[doc = "..."]`:
/// napi-rs copies a `///` line into the generated types with its raw-string quote.)
macro_rules! numbers {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty { $($field:ident = $value:expr,)+ })+) => {$(
        $(#[doc = $doc])*
        #[napi(object)]
        pub struct $name {
            $(pub $field: $ty,)+
        }

        impl $name {
            fn new() -> $name {
                $name { $($field: $value,)+ }
            }
        }
    )+};
}

fn at(position: usize) -> u32 {
    position as u32
}

numbers! {
    #[doc = "Positions in the result buffer, a `Float64Array` of `length` numbers (see `buffer`)."]
    BufferPositions: u32 {
        n_or_status = at(buffer::N_OR_STATUS),
        allowed = at(buffer::ALLOWED),
        retry_after_ms = at(buffer::RETRY_AFTER_MS),
        basis = at(buffer::BASIS),
        tokens = at(buffer::TOKENS),
        quota_remaining = at(buffer::QUOTA_REMAINING),
        limiter = at(buffer::LIMITER),
        operation = at(buffer::OPERATION),
        monotonic_ms = at(buffer::MONOTONIC_MS),
        wall_ms = at(buffer::WALL_MS),
        elapsed_realtime_ms = at(buffer::ELAPSED_REALTIME_MS),
        has_elapsed_realtime = at(buffer::HAS_ELAPSED_REALTIME),
        period_slot = at(buffer::PERIOD_SLOT),
    }

    #[doc = "The values of the `nOrStatus` position after a call."]
    BufferStatuses: f64 {
        decided = buffer::STATUS_DECIDED,
        decided_with_anomalies = buffer::STATUS_DECIDED_WITH_ANOMALIES,
        error = buffer::STATUS_ERROR,
        needs_reader = buffer::STATUS_NEEDS_READER,
        needs_readings = buffer::STATUS_NEEDS_READINGS,
        needs_policy = buffer::STATUS_NEEDS_POLICY,
        needs_store = buffer::STATUS_NEEDS_STORE,
        decided_with_work = buffer::STATUS_DECIDED_WITH_WORK,
        needs_slice = buffer::STATUS_NEEDS_SLICE,
    }

    #[doc = "The values of the `operation` position."]
    BufferOperations: f64 {
        consume = buffer::OPERATION_CONSUME,
        refund = buffer::OPERATION_REFUND,
        shared_consume = buffer::OPERATION_SHARED_CONSUME,
        shared_after_store = buffer::OPERATION_SHARED_AFTER_STORE,
        shared_fail_open = buffer::OPERATION_SHARED_FAIL_OPEN,
    }

    #[doc = "Where `stats()` writes a limiter's counters (`anomalies`: the first kind's)."]
    StatsLayout: u32 {
        allowed = at(buffer::stats::ALLOWED),
        denied = at(buffer::stats::DENIED),
        keys = at(buffer::stats::KEYS),
        evicted = at(buffer::stats::EVICTED),
        key_limit_refusals = at(buffer::stats::KEY_LIMIT_REFUSALS),
        anomalies = at(buffer::stats::ANOMALIES),
    }

    #[doc = "The fleet bucket's store terms (`lib/share/protocol.js` checks its copies)."]
    FleetBucketTerms: f64 {
        write_off_factor = WRITE_OFF_FACTOR,
        write_off_margin_ms = WRITE_OFF_MARGIN_MS,
        kept_after_ms = RECORD_KEPT_AFTER_MS,
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
            positions: BufferPositions::new(),
            status: BufferStatuses::new(),
            operation: BufferOperations::new(),
            basis_none: buffer::BASIS_NONE,
        },
        stats: StatsLayout::new(),
        fleet_bucket: FleetBucketTerms::new(),
    }
}
