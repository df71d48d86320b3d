//! The result buffer's layout and what is written into it.

use super::*;

fn with_buffer(body: impl FnOnce(&ResultBuffer)) {
    let mut memory = [f64::NAN; LENGTH];
    body(&ResultBuffer(memory.as_mut_ptr()));
}

#[test]
fn positions_fit_and_do_not_collide() {
    let positions = [
        N_OR_STATUS,
        ALLOWED,
        RETRY_AFTER_MS,
        BASIS,
        TOKENS,
        QUOTA_REMAINING,
        LIMITER,
        MONOTONIC_MS,
        WALL_MS,
        ELAPSED_REALTIME_MS,
        HAS_ELAPSED_REALTIME,
        PERIOD_SLOT,
    ];
    let distinct: std::collections::HashSet<_> = positions.iter().collect();
    assert_eq!(distinct.len(), positions.len());
    assert!(positions.iter().all(|&at| at < LENGTH));
    assert_eq!(
        OPERATION, LIMITER,
        "the keyed buffer reuses the limiter position"
    );
}

#[test]
fn stats_positions_do_not_collide_and_every_counter_is_written_where_it_says() {
    use crate::anomaly::AnomalyKind;
    let singles = [
        stats::ALLOWED,
        stats::DENIED,
        stats::KEYS,
        stats::EVICTED,
        stats::KEY_LIMIT_REFUSALS,
    ];
    assert!(singles.iter().all(|&at| at < stats::ANOMALIES));
    let distinct: std::collections::HashSet<_> = singles.iter().collect();
    assert_eq!(distinct.len(), singles.len());
    let mut counters = Counters {
        allowed: 1,
        denied: 2,
        evicted: 4,
        key_limit_refusals: 5,
        ..Counters::default()
    };
    for (position, kind) in AnomalyKind::ALL.iter().enumerate() {
        counters.anomalies[Counters::anomaly_index(*kind)] = 10 + position as u64;
    }
    with_buffer(|result| {
        write_stats(result, &counters, 3);
        let read: Vec<f64> = (0..stats::LENGTH).map(|at| result.get(at)).collect();
        assert_eq!(
            read,
            [1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]
        );
    });
}

#[test]
fn statuses_and_basis_codes_are_distinct() {
    let statuses = [
        STATUS_DECIDED,
        STATUS_DECIDED_WITH_ANOMALIES,
        STATUS_ERROR,
        STATUS_NEEDS_READER,
        STATUS_NEEDS_READINGS,
        STATUS_NEEDS_POLICY,
        STATUS_NEEDS_STORE,
        STATUS_DECIDED_WITH_WORK,
        STATUS_NEEDS_SLICE,
    ];
    for (i, a) in statuses.iter().enumerate() {
        assert!(statuses[i + 1..].iter().all(|b| b != a));
    }
    let codes: Vec<f64> = RetryBasis::ALL
        .iter()
        .map(|&basis| basis_code(Some(basis)))
        .collect();
    assert_eq!(basis_code(None), BASIS_NONE);
    assert!(codes.iter().all(|&code| code != BASIS_NONE));
    assert_ne!(codes[0], codes[1]);
    assert!(codes.iter().all(|&code| code != BASIS_BLOCK) && BASIS_BLOCK != BASIS_NONE);
}

#[test]
fn each_need_is_written_as_its_status_and_the_reader_with_the_readings_taken() {
    for (needs, status) in [
        (Needs::Readings, STATUS_NEEDS_READINGS),
        (Needs::Policy, STATUS_NEEDS_POLICY),
    ] {
        with_buffer(|result| {
            needs.write(result);
            assert_eq!(result.get(N_OR_STATUS), status);
            assert!(result.get(MONOTONIC_MS).is_nan(), "no readings written");
        });
    }
    with_buffer(|result| {
        Needs::Reader { taken: (5.0, 7.0) }.write(result);
        assert_eq!(result.get(N_OR_STATUS), STATUS_NEEDS_READER);
        assert_eq!((result.get(MONOTONIC_MS), result.get(WALL_MS)), (5.0, 7.0));
    });
}

#[test]
fn a_settled_call_is_decided_with_its_value_or_says_what_it_needs() {
    with_buffer(|result| {
        assert_eq!(settle(result, Ok(7)), Some(7));
        assert_eq!(result.get(N_OR_STATUS), STATUS_DECIDED);
        assert_eq!(settle::<u8>(result, Err(Needs::Policy)), None);
        assert_eq!(result.get(N_OR_STATUS), STATUS_NEEDS_POLICY);
    });
}

#[test]
fn supplied_readings_are_read_back_with_the_reader_only_when_flagged() {
    with_buffer(|result| {
        assert!(result.readings(false).monotonic_ms.is_none());
        result.set(MONOTONIC_MS, 1.0);
        result.set(WALL_MS, 2.0);
        result.set(HAS_ELAPSED_REALTIME, 0.0);
        result.set(ELAPSED_REALTIME_MS, 3.0);
        let readings = result.readings(true);
        assert_eq!(
            (readings.monotonic_ms, readings.wall_ms),
            (Some(1.0), Some(2.0))
        );
        assert_eq!(readings.elapsed_realtime_ms, None);
        result.set(HAS_ELAPSED_REALTIME, 1.0);
        assert_eq!(result.readings(true).elapsed_realtime_ms, Some(3.0));
    });
}
