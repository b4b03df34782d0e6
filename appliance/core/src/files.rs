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

#[cfg(test)]
mod tests {
    use super::*;
    use std::{
        process::{Command, Stdio},
        time::Duration,
    };

    /// Set in the child this test starts: the directory it writes in.
    const WRITER: &str = "HARK_FILES_TEST_WRITER";
    const SIZE: usize = 1 << 20;
    const NAME: &str = "settings";

    /// Rewrites the file again and again, each time all one byte value.
    fn write_forever(dir: &Path) -> ! {
        let path = dir.join(NAME);
        for round in 0u64.. {
            let bytes = vec![(round % 251) as u8 + 1; SIZE];
            write_atomic(dir, &path, &bytes).expect("the writer writes");
        }
        unreachable!()
    }

    #[test]
    fn a_writer_killed_at_any_moment_leaves_the_old_file_or_the_new_one() {
        if let Some(dir) = std::env::var_os(WRITER) {
            write_forever(Path::new(&dir));
        }
        let dir = std::env::temp_dir().join(format!("hark-files-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("a directory");
        write_atomic(&dir, &dir.join(NAME), &vec![0u8; SIZE]).expect("the first file");
        let mut caught_mid_write = 0;
        for round in 0..8u64 {
            // Re-runs this test alone in a child, which becomes the writer.
            let mut child = Command::new(std::env::current_exe().expect("the test binary"))
                .args([
                    "--exact",
                    "files::tests::a_writer_killed_at_any_moment_leaves_the_old_file_or_the_new_one",
                    "--nocapture",
                ])
                .env(WRITER, &dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("the writer starts");
            std::thread::sleep(Duration::from_millis(150 + round * 37));
            child.kill().expect("SIGKILL");
            child.wait().expect("the writer is gone");
            let kept = fs::read(dir.join(NAME)).expect("the file is there");
            assert_eq!(kept.len(), SIZE, "round {round}: a torn file");
            assert!(
                kept.iter().all(|&b| b == kept[0]),
                "round {round}: bytes from two writes"
            );
            // Its temporary file left behind: the kill came mid-write.
            let tmp = dir.join(format!(".{NAME}.{}.tmp", child.id()));
            if tmp.exists() {
                caught_mid_write += 1;
                fs::remove_file(tmp).expect("removed");
            }
        }
        let _ = fs::remove_dir_all(&dir);
        assert!(
            caught_mid_write > 0,
            "no kill came in the middle of a write"
        );
    }
}
