//! Blocks in a zone (docs/blocking.md): a key's block and its run of denials live beside its
//! slot, in words every process reads, so a block made in one process denies in all of them
//! from their next call. Each word is written under the key's group lock; times are the zone's
//! timeline (real elapsed time, the same for every process). The level and the block's length
//! are the JS face's (`lib/keyed/blocks.js`). A call reads its key's meta word (which it reads
//! anyway) and the key's block word only when the word's [`META_BLOCKED`] is set.

use super::layout::{BLOCK_WORDS, META_BLOCKED};
use super::*;

/// The end of a block (timeline ms) as its word holds it: 0 is none.
const NONE: u64 = 0;
const END: usize = 0;
const RUN_START: usize = 1;
const RUN_COUNT: usize = 2;

/// What a block call answers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockAnswer {
    /// Left of the key's block after the call, in ms (0: not blocked).
    pub left_ms: f64,
    /// Whether the call started a block (the key was not blocked before).
    pub started: bool,
}

impl Zone {
    /// The key's block and run words (`group` locked to write them).
    fn block_words(&self, group: usize, slot: usize) -> &[AtomicU64; BLOCK_WORDS] {
        let index = group * GROUP_SLOTS + slot;
        self.at(self.offsets.blocks + index * BLOCK_WORDS * 8)
    }

    /// The end of the key's block (timeline ms), or `None` (never blocked, or lifted).
    #[inline(always)]
    pub(super) fn block_end(&self, group: usize, slot: usize) -> Option<f64> {
        let word = self.block_words(group, slot)[END].load(Ordering::Acquire);
        (word != NONE).then(|| f64::from_bits(word))
    }

    /// Whether the key in `slot` is blocked at `timeline_ms` (a blocked key is never dropped).
    pub(super) fn blocked_at(&self, group: usize, slot: usize, timeline_ms: f64) -> bool {
        self.block_end(group, slot)
            .is_some_and(|end| end > timeline_ms)
    }

    /// A slot's block and run forgotten (its key removed, or a new key in it).
    pub(super) fn clear_block(&self, group: usize, slot: usize) {
        let words = self.block_words(group, slot);
        self.clear_end(group, slot);
        words[RUN_START].store(NONE, Ordering::Relaxed);
        words[RUN_COUNT].store(0, Ordering::Relaxed);
    }

    /// A block word cleared (`group` locked): the word first, then the slot's [`META_BLOCKED`],
    /// so the bit is never clear while the word is set.
    fn clear_end(&self, group: usize, slot: usize) -> f64 {
        let was = self.block_words(group, slot)[END].swap(NONE, Ordering::AcqRel);
        self.slot(group, slot)
            .meta
            .fetch_and(!META_BLOCKED, Ordering::Release);
        f64::from_bits(was)
    }

    /// After a reboot (`open.rs`, the timeline starting again at 0): each block of `group` keeps
    /// what was left of it at the old boot's last reading (`old_timeline_ms`), as a restore
    /// does; runs end; each slot's [`META_BLOCKED`] is set again from its word.
    pub(super) fn rebase_blocks(&self, group: usize, old_timeline_ms: f64) {
        for slot in 0..GROUP_SLOTS {
            let words = self.block_words(group, slot);
            let end = words[END].load(Ordering::Relaxed);
            let left_ms = f64::from_bits(end) - old_timeline_ms;
            let taken = self.group(group).tags[slot].load(Ordering::Relaxed) != 0;
            let rebased = if end != NONE && taken && left_ms > 0.0 {
                left_ms.to_bits()
            } else {
                NONE
            };
            words[END].store(rebased, Ordering::Relaxed);
            words[RUN_COUNT].store(0, Ordering::Relaxed);
            if taken {
                let meta = &self.slot(group, slot).meta;
                if rebased == NONE {
                    meta.fetch_and(!META_BLOCKED, Ordering::Relaxed);
                } else {
                    meta.fetch_or(META_BLOCKED, Ordering::Relaxed);
                }
            }
        }
    }

    /// The zone's timeline as last published (a call just made published it, or a later one).
    fn timeline_now(&self) -> f64 {
        self.read_recon().1.timeline_ms
    }

    /// A consume of a held key in a group with a block (`group` locked): a key whose block word
    /// is set has its status read (the clocks reconciled) and, while the block lasts, is denied;
    /// a block that has ended is forgotten, and the call goes on (`None`).
    #[cold]
    #[inline(never)]
    pub(super) fn blocked_call(
        &self,
        group: usize,
        slot: usize,
        limits: Limits,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Option<Outcome>, Error> {
        let Some(end) = self.block_end(group, slot) else {
            return Ok(None);
        };
        let named = Named::Held { group, slot };
        let Outcome::Status(status) = self.call_kernel(limits, named, Op::Status, anomalies)?
        else {
            return Ok(None);
        };
        let left_ms = end - self.timeline_now();
        if left_ms > 0.0 {
            return Ok(Some(Outcome::Blocked {
                left_ms,
                tokens: status.tokens,
                quota_remaining: status.quota_remaining,
            }));
        }
        self.clear_end(group, slot);
        Ok(None)
    }

    /// `block(key, forMs)`: the key held (added with `policy` as a consume would add it, its
    /// bucket untouched) and blocked until `for_ms` from now unless it already is for longer;
    /// its run ends. `None`: the key is not held and its policy must be asked first.
    pub fn block(
        &self,
        key: Key<'_>,
        for_ms: f64,
        policy: PolicyChoice<'_>,
        anomalies: &mut Vec<Anomaly>,
    ) -> Result<Option<BlockAnswer>, Error> {
        // A held key's status reconciles the clocks; a key not held is added by a consume of 0.
        let status = self.call_inner(key, (Operation::Status, 1, policy), |_| Ok(1), anomalies)?;
        if matches!(status, Outcome::NeedsPolicy) {
            return Ok(None);
        }
        for _ in 0..MAKE_ROOM_TRIES {
            if let Some(answer) =
                self.with_held(key, |group, slot| self.set_block(group, slot, for_ms))
            {
                return Ok(Some(answer));
            }
            let added =
                self.call_inner(key, (Operation::Consume, 0, policy), |_| Ok(0), anomalies)?;
            if matches!(added, Outcome::NeedsPolicy) {
                return Ok(None);
            }
        }
        // Dropped again each time before it could be blocked: as full as a zone gets.
        Err(Error::KeyLimit {
            max_keys: self.max_keys,
        })
    }

    /// The key in `slot` (its group locked) blocked until `for_ms` from now, unless for longer.
    fn set_block(&self, group: usize, slot: usize, for_ms: f64) -> BlockAnswer {
        let now = self.timeline_now();
        let words = self.block_words(group, slot);
        let current = self.block_end(group, slot).filter(|&end| end > now);
        let end = current.map_or(now + for_ms, |end| end.max(now + for_ms));
        // The slot's bit first, then the word: the bit is never clear while the word is set.
        self.slot(group, slot)
            .meta
            .fetch_or(META_BLOCKED, Ordering::AcqRel);
        words[END].store(end.to_bits(), Ordering::Release);
        words[RUN_COUNT].store(0, Ordering::Relaxed);
        BlockAnswer {
            left_ms: end - now,
            started: current.is_none(),
        }
    }

    /// `unblock(key)`: `true` if the key was blocked; a key not held answers `false`.
    pub fn unblock(&self, key: Key<'_>, anomalies: &mut Vec<Anomaly>) -> Result<bool, Error> {
        let Some(true) = self.with_held(key, |group, slot| self.block_end(group, slot).is_some())
        else {
            return Ok(false);
        };
        self.call_inner(
            key,
            (Operation::Status, 1, PolicyChoice::Defaults),
            |_| Ok(1),
            anomalies,
        )?;
        let now = self.timeline_now();
        let was = self.with_held(key, |group, slot| {
            let words = self.block_words(group, slot);
            let end = self.clear_end(group, slot);
            words[RUN_COUNT].store(0, Ordering::Relaxed);
            end > now
        });
        Ok(was == Some(true))
    }

    /// What is left of the key's block as of the latest reading, in ms (0: none, or not held).
    pub fn blocked_ms(&self, key: Key<'_>) -> f64 {
        let now = self.timeline_now();
        self.with_held(key, |group, slot| {
            self.block_end(group, slot).map_or(0.0, |end| end - now)
        })
        .map_or(0.0, |left| left.max(0.0))
    }

    /// A denial of the key (not by a block) counted in its run, which starts at its first denial
    /// and lasts `within_ms`: once it has `after` denials the key is blocked for `for_ms` (unless
    /// for longer already) and the run ends. `None`: not held.
    pub fn denied(
        &self,
        key: Key<'_>,
        within_ms: f64,
        after: u64,
        for_ms: f64,
    ) -> Option<BlockAnswer> {
        let now = self.timeline_now();
        self.with_held(key, |group, slot| {
            let words = self.block_words(group, slot);
            let start = f64::from_bits(words[RUN_START].load(Ordering::Relaxed));
            let count = words[RUN_COUNT].load(Ordering::Relaxed);
            let count = if count == 0 || now - start > within_ms {
                words[RUN_START].store(now.to_bits(), Ordering::Relaxed);
                1
            } else {
                count + 1
            };
            words[RUN_COUNT].store(count, Ordering::Relaxed);
            if count < after {
                return BlockAnswer {
                    left_ms: 0.0,
                    started: false,
                };
            }
            self.set_block(group, slot, for_ms)
        })
    }

    /// Every blocked key and what is left of its block, as of the latest reading (a snapshot's).
    pub fn blocks(&self) -> Vec<(KeyBuf, f64)> {
        let now = self.timeline_now();
        let mut out = Vec::new();
        for group in 0..self.groups {
            let _guard = self.lock_group(group);
            for slot in 0..GROUP_SLOTS {
                if self.group(group).tags[slot].load(Ordering::Relaxed) == 0 {
                    continue;
                }
                if let Some(end) = self.block_end(group, slot).filter(|&end| end > now) {
                    out.push((self.key_at(group, slot), end - now));
                }
            }
        }
        out
    }
}
