//! `periodFor(spec, wallMs)` and the period objects the JS face sees.

use napi::Env;
use napi_derive::napi;

use super::errors::{from_core, guard, invalid_arg, CodedResult};
use crate::calendar::{Period, PeriodSpec, RawPeriodSpec, MAX_WALL_MS};
use crate::text::js_number;

#[napi(object)]
pub struct PeriodSpecInput {
    pub unit: String,
    pub time_zone: String,
    pub anchor_day: Option<f64>,
    pub anchor_month: Option<f64>,
    pub anchor_time: Option<String>,
}

#[napi(object)]
pub struct PeriodOutput {
    pub id: String,
    pub start_ms: f64,
    pub end_ms: f64,
    pub start_kind: String,
    pub time_zone: String,
}

/// A period spec's fields as the core parses them.
pub(crate) fn raw_spec(input: &PeriodSpecInput) -> RawPeriodSpec<'_> {
    RawPeriodSpec {
        unit: &input.unit,
        time_zone: &input.time_zone,
        anchor_day: input.anchor_day,
        anchor_month: input.anchor_month,
        anchor_time: input.anchor_time.as_deref(),
    }
}

pub(crate) fn parse_spec(input: &PeriodSpecInput, option_path: &str) -> CodedResult<PeriodSpec> {
    PeriodSpec::parse(&raw_spec(input), option_path).map_err(|error| from_core(&error))
}

pub(crate) fn period_output(spec: &PeriodSpec, period: &Period) -> PeriodOutput {
    PeriodOutput {
        id: period.id.clone(),
        start_ms: period.start_ms,
        end_ms: period.end_ms,
        start_kind: period.start_kind.as_str().to_owned(),
        time_zone: spec.time_zone_name().to_owned(),
    }
}

pub(crate) fn check_wall_ms(wall_ms: f64) -> CodedResult<()> {
    if wall_ms.is_finite() && wall_ms.abs() <= MAX_WALL_MS {
        Ok(())
    } else {
        Err(invalid_arg(format!(
            "wallMs must be a finite number of milliseconds within the range of a JS Date (±8.64e+15); received {}",
            js_number(wall_ms)
        )))
    }
}

/// the period of `spec` containing `wall_ms`. Never calls into JS.
#[napi(js_name = "periodFor")]
pub fn period_for(
    env: &Env,
    spec: PeriodSpecInput,
    wall_ms: f64,
    option_path: String,
) -> napi::Result<PeriodOutput> {
    guard(env, || {
        let parsed = parse_spec(&spec, &option_path)?;
        check_wall_ms(wall_ms)?;
        Ok(period_output(&parsed, &parsed.period_for(wall_ms)))
    })
}
