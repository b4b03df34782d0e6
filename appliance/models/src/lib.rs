//! Hark's model store: the models the appliance can load, in one directory
//! (by default [`DEFAULT_DIR`], `/var/lib/hark/models`) with a manifest
//! recording where each came from and its checksums. Three kinds
//! ([`ModelKind`], [`kind`]): whisper ggml files (`stt.model`), Moonshine
//! directories (the live engine, `stt.live_model`) and Smart Turn ONNX
//! files (the end-of-turn model, `stt.turn_model`).
//!
//! The daemon reads from it ([`resolve`], [`Store::path_of`]); the CLI
//! manages it:
//!
//! | command | call |
//! |---|---|
//! | `hark models list` | [`Store::list`] (plus [`catalog::CATALOG`] for what can be fetched) |
//! | `hark models fetch <name>` | [`fetch_catalog`], or [`fetch_request`] with [`FetchRequest::catalog`] and [`FetchOptions`] (`replace`, timeouts) |
//! | `hark models fetch <name> --url <url> [--sha256 <hex>]` | [`fetch()`], or [`fetch_request`] with [`FetchRequest::url`] |
//! | `hark models import <path> [--name <name>]` | [`kind::sniff`], then [`Store::add`] with [`AddOptions::import`] (a converter's own output: [`Store::add_file`] with [`Transfer::Move`]) |
//! | `hark models verify [<name>]` | [`Store::verify`], [`Store::verify_all`] |
//! | `hark models remove <name>` | [`Store::remove`] |
//!
//! ```no_run
//! use hark_models::{DEFAULT_DIR, Progress, Store, fetch_catalog};
//!
//! let store = Store::open(DEFAULT_DIR)?;
//! let fetched = fetch_catalog(&store, "tiny.en-q8_0", Progress::for_terminal())?;
//! println!("{fetched}");
//! let model = store.path("tiny.en-q8_0")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The directory
//!
//! See [`store`] for the layout. Names ([`check_name`]) are 1–64 of
//! `[A-Za-z0-9._-]`, not starting with a dot, without `..`; a whisper
//! model `<name>` lives in `ggml-<name>.bin`, a Moonshine one in the
//! directory `<name>/`, a Smart Turn one in `<name>.onnx`. Files and
//! directories are only ever put in place by a rename within the
//! directory, and the manifest only ever replaced by one ([`manifest`]),
//! so a power cut leaves the old state or the new, at worst with an
//! unmanaged file that [`Store::list`] reports.
//!
//! [`Store::list`] returns the manifest's entries and, separately, entries
//! whose file is missing, downloads in progress (`<name>.part`), and
//! unmanaged files (anything else that is not hidden).
//!
//! Every model is checked to be what it is added as: a whisper.cpp ggml
//! file, whose language (`en` or `multilingual`) and quantisation are read
//! from its header ([`ggml`]), not guessed from its name; a Moonshine
//! directory with its three files in ONNX Runtime's format; an ONNX file
//! for Smart Turn ([`kind`]). [`Store::verify`] checks every file of a
//! directory model and names the ones that changed.
//!
//! # Downloads
//!
//! [`fetch()`] and friends use blocking HTTP(S) (ureq, rustls), resume an
//! interrupted download with a range request, and check size, SHA-256
//! and SHA-1 when known (MD5 too, for other stores: [`PartFile`] downloads
//! any file this way, [`hash`] hashes and copies files, and
//! [`manifest::write_atomic`] replaces a file atomically); see [`fetch`](mod@fetch) for the details and
//! [`catalog`] for the published models and where their checksums come
//! from. Progress goes to an indicatif bar ([`Progress::Bar`]), a callback
//! or nowhere. Call them from a thread that may block: never from the
//! async runtime or the audio path.
//!
//! # Errors
//!
//! [`StoreError`] and [`FetchError`] name the file, model or URL involved.
//! An unknown model name lists the installed ones; a corrupt manifest is
//! reported and left alone, never wiped.

pub mod catalog;
pub mod fetch;
pub mod ggml;
pub mod hash;
pub mod kind;
pub mod manifest;
mod name;
pub mod store;

pub use fetch::{
    Downloaded, Expected, FetchError, FetchOptions, FetchRequest, Fetched, PartFile, Progress,
    ProgressEvent, Verification, fetch, fetch_catalog, fetch_request,
};
pub use kind::ModelKind;
pub use manifest::{FileEntry, Language, ModelEntry};
pub use name::{MAX_NAME_LEN, NameProblem, check_name};
pub use store::{
    AddOptions, DEFAULT_DIR, FileReport, Listing, Partial, Store, StoreError, Transfer,
    VerifyOutcome, VerifyReport, resolve,
};
