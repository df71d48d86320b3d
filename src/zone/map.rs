//! The zone file: made whole in a temporary file and linked into place (so no process ever maps
//! a half-made zone), checked before it is mapped, mapped `MAP_SHARED`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::ptr::NonNull;

use crate::error::ErrorCode;

use super::layout::{checksum_of, layout_id, Header, Offsets, MAGIC, VERSION};

/// A refusal to open a zone, with its code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneError {
    pub code: ErrorCode,
    pub message: String,
}

impl ZoneError {
    pub fn invalid(message: String) -> ZoneError {
        ZoneError {
            code: ErrorCode::InvalidOption,
            message,
        }
    }
}

/// A mapped zone file (unmapped on drop; the file stays).
pub struct Mapping {
    pub base: NonNull<u8>,
    pub len: usize,
    _file: File,
}

// SAFETY: the mapping is shared memory reached only through `InMapping` types (see layout.rs).
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

fn map(file: File, len: usize) -> io::Result<Mapping> {
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh shared read-write mapping of a file of at least `len` bytes.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if address == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(Mapping {
        base: NonNull::new(address.cast()).ok_or_else(|| io::Error::other("mmap returned null"))?,
        len,
        _file: file,
    })
}

fn io_error(path: &str, what: &str, error: &io::Error) -> ZoneError {
    ZoneError::invalid(format!("zone.path {path:?} could not be {what}: {error}"))
}

/// This boot's id (/proc/sys/kernel/random/boot_id), as 48 bytes.
pub fn boot_id() -> [u8; 48] {
    let mut id = [0u8; 48];
    if let Ok(text) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let text = text.trim().as_bytes();
        let len = text.len().min(48);
        id[..len].copy_from_slice(&text[..len]);
    }
    id
}

/// An existing zone file, checked and mapped; `None` when there is no file at `path`.
pub fn open_existing(path: &str) -> Result<Option<Mapping>, ZoneError> {
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return dangling_link(path),
        Err(error) => return Err(io_error(path, "opened", &error)),
    };
    let not_a_zone =
        |why: String| ZoneError::invalid(format!("zone.path {path:?} is not a zone file: {why}"));
    let metadata = file.metadata().map_err(|e| io_error(path, "read", &e))?;
    if !metadata.is_file() {
        return Err(not_a_zone("it is not a regular file".into()));
    }
    let len = metadata.len();
    let header_len = std::mem::size_of::<Header>();
    if len < header_len as u64 {
        return Err(not_a_zone(format!(
            "it has {len} bytes, fewer than a zone's header"
        )));
    }
    let mut bytes = vec![0u8; header_len];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| io_error(path, "read", &e))?;
    // SAFETY: `Header` is plain integers and atomics (any bit pattern is valid); read unaligned.
    let header: Header = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    if header.magic != MAGIC {
        return Err(not_a_zone("its first bytes are not a zone's".into()));
    }
    if header.version != VERSION || header.layout != layout_id() {
        return Err(not_a_zone(format!(
            "it was made by another version of quota-clock-source (format {}, layout {:#x}; this one reads format {VERSION}, layout {:#x})",
            header.version, header.layout, layout_id()
        )));
    }
    if checksum_of(&header) != header.checksum {
        return Err(not_a_zone("its header is corrupt (checksum)".into()));
    }
    let expected = usize::try_from(header.groups)
        .ok()
        .and_then(Offsets::new)
        .map(|offsets| offsets.file_size as u64);
    if expected != Some(header.file_size) || header.file_size != len {
        return Err(not_a_zone(format!(
            "it has {len} bytes, its header says {} (truncated or grown)",
            header.file_size
        )));
    }
    map(file, len as usize)
        .map(Some)
        .map_err(|e| io_error(path, "mapped", &e))
}

/// Nothing to open at `path`: `None` (the zone is made there), unless `path` is a symbolic link to
/// nothing, which no zone can be linked over (it would look taken forever).
fn dangling_link(path: &str) -> Result<Option<Mapping>, ZoneError> {
    match std::fs::read_link(path) {
        Ok(target) => Err(ZoneError::invalid(format!(
            "zone.path {path:?} is a symbolic link to {:?}, which does not exist; remove the link, or point it at a zone file or a path where one may be made",
            target.display().to_string()
        ))),
        Err(_) => Ok(None),
    }
}

/// The temporary file a new zone is made in: beside `path` (the same file system, for the hard
/// link) under a short name of its own, so that any legal name at `path` can be made.
fn temporary_beside(path: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    let name = format!(".qcs-{:x}-{:x}.tmp", std::process::id(), nanos);
    match std::path::Path::new(path).parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(name).display().to_string(),
        _ => name,
    }
}

/// A new zone file of `len` bytes in a temporary file beside `path`, mapped, for the caller to
/// fill before [`publish`]; refused unless the file system has `needed` bytes free (what a full
/// zone of short keys uses: the file is sparse).
pub fn create_temporary(
    path: &str,
    len: usize,
    needed: usize,
) -> Result<(Mapping, String), ZoneError> {
    let temporary = temporary_beside(path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(|e| io_error(path, "created", &e))?;
    let refuse = |error: io::Error| {
        let _ = std::fs::remove_file(&temporary);
        io_error(path, "created", &error)
    };
    if let Err(error) = check_free_space(&temporary, needed) {
        return Err(refuse(error));
    }
    file.set_len(len as u64).map_err(refuse)?;
    match map(file, len) {
        Ok(mapping) => Ok((mapping, temporary)),
        Err(error) => Err(refuse(error)),
    }
}

/// Refuses a zone the file system has no room for (a write to a new page of a full tmpfs would
/// raise SIGBUS).
fn check_free_space(path: &str, len: usize) -> io::Result<()> {
    let c_path = std::ffi::CString::new(path).map_err(io::Error::other)?;
    // SAFETY: `stat` is written by statvfs; `c_path` is a valid C string.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) } != 0 {
        return Ok(());
    }
    let free = (stat.f_bavail as u128) * (stat.f_frsize as u128);
    if free < len as u128 {
        return Err(io::Error::other(format!(
            "the file system has {free} bytes free, a full zone of this maxKeys needs {len}; lower maxKeys or make room"
        )));
    }
    Ok(())
}

/// Links the filled temporary file at `path`. `false`: another process made the zone first (the
/// temporary file is removed either way).
pub fn publish(temporary: &str, path: &str) -> Result<bool, ZoneError> {
    let linked = std::fs::hard_link(temporary, path);
    let _ = std::fs::remove_file(temporary);
    match linked {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(error) => Err(io_error(path, "created", &error)),
    }
}

/// The header a new zone starts with (its checksum set).
pub fn write_header(mapping: &Mapping, header: Header) {
    let mut header = header;
    header.magic = MAGIC;
    header.version = VERSION;
    header.layout = layout_id();
    header.checksum = checksum_of(&header);
    // SAFETY: the mapping is at least a header long and page-aligned; no other process sees it yet.
    unsafe { std::ptr::write(mapping.base.as_ptr().cast::<Header>(), header) };
}
