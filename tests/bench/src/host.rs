//! The machine a bench runs on, as its reports name it, and the scratch
//! space and tidy paths every bench uses.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// `path` without `.` and `..` detours, for messages and the report. Purely
/// lexical: resolving symlinks would turn a venv's `bin/python` into the base
/// interpreter, which does not see the venv's packages.
pub fn tidy(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A scratch directory for configs, sockets and logs, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new() -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("hark-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The processor's name and the vector extensions that choose ONNX
/// Runtime's and ggml's kernels: the same models give slightly different
/// numbers, and so a word or two apart on hard speech, from one to another
/// (docs/benchmarks.md, "What differs by machine").
pub fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
    };
    let model = field("model name").unwrap_or_else(|| "unknown CPU".into());
    let flags = field("flags")
        .or_else(|| field("Features"))
        .unwrap_or_default();
    let chosen = [
        "avx2",
        "fma",
        "avx512f",
        "avx512_vnni",
        "avx512_bf16",
        "avx_vnni",
        "amx_int8",
        "asimd",
        "asimddp",
        "i8mm",
        "bf16",
        "sve",
    ];
    let has: Vec<&str> = chosen
        .into_iter()
        .filter(|f| flags.split_whitespace().any(|g| g == *f))
        .collect();
    format!("{model} ({})", has.join(" "))
}

pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let model = cpu();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "Machine: {cores} cores, {model}, Linux {kernel}. Everything on 127.0.0.1; \
         the bench client and the server share these cores."
    )
}
