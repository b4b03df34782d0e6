//! Loading ONNX Runtime from a wrong file must be an error, never a panic,
//! and must not spoil a later load of the right one. A process holds one
//! runtime, so this is its own test binary, and one test runs the cases in
//! order, ending with the real library `appliance/setup-voices` installs.

use std::path::{Path, PathBuf};
use std::process::Command;

use hark_tts::piper::{OnnxRuntime, RuntimeError};

const SETUP: &str = "run `appliance/setup-voices tests/.voices/lib tests/.voices/voices` in the workspace root first";

fn library() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.ancestors().nth(2).unwrap_or(manifest);
    let path = root.join("tests/.voices/lib/libonnxruntime.so.1.31.1");
    assert!(path.is_file(), "{} is missing: {SETUP}", path.display());
    path
}

/// Builds a stand-in shared library with the C compiler Rust links with.
fn build_library(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let out = dir.join(format!("lib{name}.so"));
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&out)
        .arg(&c)
        .status()
        .unwrap_or_else(|e| panic!("cannot run cc to build a stand-in library: {e}"));
    assert!(status.success(), "cc failed on {}", c.display());
    out
}

/// A library exporting ONNX Runtime's entry point, whose `OrtApiBase`
/// reports `version` (or which returns no base at all).
fn fake_onnxruntime(dir: &Path, name: &str, version: Option<&str>) -> PathBuf {
    let body = match version {
        Some(v) => format!(
            r#"
typedef struct {{ const void *(*GetApi)(unsigned); const char *(*GetVersionString)(void); }} OrtApiBase;
static const void *get_api(unsigned version) {{ (void)version; return 0; }}
static const char *version_string(void) {{ return "{v}"; }}
static const OrtApiBase base = {{ get_api, version_string }};
const OrtApiBase *OrtGetApiBase(void) {{ return &base; }}
"#
        ),
        None => "const void *OrtGetApiBase(void) { return 0; }\n".to_owned(),
    };
    build_library(dir, name, &body)
}

fn message_names(err: &RuntimeError, path: &Path) {
    let message = err.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "{message:?} does not name {}",
        path.display()
    );
}

#[test]
fn wrong_libraries_are_errors_and_the_right_one_still_loads() {
    let dir = tempfile::tempdir().unwrap();

    let missing = dir.path().join("libonnxruntime.so.1.31.1");
    let err = OnnxRuntime::load(&missing).unwrap_err();
    assert!(matches!(err, RuntimeError::Missing { .. }), "{err:?}");
    message_names(&err, &missing);
    assert!(err.to_string().contains("setup-voices"), "{err}");

    let text = dir.path().join("libonnxruntime.so");
    std::fs::write(&text, "this is not a library\n").unwrap();
    let err = OnnxRuntime::load(&text).unwrap_err();
    assert!(matches!(err, RuntimeError::NotLibrary { .. }), "{err:?}");
    message_names(&err, &text);

    let empty = dir.path().join("empty.so");
    std::fs::write(&empty, b"").unwrap();
    let err = OnnxRuntime::load(&empty).unwrap_err();
    assert!(matches!(err, RuntimeError::NotLibrary { .. }), "{err:?}");

    let err = OnnxRuntime::load(dir.path()).unwrap_err();
    assert!(matches!(err, RuntimeError::NotLibrary { .. }), "{err:?}");

    // The right header for the other architecture (as a cross build's
    // library would be), the rest garbage.
    let foreign = dir.path().join("foreign.so");
    let mut header = vec![0u8; 64];
    header[..4].copy_from_slice(b"\x7fELF");
    header[4] = 2; // 64-bit
    header[5] = 1; // little-endian
    header[16] = 3; // ET_DYN
    let other_machine: u16 = if cfg!(target_arch = "aarch64") {
        62
    } else {
        183
    };
    header[18..20].copy_from_slice(&other_machine.to_le_bytes());
    std::fs::write(&foreign, &header).unwrap();
    let err = OnnxRuntime::load(&foreign).unwrap_err();
    assert!(matches!(err, RuntimeError::NotLibrary { .. }), "{err:?}");
    message_names(&err, &foreign);

    // A cut-off copy of the real library (an interrupted copy): glibc's
    // dlopen would die of SIGBUS on it, so it must be refused before.
    let real = std::fs::read(library()).unwrap();
    for cut in [64, 4096, real.len() / 2, real.len() - 1] {
        let truncated = dir.path().join(format!("truncated-{cut}.so"));
        std::fs::write(&truncated, &real[..cut]).unwrap();
        let err = OnnxRuntime::load(&truncated).unwrap_err();
        assert!(
            matches!(err, RuntimeError::NotLibrary { .. }),
            "{cut}: {err:?}"
        );
        assert!(err.to_string().contains("truncated"), "{err}");
        message_names(&err, &truncated);
    }

    // A library whose dependency is gone: dlopen's own error.
    let dependency = build_library(
        dir.path(),
        "dependency",
        "int dependency(void) { return 1; }\n",
    );
    let c = dir.path().join("needs.c");
    std::fs::write(
        &c,
        "int dependency(void);\nint needs(void) { return dependency(); }\n",
    )
    .unwrap();
    let needs = dir.path().join("libneeds.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&needs)
        .arg(&c)
        .arg("-L")
        .arg(dir.path())
        .arg("-ldependency")
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::remove_file(&dependency).unwrap();
    let err = OnnxRuntime::load(&needs).unwrap_err();
    assert!(matches!(err, RuntimeError::Load { .. }), "{err:?}");
    assert!(err.to_string().contains("libdependency.so"), "{err}");
    message_names(&err, &needs);

    // A working shared library that is not ONNX Runtime.
    let unrelated = build_library(
        dir.path(),
        "unrelated",
        "int unrelated(void) { return 42; }\n",
    );
    let err = OnnxRuntime::load(&unrelated).unwrap_err();
    assert!(matches!(err, RuntimeError::Load { .. }), "{err:?}");
    assert!(err.to_string().contains("OrtGetApiBase"), "{err}");

    // An older ONNX Runtime: ort's API 31 needs 1.31.
    let old = fake_onnxruntime(dir.path(), "old", Some("1.28.0"));
    match OnnxRuntime::load(&old) {
        Err(e @ RuntimeError::Version { .. }) => {
            message_names(&e, &old);
            assert!(e.to_string().contains("1.28.0"), "{e}");
            assert!(e.to_string().contains("1.31"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    let garbled = fake_onnxruntime(dir.path(), "garbled", Some("banana"));
    let err = OnnxRuntime::load(&garbled).unwrap_err();
    assert!(matches!(err, RuntimeError::Version { .. }), "{err:?}");

    // A null API base, on which ort asserts: caught, not a crash.
    let null = fake_onnxruntime(dir.path(), "null", None);
    let err = OnnxRuntime::load(&null).unwrap_err();
    assert!(matches!(err, RuntimeError::Load { .. }), "{err:?}");
    message_names(&err, &null);

    // None of that loaded anything, so the real library still can.
    let runtime = OnnxRuntime::load(&library()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(runtime.library(), std::fs::canonicalize(library()).unwrap());
    let err = OnnxRuntime::load(&old).unwrap_err();
    assert!(matches!(err, RuntimeError::AlreadyLoaded { .. }), "{err:?}");
    assert!(OnnxRuntime::load(&library()).is_ok());
}
