//! TEMPORARY interface stub (UTC days only) until the calendar module lands. Being replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartKind { Exact, Gap, Repeat }
impl StartKind { pub fn as_str(self) -> &'static str { match self { StartKind::Exact => "exact", StartKind::Gap => "gap", StartKind::Repeat => "repeat" } } }
#[derive(Clone, Debug, PartialEq)]
pub struct Period { pub id: String, pub start_ms: f64, pub end_ms: f64, pub start_kind: StartKind, pub slot: i64 }
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecErrorCode { InvalidOption, SubDayPeriod, UnknownTimeZone }
impl SpecErrorCode { pub fn as_str(self) -> &'static str { match self { SpecErrorCode::InvalidOption => "ERR_INVALID_OPTION", SpecErrorCode::SubDayPeriod => "ERR_SUB_DAY_PERIOD", SpecErrorCode::UnknownTimeZone => "ERR_UNKNOWN_TIME_ZONE" } } }
#[derive(Clone, Debug)]
pub struct SpecError { pub code: SpecErrorCode, pub message: String }
pub struct RawPeriodSpec<'a> { pub unit: &'a str, pub time_zone: &'a str, pub anchor_day: Option<f64>, pub anchor_month: Option<f64>, pub anchor_time: Option<&'a str> }
#[derive(Clone, Debug)]
pub struct PeriodSpec { name: String }
impl PeriodSpec {
    pub fn parse(raw: &RawPeriodSpec, _option_path: &str) -> Result<PeriodSpec, SpecError> { Ok(PeriodSpec { name: raw.time_zone.to_owned() }) }
    pub fn time_zone_name(&self) -> &str { &self.name }
    pub fn period_for(&self, wall_ms: f64) -> Period { let k = (wall_ms / 86_400_000.0).floor(); Period { id: format!("{k}"), start_ms: k * 86_400_000.0, end_ms: (k + 1.0) * 86_400_000.0, start_kind: StartKind::Exact, slot: k as i64 } }
    pub fn periods_between(&self, earlier: &Period, later: &Period) -> u64 { (later.slot - earlier.slot - 1).max(0) as u64 }
}
