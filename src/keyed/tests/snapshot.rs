//! Snapshots: what they restore, and the images they refuse.

use super::*;

#[test]
fn a_snapshot_restores_tokens_use_and_recency() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 10, &mut clock);
    consume(&mut limiter, &mut clock, "a", 3).unwrap();
    consume(&mut limiter, &mut clock, "東京", 1).unwrap();
    clock.advance(1_000.0);
    let image = limiter.snapshot();
    let snapshot = Snapshot::parse(&image, 10).unwrap();
    assert_eq!(snapshot.len(), 2);
    let mut later = ManualClock::new(5_000_000.0, JAN_15_2024 + 3_600_000.0, None);
    let mut restored = keyed(policy(10.0, Some(5)), 10, &mut later);
    restored.restore(&snapshot, &[]);
    let a = status(&mut restored, &mut later, "a");
    assert_eq!(
        (a.tokens, a.quota_used),
        (7.0, Some(3)),
        "tokens as of the last reading, no refill for the downtime"
    );
    assert_eq!(
        status(&mut restored, &mut later, "東京").quota_used,
        Some(1)
    );
    assert_eq!(
        restored.snapshot(),
        restored.snapshot(),
        "snapshot() reads no clock"
    );

    // The next day, the saved use belongs to an ended period.
    let mut next_day = ManualClock::new(0.0, JAN_15_2024 + DAY_MS, None);
    let mut restored = keyed(policy(10.0, Some(5)), 10, &mut next_day);
    restored.restore(&snapshot, &[]);
    assert_eq!(
        status(&mut restored, &mut next_day, "a").quota_used,
        Some(0)
    );

    // Another spec (a Tokyo day) now: the use is dropped; a smaller capacity caps the tokens.
    let mut same_day = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut restored = keyed(
        KeyPolicy {
            quota: Some(QuotaPolicy::new(5, spec("day", "Asia/Tokyo"))),
            ..policy(6.0, None)
        },
        10,
        &mut same_day,
    );
    restored.restore(&snapshot, &[]);
    let a = status(&mut restored, &mut same_day, "a");
    assert_eq!((a.tokens, a.quota_used), (6.0, Some(0)));
}

#[test]
fn a_snapshot_that_is_not_one_is_refused_with_the_reason() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 10, &mut clock);
    for name in ["a", "b", "c"] {
        consume(&mut limiter, &mut clock, name, 1).unwrap();
    }
    let image = limiter.snapshot();
    let refused = |bytes: &[u8], max_keys| Snapshot::parse(bytes, max_keys).unwrap_err();
    assert!(matches!(
        refused(&image[..image.len() - 1], 10),
        SnapshotError::NotASnapshot(_)
    ));
    assert!(matches!(
        refused(&image[..10], 10),
        SnapshotError::NotASnapshot(_)
    ));
    assert!(matches!(
        refused(b"hello, world, not a snapshot", 10),
        SnapshotError::NotASnapshot(_)
    ));
    let mut flipped = image.clone();
    flipped[20] ^= 1;
    assert!(refused(&flipped, 10).message().contains("checksum"));
    let mut other_version = image.clone();
    other_version[4] = 2;
    assert_eq!(refused(&other_version, 10), SnapshotError::OtherVersion(2));
    assert_eq!(
        refused(&image, 2),
        SnapshotError::TooManyKeys {
            keys: 3,
            max_keys: 2
        }
    );
    assert!(Snapshot::parse(&image, 3).is_ok());
    // A well-checksummed image holding a key twice is still corrupt.
    let mut one = keyed(policy(10.0, None), 10, &mut clock);
    consume(&mut one, &mut clock, "a", 1).unwrap();
    let image = one.snapshot();
    let key_record = image[16..image.len() - 4].to_vec();
    let mut doubled = image[..16].to_vec();
    doubled[12..16].copy_from_slice(&2u32.to_le_bytes());
    doubled.extend_from_slice(&key_record);
    doubled.extend_from_slice(&key_record);
    let checksum = crc32fast::hash(&doubled);
    doubled.extend_from_slice(&checksum.to_le_bytes());
    assert!(refused(&doubled, 10).message().contains("held twice"));
    let empty = keyed(policy(10.0, None), 10, &mut clock).snapshot();
    assert!(Snapshot::parse(&empty, 0).unwrap().is_empty());
}

/// `image` with `bytes` written at `at` and its checksum made valid again.
fn patched(image: &[u8], at: usize, bytes: &[u8]) -> Vec<u8> {
    let mut out = image[..image.len() - 4].to_vec();
    out[at..at + bytes.len()].copy_from_slice(bytes);
    let checksum = crc32fast::hash(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

#[test]
fn a_header_claiming_huge_counts_is_refused_before_anything_is_allocated() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 10, &mut clock);
    consume(&mut limiter, &mut clock, "a", 1).unwrap();
    consume(&mut limiter, &mut clock, "b", 1).unwrap();
    let image = limiter.snapshot();
    let empty = keyed(policy(10.0, None), 10, &mut clock).snapshot();
    let large = [
        u32::MAX,
        1 << 31,
        (1 << 31) - 1,
        1 << 28,
        1 << 24,
        65_536,
        3,
    ];
    for base in [&image, &empty] {
        // Every u32 position (aligned or not) of the image, the checksum fixed up: an answer, never
        // an abort. (maxKeys at its largest, so the count is not refused for that.)
        for at in 0..=base.len() - 8 {
            for value in large {
                let bytes = patched(base, at, &value.to_le_bytes());
                let _ = Snapshot::parse(&bytes, 1 << 32);
            }
        }
        for at in [8, 12] {
            for value in large {
                let refused = Snapshot::parse(&patched(base, at, &value.to_le_bytes()), 1 << 32);
                assert!(
                    matches!(refused, Err(SnapshotError::NotASnapshot(_))),
                    "count {value} at {at}: {refused:?}"
                );
            }
        }
    }
    let claim = Snapshot::parse(&patched(&empty, 12, &u32::MAX.to_le_bytes()), 1 << 32);
    let message = claim.unwrap_err().message();
    assert!(
        message.contains("4294967295 keys, which need at least"),
        "{message}"
    );
}

#[test]
fn a_snapshot_with_a_period_spec_no_key_uses_is_refused() {
    let mut clock = ManualClock::new(0.0, JAN_15_2024 + 1_000.0, None);
    let mut limiter = keyed(policy(10.0, Some(5)), 10, &mut clock);
    consume(&mut limiter, &mut clock, "a", 1).unwrap();
    let image = limiter.snapshot();
    assert_eq!(u32::from_le_bytes(image[8..12].try_into().unwrap()), 1);
    // One spec record: unit, anchors, zone length 3, anchor time, "UTC", id length, id.
    let spec_len = 8 + 3 + 1 + usize::from(image[16 + 8 + 3]);
    let spec_record = image[16..16 + spec_len].to_vec();
    let key_record = image[16 + spec_len..image.len() - 4].to_vec();
    let build = |specs: &[Vec<u8>], keys: &[Vec<u8>]| {
        let mut out = image[..16].to_vec();
        out[8..12].copy_from_slice(&(specs.len() as u32).to_le_bytes());
        out[12..16].copy_from_slice(&(keys.len() as u32).to_le_bytes());
        specs.iter().for_each(|spec| out.extend_from_slice(spec));
        keys.iter().for_each(|key| out.extend_from_slice(key));
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    };
    assert!(Snapshot::parse(
        &build(
            std::slice::from_ref(&spec_record),
            std::slice::from_ref(&key_record)
        ),
        10
    )
    .is_ok());
    // Another spec (a week) that no key names.
    let mut week = spec_record.clone();
    week[0] = 1;
    week[1] = 1;
    let mut other_key = key_record.clone();
    other_key[3] = b'y';
    let refused = Snapshot::parse(
        &build(
            &[spec_record.clone(), week],
            &[key_record.clone(), other_key],
        ),
        10,
    );
    assert!(
        refused
            .as_ref()
            .unwrap_err()
            .message()
            .contains("period spec 1 is used by no key"),
        "{refused:?}"
    );
    // The same spec twice (the second one unused by any key in a count that would fit).
    let mut second_key = key_record.clone();
    second_key[3] = b'z';
    let refused = Snapshot::parse(
        &build(
            &[spec_record.clone(), spec_record.clone()],
            &[key_record, second_key],
        ),
        10,
    );
    assert!(
        refused
            .as_ref()
            .unwrap_err()
            .message()
            .contains("written twice"),
        "{refused:?}"
    );
    // More specs than keys.
    let refused = Snapshot::parse(&build(&[spec_record.clone(), spec_record], &[]), 10);
    assert!(refused
        .unwrap_err()
        .message()
        .contains("a spec no key uses"));
}
