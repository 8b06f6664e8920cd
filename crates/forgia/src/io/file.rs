//! Named tensors to and from a `.safetensors` file: atomic writes, checked reads, and the
//! checksum forgia keeps in the header metadata.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::autograd::Tensor;
use crate::error::{fail, Error, ErrorKind, Result};

use super::dtype::{check_shape, entry, Entry, Unsupported};

/// The metadata key of the checksum.
const CHECKSUM_KEY: &str = "forgia.checksum";

pub(super) fn checkpoint_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::from(ErrorKind::Checkpoint { path: path.display().to_string(), reason: reason.into() })
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::from(ErrorKind::Io { path: path.display().to_string(), source })
}

/// FNV-1a over 64-bit words (tail bytes one by one). Every step is a bijection of the running
/// hash, so any change confined to one word changes the result.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    fn write(&mut self, bytes: &[u8]) {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let word = u64::from_le_bytes(c.try_into().expect("chunks_exact(8) yields 8 bytes"));
            self.0 = (self.0 ^ word).wrapping_mul(PRIME);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0 ^ b as u64).wrapping_mul(PRIME);
        }
    }
}

/// The checksum of tensors given in name order: each name, its shape and its data bytes.
fn checksum<'a>(entries: impl Iterator<Item = (&'a str, &'a [usize], &'a [u8])>) -> String {
    let mut h = Fnv::new();
    for (name, shape, data) in entries {
        h.write(&(name.len() as u64).to_le_bytes());
        h.write(name.as_bytes());
        h.write(&(shape.len() as u64).to_le_bytes());
        for &d in shape {
            h.write(&(d as u64).to_le_bytes());
        }
        h.write(&(data.len() as u64).to_le_bytes());
        h.write(data);
    }
    format!("fnv1a64:{:016x}", h.0)
}

/// Writes named tensors to `path` as safetensors (F32), atomically: the bytes go to a
/// temporary file beside `path`, which is then renamed over it.
///
/// A writer killed mid-save (`kill -9`) leaves its temporary file behind, never a torn
/// `path`; the next save of the same `path` removes such leftovers whose writer process is
/// gone (on Linux, where `/proc` says so; elsewhere they are left alone). A temporary file of
/// a live process is never touched.
///
/// # Errors
/// `Checkpoint` for a repeated name; `Io` when the file cannot be written (no temporary file
/// is left behind).
pub fn save<S: AsRef<str>>(path: impl AsRef<Path>, tensors: &[(S, &Tensor)]) -> Result<()> {
    save_with_metadata(path.as_ref(), tensors, &[])
}

/// [`save`] with extra header metadata (such as `format: pt`, which `transformers` requires).
pub(super) fn save_with_metadata<S: AsRef<str>>(
    path: &Path,
    tensors: &[(S, &Tensor)],
    extra: &[(&str, &str)],
) -> Result<()> {
    let mut entries: Vec<(&str, Vec<usize>, Vec<u8>)> = Vec::with_capacity(tensors.len());
    let mut seen = HashSet::new();
    for (name, t) in tensors {
        let name = name.as_ref();
        if !seen.insert(name) {
            return Err(checkpoint_error(path, format!("tensor name {name:?} given twice")));
        }
        let bytes = t.with_data(|d| d.iter().flat_map(|v| v.to_le_bytes()).collect());
        entries.push((name, t.shape().to_vec(), bytes));
    }
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let sum = checksum(entries.iter().map(|(n, s, d)| (*n, s.as_slice(), d.as_slice())));
    let mut views = Vec::with_capacity(entries.len());
    for (name, shape, data) in &entries {
        let view = TensorView::new(Dtype::F32, shape.clone(), data)
            .map_err(|e| checkpoint_error(path, format!("tensor {name:?}: {e}")))?;
        views.push((*name, view));
    }
    let mut metadata = HashMap::from([(CHECKSUM_KEY.to_string(), sum)]);
    metadata.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let bytes = safetensors::serialize(views, Some(metadata)).map_err(|e| checkpoint_error(path, e.to_string()))?;
    write_atomically(path, &bytes)
}

/// The prefix of every temporary name for `path`: `.{file name}.tmp-`.
fn temp_prefix(path: &Path) -> String {
    let name = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    format!(".{name}.tmp-")
}

/// A temporary name in the same directory, so the final rename stays on one file system:
/// `.{file name}.tmp-{pid}-{n}`.
fn temp_path(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Relaxed: only uniqueness within this process matters, not ordering with other memory.
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!("{}{}-{n}", temp_prefix(path), std::process::id()))
}

/// The writer's PID of a temporary name for `path` (`.{file name}.tmp-{pid}-{n}`), if it is one.
fn temp_writer(prefix: &str, file_name: &str) -> Option<u32> {
    let (pid, n) = file_name.strip_prefix(prefix)?.split_once('-')?;
    n.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// True unless the process is known to be gone: only Linux's `/proc` can say so here, so
/// elsewhere every writer counts as alive and nothing is removed.
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Best effort: removes the temporary files of earlier saves of `path` whose writer process
/// is gone (killed mid-save). Failures (a directory that cannot be listed, a file another
/// process removed first) are ignored: the save itself does not depend on them.
fn remove_stale_temps(path: &Path) {
    let prefix = temp_prefix(path);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| temp_writer(&prefix, n)) else { continue };
        if !process_alive(pid) && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    remove_stale_temps(path);
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error(path, e));
    }
    Ok(())
}

/// Reads every tensor of a safetensors file, sorted by name. Float entries of any precision
/// (F16, BF16, F32, F64) are converted to f32; for files that also hold integer entries use
/// [`load_entries`].
///
/// # Errors
/// `Io` when the file cannot be read; `Checkpoint` when it is not a valid safetensors file
/// (truncated, malformed header, offsets out of range), holds an integer or other non-float
/// entry (named with its dtype), or fails its forgia checksum; `SizeOverflow` for a header
/// shape whose size overflows.
pub fn load(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    let mut out = Vec::new();
    for (name, entry) in load_entries(path)? {
        match entry {
            Entry::Float(t) => out.push((name, t)),
            Entry::Int(i) => {
                return Err(checkpoint_error(
                    path,
                    format!(
                        "tensor {name:?} holds integers (shape {:?}), only float entries are read as tensors",
                        i.shape()
                    ),
                ))
            }
        }
    }
    Ok(out)
}

/// Reads every entry of a safetensors file, sorted by name: float entries (F16, BF16, F32,
/// F64) as f32 tensors, integer and boolean entries as [`Indices`](crate::Indices).
///
/// # Errors
/// As [`load`], except that integer entries are read; `Checkpoint` naming an entry of
/// another dtype (such as F8).
pub fn load_entries(path: impl AsRef<Path>) -> Result<Vec<(String, Entry)>> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let (_, metadata) = SafeTensors::read_metadata(&bytes).map_err(|e| checkpoint_error(path, e.to_string()))?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| checkpoint_error(path, e.to_string()))?;
    let mut views = file.tensors();
    views.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(expected) = metadata.metadata().as_ref().and_then(|m| m.get(CHECKSUM_KEY)) {
        let actual = checksum(views.iter().map(|(n, v)| (n.as_str(), v.shape(), v.data())));
        if &actual != expected {
            return Err(checkpoint_error(
                path,
                format!("checksum mismatch: file says {expected}, data gives {actual}"),
            ));
        }
    }
    let mut out = Vec::with_capacity(views.len());
    for (name, view) in views {
        check_shape(view.shape())?;
        match entry(&view) {
            Ok(Ok(e)) => out.push((name, e)),
            Ok(Err(e)) => return fail(checkpoint_kind(path, &name, e)),
            Err(Unsupported(dtype)) => {
                return Err(checkpoint_error(path, format!("tensor {name:?} has dtype {dtype:?}, which is not read")))
            }
        }
    }
    Ok(out)
}

fn checkpoint_kind(path: &Path, name: &str, e: Error) -> ErrorKind {
    ErrorKind::Checkpoint { path: path.display().to_string(), reason: format!("tensor {name:?}: {e}") }
}
