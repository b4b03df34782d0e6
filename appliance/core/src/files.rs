//! Files written so that a crash or a power cut leaves the old one or the
//! new one, never a torn one: through a temporary file in the same
//! directory, synced, renamed, and the directory synced.

use std::{
    fs::{self, File},
    io::{self, Write},
    path::Path,
};

/// Writes `bytes` to `path` through a temporary file in `dir`: a crash
/// leaves the old file or the new one, never a torn one. The model and
/// voice stores write their manifests with it, the daemon its secrets.
pub fn write_atomic(dir: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_mode(dir, path, bytes, 0o666)
}

/// [`write_atomic`], the new file made with permission bits `mode` (less
/// the umask) before anything is in it: 0o600 for secrets.
pub fn write_atomic_mode(dir: &Path, path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One temporary name per process, so two writers never share one.
    let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Makes a rename in `dir` durable: the new name is only on disk once the
/// directory itself is synced.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}
