//! How the core writes values into its messages (errors, anomaly details): numbers as the
//! package's users see them printed elsewhere (JavaScript's `String(number)`), milliseconds kept
//! short, received strings quoted and cut. A leaf: it imports nothing of the crate.

/// Milliseconds for a log line: whole numbers without a fraction, others to the microsecond;
/// beyond 1e21 (and for NaN and the infinities) as JavaScript prints them.
pub fn ms(value: f64) -> String {
    if !value.is_finite() || value.abs() >= 1e21 {
        return js_number(value);
    }
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A received string for a message: quoted, escaped, and cut after 200 characters (with its
/// length in UTF-16 code units, as JavaScript counts it), so that a huge value makes a short message.
pub fn js_quoted(text: &str) -> String {
    const SHOWN: usize = 200;
    match text.char_indices().nth(SHOWN) {
        None => format!("'{}'", text.escape_debug()),
        Some((cut, _)) => format!(
            "'{}'... ({} characters)",
            text[..cut].escape_debug(),
            text.encode_utf16().count()
        ),
    }
}

/// A number as JavaScript's `String(number)` spells it: the shortest digits that read back to
/// the same number, with an exponent from 1e21 up and below 1e-6 (`1e+308`, `1.5e-7`).
pub fn js_number(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if value == 0.0 {
        return "0".to_owned();
    }
    let magnitude = value.abs();
    if (1e-6..1e21).contains(&magnitude) {
        // Rust's Display is the shortest round-trip form, positional.
        return value.to_string();
    }
    // Rust's LowerExp is the shortest round-trip form too: `1e308`, `-1.5e-7`.
    let text = format!("{value:e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if !exponent.starts_with('-') => {
            format!("{mantissa}e+{exponent}")
        }
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn received_strings_are_quoted_escaped_and_cut_after_200_characters() {
        assert_eq!(js_quoted("bogus"), "'bogus'");
        assert_eq!(js_quoted("it's\n"), "'it\\'s\\n'");
        let long = "é".repeat(5_000);
        let quoted = js_quoted(&long);
        assert!(
            quoted.starts_with(&format!("'{}'...", "é".repeat(200))),
            "{quoted}"
        );
        assert!(quoted.ends_with("(5000 characters)"), "{quoted}");
    }

    #[test]
    fn numbers_are_spelled_as_javascript_spells_them() {
        for (value, text) in [
            (1e308, "1e+308"),
            (-1e308, "-1e+308"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (8.64e15, "8640000000000000"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::NEG_INFINITY, "-Infinity"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(js_number(value), text);
        }
    }

    #[test]
    fn milliseconds_in_a_detail_stay_short() {
        assert_eq!(ms(1e308), "1e+308");
        assert_eq!(ms(1_500.25), "1500.25");
        assert_eq!(ms(3_600_000.0), "3600000");
    }
}
