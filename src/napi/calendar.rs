//! `periodFor(spec, wallMs)` and the period objects the JS face sees.

use napi::Env;
use napi_derive::napi;

use super::errors::{guard, CodedResult};
use super::object::objects;
use crate::args;
use crate::calendar::{Period, PeriodSpec, RawPeriodSpec};

#[napi(object)]
pub struct PeriodSpecInput {
    pub unit: String,
    pub time_zone: String,
    pub anchor_day: Option<f64>,
    pub anchor_month: Option<f64>,
    pub anchor_time: Option<String>,
}

objects! {
    #[doc = "A period of a spec in its zone (chrono-tz's spelling)."]
    PeriodOutput from (Period, &str) as (period, time_zone) {
        id: String = period.id,
        start_ms: f64 = period.start_ms,
        end_ms: f64 = period.end_ms,
        start_kind: String = period.start_kind.as_str().to_owned(),
        time_zone: String = time_zone.to_owned(),
    }
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
    Ok(PeriodSpec::parse(&raw_spec(input), option_path)?)
}

/// The period of `spec` that holds `wall_ms`, a wall reading within the calendar's range.
pub(crate) fn spec_period(spec: &PeriodSpec, wall_ms: f64) -> CodedResult<PeriodOutput> {
    let period = spec.period_for(args::wall_ms(wall_ms)?);
    Ok(PeriodOutput::from((period, spec.time_zone_name())))
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
        spec_period(&parse_spec(&spec, &option_path)?, wall_ms)
    })
}
