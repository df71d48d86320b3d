//! SPEC §7: calendar periods in an IANA time zone (chrono-tz). Placeholder: being written.
