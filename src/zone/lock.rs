//! Locks that a killed process cannot leave held: a lock word holds its owner (pid and the
//! process's start time), and a waiter that finds the owner dead takes the lock over.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a waiter spins before it first asks whether the owner still lives, and then between
/// two such checks.
const LIVENESS_CHECK_EVERY: Duration = Duration::from_millis(2);

/// This process as a lock owner: its pid in the high half, the low 32 bits of its start time
/// (in clock ticks since boot, `/proc/<pid>/stat` field 22) in the low half, so that a reused
/// pid is not taken for the process that held the lock.
pub fn owner_id() -> u64 {
    static OWNER: OnceLock<u64> = OnceLock::new();
    *OWNER.get_or_init(|| {
        let pid = std::process::id();
        (u64::from(pid) << 32) | u64::from(start_token(pid).unwrap_or(0))
    })
}

/// The low 32 bits of a process's start time, if it can be read.
fn start_token(pid: u32) -> Option<u32> {
    process_stat(pid).map(|(_, start)| start)
}

/// A process's state letter and the low 32 bits of its start time, from `/proc/<pid>/stat`.
fn process_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after the last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start: u64 = fields.nth(18)?.parse().ok()?;
    Some((state, start as u32))
}

/// Whether the process that wrote `owner` still runs.
pub fn owner_alive(owner: u64) -> bool {
    let pid = (owner >> 32) as u32;
    if pid == std::process::id() {
        // A thread of this process (a worker) holds it; it cannot be killed alone.
        return true;
    }
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    if !exists {
        return false;
    }
    let token = owner as u32;
    match process_stat(pid) {
        // Killed, and not reaped yet by its parent (whose event loop may be waiting on this very
        // lock): it will never unlock.
        Some(('Z' | 'X' | 'x', _)) => false,
        // The same pid, started at another time: the pid was reused.
        Some((_, now)) => token == 0 || now == token,
        None => true,
    }
}

/// How a lock was acquired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    Free,
    /// From a dead owner: what it protects may be mid-change (the caller repairs it).
    TakenOver,
}

/// Acquires `word` for `me`, taking it over from a dead owner.
pub fn lock(word: &AtomicU64, me: u64) -> Acquired {
    let mut spins = 0u32;
    let mut next_check = None;
    loop {
        let current = word.load(Ordering::Relaxed);
        if current == 0 {
            if word
                .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return Acquired::Free;
            }
            continue;
        }
        spins = spins.wrapping_add(1);
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        std::thread::yield_now();
        let now = Instant::now();
        let due = *next_check.get_or_insert(now + LIVENESS_CHECK_EVERY);
        if now >= due {
            next_check = Some(now + LIVENESS_CHECK_EVERY);
            if !owner_alive(current)
                && word
                    .compare_exchange(current, me, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Acquired::TakenOver;
            }
        }
    }
}

/// Acquires `word` only if it is free now (a lock held by a dead owner is not taken over here:
/// the caller moves on, and a later `lock` takes it over).
pub fn try_lock(word: &AtomicU64, me: u64) -> Option<Acquired> {
    let current = word.load(Ordering::Relaxed);
    if current == 0 {
        return word
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Acquired::Free);
    }
    None
}

pub fn unlock(word: &AtomicU64) {
    word.store(0, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_not() {
        assert!(owner_alive(owner_id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!owner_alive(u64::from(pid) << 32));
    }

    #[test]
    fn a_killed_process_not_yet_reaped_is_not_alive() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let owner = u64::from(pid) << 32 | u64::from(start_token(pid).unwrap());
        assert!(owner_alive(owner));
        child.kill().unwrap();
        // A zombie until `wait`: still there for kill(pid, 0).
        let started = Instant::now();
        while owner_alive(owner) {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "a zombie counts as alive"
            );
            std::thread::yield_now();
        }
        // SAFETY: signal 0 only asks whether the process exists.
        let exists = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
        assert!(exists, "not reaped yet");
        child.wait().unwrap();
    }

    #[test]
    fn a_lock_held_by_a_dead_process_is_taken_over() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let word = AtomicU64::new(u64::from(pid) << 32);
        let started = Instant::now();
        assert_eq!(lock(&word, owner_id()), Acquired::TakenOver);
        assert!(started.elapsed() < Duration::from_secs(1));
        assert_eq!(word.load(Ordering::Relaxed), owner_id());
        unlock(&word);
        assert_eq!(lock(&word, owner_id()), Acquired::Free);
    }
}
