//! The options every process of a zone must agree on, and the mismatch message.

use super::*;

/// The options' image a zone is checked against.
pub fn options_image(config: &ZoneConfig) -> OptionsImage {
    let defaults = &config.defaults;
    OptionsImage {
        capacity: defaults.capacity.to_bits(),
        refill_per_second: defaults.refill_per_second.to_bits(),
        initial_tokens: defaults.initial_tokens.to_bits(),
        quota_limit: defaults
            .quota
            .as_ref()
            .map_or(NO_LIMIT, |quota| quota.limit),
        quota_spec: defaults
            .quota
            .as_ref()
            .map_or([0; SPEC_IDENTITY_BYTES], |quota| {
                spec_identity_bytes(&quota.spec)
            }),
        suspend_policy: match config.suspend_policy {
            SuspendPolicy::Ignore => 1,
            SuspendPolicy::Credit => 2,
            SuspendPolicy::Refuse => 3,
        },
        earliest_plausible_wall_ms: config
            .earliest_plausible_wall_ms
            .map_or(u64::MAX, f64::to_bits),
        max_keys: config.max_keys,
        reader: u64::from(config.reader),
    }
}

/// The first option that differs between a zone's image and this process's, by its name.
pub fn first_difference(zone: &OptionsImage, mine: &OptionsImage) -> Option<&'static str> {
    let checks = [
        (zone.capacity == mine.capacity, "capacity"),
        (
            zone.refill_per_second == mine.refill_per_second,
            "refillPerSecond",
        ),
        (zone.initial_tokens == mine.initial_tokens, "initialTokens"),
        (
            zone.quota_limit == mine.quota_limit && zone.quota_spec == mine.quota_spec,
            "quota",
        ),
        (zone.suspend_policy == mine.suspend_policy, "suspendPolicy"),
        (
            zone.earliest_plausible_wall_ms == mine.earliest_plausible_wall_ms,
            "earliestPlausibleWallMs",
        ),
        (zone.max_keys == mine.max_keys, "maxKeys"),
        (zone.reader == mine.reader, "clock"),
    ];
    checks.iter().find(|(same, _)| !same).map(|&(_, name)| name)
}

/// How a mismatch message shows an option's value in an image.
pub(super) fn option_value(option: &str, image: &OptionsImage) -> String {
    let number = |bits: u64| crate::text::js_number(f64::from_bits(bits));
    match option {
        "capacity" => number(image.capacity),
        "refillPerSecond" => number(image.refill_per_second),
        "initialTokens" => number(image.initial_tokens),
        "quota" if image.quota_limit == NO_LIMIT => "none".to_owned(),
        "quota" => {
            let period = spec_from_identity(&image.quota_spec).map_or_else(
                || "a period spec this version cannot read".to_owned(),
                |spec| {
                    let identity = spec.identity();
                    let unit = identity.unit.as_str();
                    let secs = identity.anchor_time_secs;
                    let mut text = format!("{unit} in {}", spec.time_zone_name());
                    if unit != "day" {
                        text += &format!(", anchorDay {}", identity.anchor_day);
                    }
                    if unit == "year" {
                        text += &format!(", anchorMonth {}", identity.anchor_month);
                    }
                    text += &format!(
                        ", anchorTime {:02}:{:02}:{:02}",
                        secs / 3600,
                        secs / 60 % 60,
                        secs % 60
                    );
                    text
                },
            );
            format!("limit {} per {period}", image.quota_limit)
        }
        "suspendPolicy" => match image.suspend_policy {
            1 => "'ignore'",
            2 => "'credit'",
            _ => "'refuse'",
        }
        .to_owned(),
        "earliestPlausibleWallMs" if image.earliest_plausible_wall_ms == u64::MAX => {
            "null".to_owned()
        }
        "earliestPlausibleWallMs" => number(image.earliest_plausible_wall_ms),
        "maxKeys" => image.max_keys.to_string(),
        _ if image.reader != 0 => "systemClock() with procUptimeElapsedRealtime()".to_owned(),
        _ => "systemClock()".to_owned(),
    }
}
