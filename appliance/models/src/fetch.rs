//! Downloading models into the store, with checksums and resume.
//!
//! A download goes to `<name>.part` in the models directory ([`PartFile`],
//! which other stores use for their own files). When a part is already
//! there (an earlier fetch was interrupted), the request asks for the rest
//! with `Range: bytes=<len>-`:
//!
//! | answer | meaning | what happens |
//! |---|---|---|
//! | 206 | the rest follows | appended to the part |
//! | 200 | the server ignores ranges | the part is emptied and the whole file written |
//! | 416 | nothing left to send | the part is taken as complete and verified; if the server's total says the part is longer than the file, it is discarded and the download starts over |
//!
//! A hidden `.<name>.part.json` beside the part (`.<file>.json` for any
//! [`PartFile`]) remembers the URL (and the
//! server's `ETag`, sent back as `If-Range`), so a part is only ever
//! continued from the URL, and the version of the file, it came from.
//!
//! When the download is complete its size, SHA-256, SHA-1 and MD5 are
//! checked against whatever is known (the model catalog knows the first
//! three, a `--url` fetch what the user gave, the voice catalog size and
//! MD5). A mismatch deletes the part: resuming a
//! wrong file cannot make it right. A download with no known checksum
//! is installed and reported as not verified, with the SHA-256 computed.
//! A failure before that (timeout, dropped connection, full disk) keeps
//! the part, and the next fetch of the same name resumes it.
//!
//! Nothing here retries by itself: the CLI user reruns the command.

use std::{
    fmt,
    fs::{self, File, OpenOptions},
    io::{self, IsTerminal, Read, Write},
    path::{Path, PathBuf},
    time::Duration,
};

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use tracing::{debug, info, instrument, warn};

use crate::{
    catalog,
    hash::{self, CHUNK, Digests, Extra, normalise_hex},
    manifest::ModelEntry,
    store::{Store, StoreError},
};

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The name is not in [`catalog::CATALOG`].
    #[error("`{name}` is not in the model catalog (known: {}); give a URL to fetch another model", .known.join(", "))]
    UnknownModel {
        name: String,
        known: Vec<&'static str>,
    },
    #[error("invalid sha256 `{0}`: expected 64 hexadecimal digits")]
    BadSha256(String),
    #[error("invalid URL `{0}`: only http:// and https:// URLs can be fetched")]
    BadUrl(String),
    /// DNS, connection refused, TLS, a malformed answer…
    #[error("cannot fetch {url}: {source}")]
    Request {
        url: String,
        #[source]
        source: ureq::Error,
    },
    #[error("{url}: {}", timeout_text(*.phase, *.limit))]
    Timeout {
        url: String,
        phase: ureq::Timeout,
        limit: Duration,
    },
    /// The server answered something other than 200, 206 or 416.
    #[error("{url} answered HTTP {status}{}", reason(*.status))]
    Status { url: String, status: u16 },
    /// A 206 for another range than the one asked for.
    #[error(
        "{url} sent the range `{content_range}` when asked for bytes {asked}-; the partial file {part} is kept"
    )]
    BadRange {
        url: String,
        asked: u64,
        content_range: String,
        part: PathBuf,
    },
    /// The body ended or failed part way; the part is kept for a resume.
    #[error(
        "the download of {url} was interrupted after {received} bytes ({source}); {part} is kept and running the same command again resumes it"
    )]
    Interrupted {
        url: String,
        received: u64,
        part: PathBuf,
        #[source]
        source: io::Error,
    },
    /// No data arrived for the stall timeout; the part is kept.
    #[error("the download of {url} stalled: nothing arrived for {}s after {received} bytes; {part} is kept and running the same command again resumes it", .limit.as_secs_f32())]
    Stalled {
        url: String,
        received: u64,
        part: PathBuf,
        limit: Duration,
    },
    /// Writing the part failed (a full disk, most likely); it is kept.
    #[error("cannot write the partial download {path}: {source}")]
    WritePart {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the finished download {path}: {source}")]
    ReadPart {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The file is not the one expected; the part was deleted.
    #[error(
        "{url} is not the expected file: its {algorithm} is {actual}, expected {expected}; the download was deleted"
    )]
    ChecksumMismatch {
        url: String,
        algorithm: &'static str,
        expected: String,
        actual: String,
    },
    /// The file has the wrong size; the part was deleted.
    #[error("{url} is {actual} bytes, expected {expected}; the download was deleted")]
    SizeMismatch {
        url: String,
        expected: u64,
        actual: u64,
    },
}

fn reason(status: u16) -> String {
    ureq::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" {r}"))
        .unwrap_or_default()
}

fn timeout_text(phase: ureq::Timeout, limit: Duration) -> String {
    let secs = limit.as_secs_f32();
    match phase {
        ureq::Timeout::Resolve | ureq::Timeout::Connect => {
            format!("could not connect within {secs}s")
        }
        ureq::Timeout::RecvResponse => format!("no answer within {secs}s"),
        ureq::Timeout::PerRead => format!("nothing arrived for {secs}s"),
        other => format!("timed out ({other})"),
    }
}

/// What a download must match. Unknown fields are not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expected {
    /// SHA-256, lowercase hex.
    pub sha256: Option<String>,
    /// SHA-1, lowercase hex.
    pub sha1: Option<String>,
    /// MD5, lowercase hex.
    pub md5: Option<String>,
    /// Size in bytes.
    pub size: Option<u64>,
}

/// One model to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// Its name in the store.
    pub name: String,
    pub url: String,
    pub expected: Expected,
}

impl FetchRequest {
    /// A catalog model under its catalog name, with the published size and
    /// checksums.
    pub fn catalog(name: &str) -> Result<Self, FetchError> {
        let model = catalog::find(name).ok_or_else(|| FetchError::UnknownModel {
            name: name.to_owned(),
            known: catalog::names().collect(),
        })?;
        Ok(Self {
            name: model.name.to_owned(),
            url: model.url(),
            expected: Expected {
                sha256: model.sha256.map(str::to_owned),
                sha1: model.sha1.map(str::to_owned),
                md5: None,
                size: Some(model.size),
            },
        })
    }

    /// Any http(s) URL, stored as `name`, checked against `sha256` if given.
    pub fn url(name: &str, url: &str, sha256: Option<&str>) -> Result<Self, FetchError> {
        crate::name::check_name(name).map_err(|problem| StoreError::BadName {
            name: name.to_owned(),
            problem,
        })?;
        check_url(url)?;
        Ok(Self {
            name: name.to_owned(),
            url: url.to_owned(),
            expected: Expected {
                sha256: parse_sha256(sha256)?,
                ..Expected::default()
            },
        })
    }
}

/// Refuses a URL that is not http(s), the only kinds fetched.
pub fn check_url(url: &str) -> Result<(), FetchError> {
    if url.starts_with("https://") || url.starts_with("http://") {
        Ok(())
    } else {
        Err(FetchError::BadUrl(url.to_owned()))
    }
}

/// A SHA-256 a user gave, as lowercase hex, or why it is not one.
pub fn parse_sha256(sha256: Option<&str>) -> Result<Option<String>, FetchError> {
    sha256
        .map(|h| normalise_hex(h, 64).ok_or_else(|| FetchError::BadSha256(h.to_owned())))
        .transpose()
}

/// How a fetch behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchOptions {
    /// Overwrite an installed model of the same name.
    pub replace: bool,
    /// Longest wait for DNS and for the TCP and TLS connection.
    pub connect_timeout: Duration,
    /// Longest wait for the response headers once the request is sent.
    pub response_timeout: Duration,
    /// Longest wait for the next bytes of the body. There is no limit on
    /// the whole download: a slow link is not a failure, a silent one is.
    pub stall_timeout: Duration,
}

impl Default for FetchOptions {
    fn default() -> Self {
        Self {
            replace: false,
            connect_timeout: Duration::from_secs(30),
            response_timeout: Duration::from_secs(60),
            stall_timeout: Duration::from_secs(60),
        }
    }
}

/// A step of a download, for [`Progress::Callback`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEvent {
    /// The server answered; `resumed_from` bytes were already there.
    /// `total` is the whole file's size when the server or catalog says.
    Started {
        total: Option<u64>,
        resumed_from: u64,
    },
    /// The server ignored the range request; the part was emptied.
    Restarted,
    /// The part now holds `bytes` bytes.
    Downloaded { bytes: u64 },
    /// The download is complete and being hashed.
    Verifying,
    /// The download is complete and matches what was expected (the caller
    /// installs it next).
    Finished,
}

/// Where progress goes.
pub enum Progress<'a> {
    /// Nowhere (the daemon, scripts).
    Silent,
    /// An indicatif bar on stderr with bytes, rate and ETA.
    Bar,
    /// Every event to a callback (tests, a status line elsewhere).
    Callback(&'a mut dyn FnMut(&ProgressEvent)),
}

impl Progress<'_> {
    /// The same destination for one more download, leaving `self` usable
    /// for the next: a voice is two files, each with its own bar.
    pub fn reborrow(&mut self) -> Progress<'_> {
        match self {
            Progress::Silent => Progress::Silent,
            Progress::Bar => Progress::Bar,
            Progress::Callback(f) => Progress::Callback(&mut **f),
        }
    }

    /// A bar if stderr is a terminal, otherwise nothing.
    pub fn for_terminal() -> Self {
        if io::stderr().is_terminal() {
            Progress::Bar
        } else {
            Progress::Silent
        }
    }
}

impl fmt::Debug for Progress<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Progress::Silent => "Silent",
            Progress::Bar => "Bar",
            Progress::Callback(_) => "Callback",
        })
    }
}

/// Turns events into the chosen kind of progress.
struct Reporter<'a> {
    progress: Progress<'a>,
    name: String,
    bar: Option<ProgressBar>,
}

impl Reporter<'_> {
    fn event(&mut self, event: ProgressEvent) {
        match &mut self.progress {
            Progress::Silent => {}
            Progress::Callback(f) => f(&event),
            Progress::Bar => self.draw(&event),
        }
    }

    fn draw(&mut self, event: &ProgressEvent) {
        match *event {
            ProgressEvent::Started {
                total,
                resumed_from,
            } => {
                let bar = match total {
                    Some(total) => ProgressBar::new(total).with_style(
                        ProgressStyle::with_template(
                            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} ETA {eta}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_bar())
                        .progress_chars("=> "),
                    ),
                    None => ProgressBar::new_spinner().with_style(
                        ProgressStyle::with_template("{msg} {spinner} {binary_bytes} {binary_bytes_per_sec}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    ),
                };
                let bar = bar.with_message(self.name.clone());
                // Bytes already on disk are not download speed: count them,
                // then restart the rate estimate from there.
                bar.set_position(resumed_from);
                bar.tick();
                bar.reset_eta();
                self.bar = Some(bar);
            }
            ProgressEvent::Restarted => {
                if let Some(bar) = &self.bar {
                    bar.set_position(0);
                }
            }
            ProgressEvent::Downloaded { bytes } => {
                if let Some(bar) = &self.bar {
                    bar.set_position(bytes);
                }
            }
            ProgressEvent::Verifying => {
                if let Some(bar) = &self.bar {
                    bar.set_message(format!("{} (verifying)", self.name));
                }
            }
            ProgressEvent::Finished => {
                if let Some(bar) = self.bar.take() {
                    bar.finish_and_clear();
                }
            }
        }
    }
}

/// Which checks a fetched file passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verification {
    pub sha256: bool,
    pub sha1: bool,
    pub md5: bool,
    pub size: bool,
}

impl Verification {
    /// At least one published checksum matched.
    pub fn is_verified(&self) -> bool {
        self.sha256 || self.sha1 || self.md5
    }

    /// The checksums that matched, e.g. `sha256 and sha1`; empty if none.
    pub fn matched(&self) -> String {
        let names: Vec<&str> = [
            (self.sha256, "sha256"),
            (self.sha1, "sha1"),
            (self.md5, "md5"),
        ]
        .into_iter()
        .filter_map(|(matched, name)| matched.then_some(name))
        .collect();
        names.join(" and ")
    }
}

/// A model fetched and installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub entry: ModelEntry,
    pub verification: Verification,
    /// Bytes that were already downloaded by an earlier fetch (0: none).
    pub resumed_from: u64,
}

impl fmt::Display for Fetched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = &self.entry;
        write!(f, "{}: {} bytes, sha256 {}", e.name, e.size, e.sha256)?;
        if self.verification.is_verified() {
            write!(f, ", matches the published {}", self.verification.matched())
        } else {
            write!(
                f,
                " — NOT verified: no checksum was given; compare this sha256 with one from a source you trust"
            )
        }
    }
}

/// Fetches `url` into `store` as `name`, checked against `expected_sha256`
/// if given. See [`fetch_request`].
pub fn fetch(
    url: &str,
    expected_sha256: Option<&str>,
    store: &Store,
    name: &str,
    progress: Progress<'_>,
) -> Result<Fetched, FetchError> {
    let request = FetchRequest::url(name, url, expected_sha256)?;
    fetch_request(store, &request, &FetchOptions::default(), progress)
}

/// Fetches the catalog model `name`. See [`fetch_request`].
pub fn fetch_catalog(
    store: &Store,
    name: &str,
    progress: Progress<'_>,
) -> Result<Fetched, FetchError> {
    let request = FetchRequest::catalog(name)?;
    fetch_request(store, &request, &FetchOptions::default(), progress)
}

/// Downloads `request.url` to `<name>.part` (resuming one that is there),
/// checks it against `request.expected`, and adds it to `store`.
#[instrument(skip_all, fields(model = %request.name, url = %request.url))]
pub fn fetch_request(
    store: &Store,
    request: &FetchRequest,
    options: &FetchOptions,
    progress: Progress<'_>,
) -> Result<Fetched, FetchError> {
    // Before any download: an installed model is refused now, not after
    // half a gigabyte.
    store.refuse_overwrite(&request.name, options.replace)?;
    let part = PartFile::new(store.part_path(&request.name)?);
    let downloaded = part.download(
        &request.url,
        &request.expected,
        options,
        &request.name,
        progress,
    )?;
    let entry = store
        .install_part(
            &request.name,
            part.path(),
            &downloaded.digests,
            &request.url,
            options.replace,
        )
        .inspect_err(|e| {
            // A web page saved in place of a model is not worth resuming.
            if matches!(e, StoreError::NotAModel { .. }) {
                part.discard();
            }
        })?;
    part.forget();
    let verification = downloaded.verification;
    if !verification.is_verified() {
        warn!(sha256 = %entry.sha256, "no checksum to verify the download against");
    }
    info!(size = entry.size, sha256 = %entry.sha256, verified = verification.is_verified(), resumed_from = downloaded.resumed_from, "model fetched");
    Ok(Fetched {
        entry,
        verification,
        resumed_from: downloaded.resumed_from,
    })
}

/// Compares a finished download with what was expected.
fn check(url: &str, expected: &Expected, digests: &Digests) -> Result<Verification, FetchError> {
    if let Some(size) = expected.size
        && size != digests.size
    {
        return Err(FetchError::SizeMismatch {
            url: url.to_owned(),
            expected: size,
            actual: digests.size,
        });
    }
    for (algorithm, want, got) in [
        ("sha256", &expected.sha256, Some(&digests.sha256)),
        ("sha1", &expected.sha1, digests.sha1.as_ref()),
        ("md5", &expected.md5, digests.md5.as_ref()),
    ] {
        if let Some(want) = want
            && Some(want) != got
        {
            return Err(FetchError::ChecksumMismatch {
                url: url.to_owned(),
                algorithm,
                expected: want.clone(),
                actual: got.cloned().unwrap_or_default(),
            });
        }
    }
    Ok(Verification {
        sha256: expected.sha256.is_some(),
        sha1: expected.sha1.is_some(),
        md5: expected.md5.is_some(),
        size: expected.size.is_some(),
    })
}

/// A file being downloaded, and the record of where it came from: a
/// hidden `.<file name>.json` beside it, so listings skip the record.
///
/// The part is the download itself: once [`PartFile::download`] succeeds
/// the complete, verified file is at [`PartFile::path`] and the caller
/// renames it into place (then calls [`PartFile::forget`]).
#[derive(Debug, Clone)]
pub struct PartFile {
    path: PathBuf,
    info_path: PathBuf,
}

/// What `.<name>.part.json` holds.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct PartInfo {
    url: String,
    /// A strong `ETag` of the response the part started from.
    etag: Option<String>,
}

/// A download [`PartFile::download`] completed and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    /// SHA-256 and size, plus whichever of SHA-1 and MD5 was expected.
    pub digests: Digests,
    pub verification: Verification,
    /// Bytes that were already downloaded by an earlier attempt (0: none).
    pub resumed_from: u64,
}

impl PartFile {
    /// The part at `path`. Its directory must exist; the final file should
    /// be in the same one, so that moving it there is a rename.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let info_path = path.with_file_name(format!(".{file_name}.json"));
        Self { path, info_path }
    }

    /// Where the download is written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Downloads `url` into the part, resuming what an earlier attempt at
    /// the same URL left, and checks the complete file against `expected`.
    /// A mismatch deletes the part; any other failure keeps it for the next
    /// attempt. `label` names the download on the progress bar.
    pub fn download(
        &self,
        url: &str,
        expected: &Expected,
        options: &FetchOptions,
        label: &str,
        progress: Progress<'_>,
    ) -> Result<Downloaded, FetchError> {
        let mut reporter = Reporter {
            progress,
            name: label.to_owned(),
            bar: None,
        };
        let resumed_from = download(url, expected, options, self, &mut reporter)?;

        reporter.event(ProgressEvent::Verifying);
        let extra = Extra {
            sha1: expected.sha1.is_some(),
            md5: expected.md5.is_some(),
        };
        let digests =
            hash::hash_file_with(&self.path, extra).map_err(|source| FetchError::ReadPart {
                path: self.path.clone(),
                source,
            })?;
        let verification = check(url, expected, &digests).inspect_err(|_| self.discard())?;
        reporter.event(ProgressEvent::Finished);
        Ok(Downloaded {
            digests,
            verification,
            resumed_from,
        })
    }

    /// The bytes already downloaded from `url`, and the ETag they came
    /// with. A part from another URL, or without a record, is discarded:
    /// appending to it would splice two files.
    fn resume_point(&self, url: &str) -> (u64, Option<String>) {
        let len = match fs::metadata(&self.path) {
            Ok(meta) => meta.len(),
            Err(_) => return (0, None),
        };
        let info: Option<PartInfo> = fs::read(&self.info_path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        match info {
            Some(info) if info.url == url => (len, info.etag),
            _ => {
                if len > 0 {
                    info!(part = %self.path.display(), "discarding a partial download of another URL");
                }
                self.discard();
                (0, None)
            }
        }
    }

    fn remember(&self, info: &PartInfo) -> Result<(), FetchError> {
        let write = || -> io::Result<()> {
            let json = serde_json::to_vec(info).map_err(io::Error::other)?;
            fs::write(&self.info_path, json)
        };
        write().map_err(|source| FetchError::WritePart {
            path: self.info_path.clone(),
            source,
        })
    }

    /// Deletes the part and its record.
    pub fn discard(&self) {
        for path in [&self.path, &self.info_path] {
            if let Err(e) = fs::remove_file(path)
                && e.kind() != io::ErrorKind::NotFound
            {
                warn!(path = %path.display(), error = %e, "cannot delete a partial download");
            }
        }
    }

    /// Drops the record once the part has been installed.
    pub fn forget(&self) {
        let _ = fs::remove_file(&self.info_path);
    }
}

/// `Content-Range: bytes START-END/TOTAL` or `bytes */TOTAL` as
/// (START, TOTAL); `None` if it is malformed.
fn content_range(value: &str) -> Option<(Option<u64>, Option<u64>)> {
    let rest = value.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse().ok()?),
    };
    let start = match range.trim() {
        "*" => None,
        r => Some(r.split_once('-')?.0.trim().parse().ok()?),
    };
    Some((start, total))
}

fn header<'r>(response: &'r ureq::http::Response<ureq::Body>, name: &str) -> Option<&'r str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

fn agent(options: &FetchOptions) -> ureq::Agent {
    ureq::Agent::config_builder()
        // 206 and 416 are answers to handle, not errors.
        .http_status_as_error(false)
        .timeout_resolve(Some(options.connect_timeout))
        .timeout_connect(Some(options.connect_timeout))
        .timeout_recv_response(Some(options.response_timeout))
        .timeout_per_read(Some(options.stall_timeout))
        // Byte ranges must count bytes of the file, not of a compressed
        // stream, so no content coding is offered.
        .accept_encoding(ureq::config::AutoHeaderValue::None)
        .user_agent(concat!("hark/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

fn request_error(url: &str, error: ureq::Error, options: &FetchOptions) -> FetchError {
    match error {
        ureq::Error::Timeout(phase) => FetchError::Timeout {
            url: url.to_owned(),
            phase,
            limit: match phase {
                ureq::Timeout::Resolve | ureq::Timeout::Connect => options.connect_timeout,
                ureq::Timeout::PerRead => options.stall_timeout,
                _ => options.response_timeout,
            },
        },
        source => FetchError::Request {
            url: url.to_owned(),
            source,
        },
    }
}

/// Brings `part` to the complete file; returns how many bytes were
/// already there from an earlier fetch.
fn download(
    url: &str,
    expected: &Expected,
    options: &FetchOptions,
    part: &PartFile,
    reporter: &mut Reporter<'_>,
) -> Result<u64, FetchError> {
    let agent = agent(options);
    let (mut offset, mut etag) = part.resume_point(url);
    if let Some(size) = expected.size
        && offset > size
    {
        info!(
            offset,
            size, "the partial download is longer than the file; starting over"
        );
        part.discard();
        (offset, etag) = (0, None);
    }
    // What an earlier fetch left and this one used; zero once the part
    // is emptied.
    let mut resumed_from = offset;

    // Runs once, or twice when the first answer shows the part cannot be
    // continued (a 416 for a shorter file); the second round has no part.
    loop {
        let mut call = agent.get(url);
        if offset > 0 {
            debug!(offset, "resuming");
            call = call.header("Range", format!("bytes={offset}-"));
            if let Some(etag) = &etag {
                // The server sends the whole (new) file if this changed.
                call = call.header("If-Range", etag);
            }
        }
        let response = call.call().map_err(|e| request_error(url, e, options))?;
        let status = response.status().as_u16();
        let range = header(&response, "content-range").map(str::to_owned);

        let append = match status {
            416 if offset > 0 => {
                let total = range
                    .as_deref()
                    .and_then(content_range)
                    .and_then(|(_, t)| t);
                match total {
                    Some(total) if total < offset => {
                        info!(
                            offset,
                            total, "the partial download is longer than the file; starting over"
                        );
                        part.discard();
                        (offset, etag, resumed_from) = (0, None, 0);
                        continue;
                    }
                    // Nothing left to fetch: the part is the whole file
                    // (checked next).
                    _ => return Ok(resumed_from),
                }
            }
            200 => {
                if offset > 0 {
                    info!(
                        offset,
                        "the server ignored the range; downloading the whole file"
                    );
                    reporter.event(ProgressEvent::Restarted);
                }
                false
            }
            206 => {
                let start = range
                    .as_deref()
                    .map(|r| content_range(r).and_then(|(s, _)| s));
                match start {
                    // A server may leave Content-Range out; trust it then.
                    None => {}
                    Some(Some(start)) if start == offset => {}
                    Some(_) => {
                        return Err(FetchError::BadRange {
                            url: url.to_owned(),
                            asked: offset,
                            content_range: range.unwrap_or_default(),
                            part: part.path.clone(),
                        });
                    }
                }
                offset > 0
            }
            _ => {
                return Err(FetchError::Status {
                    url: url.to_owned(),
                    status,
                });
            }
        };
        if !append {
            (offset, resumed_from) = (0, 0);
            // A strong ETag lets a later resume prove the file is unchanged;
            // a weak one (W/…) does not, and is not kept.
            etag = header(&response, "etag")
                .filter(|e| !e.starts_with("W/"))
                .map(str::to_owned);
            part.remember(&PartInfo {
                url: url.to_owned(),
                etag: etag.clone(),
            })?;
        }

        // The whole file's size, as far as anyone says.
        let length = response.body().content_length();
        let server_total = match status {
            206 => range
                .as_deref()
                .and_then(content_range)
                .and_then(|(_, t)| t)
                .or(length.map(|l| offset + l)),
            _ => length,
        };
        reporter.event(ProgressEvent::Started {
            total: server_total.or(expected.size),
            resumed_from: offset,
        });

        let received = receive(response, part, append, offset, options, url, reporter)?;
        if let Some(total) = server_total
            && received < total
        {
            return Err(FetchError::Interrupted {
                url: url.to_owned(),
                received,
                part: part.path.clone(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the connection closed at {received} of {total} bytes"),
                ),
            });
        }
        return Ok(resumed_from);
    }
}

/// Writes the body to the part; returns the part's length.
fn receive(
    response: ureq::http::Response<ureq::Body>,
    part: &PartFile,
    append: bool,
    offset: u64,
    options: &FetchOptions,
    url: &str,
    reporter: &mut Reporter<'_>,
) -> Result<u64, FetchError> {
    let write_err = |source| FetchError::WritePart {
        path: part.path.clone(),
        source,
    };
    let mut file = open_part(&part.path, append).map_err(write_err)?;
    let mut body = response.into_body().into_reader();
    let mut buf = vec![0u8; CHUNK];
    let mut have = offset;
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Keep what arrived for the next attempt.
                let _ = file.sync_all();
                let stalled = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<ureq::Error>())
                    .is_some_and(|inner| matches!(inner, ureq::Error::Timeout(_)));
                return Err(if stalled {
                    FetchError::Stalled {
                        url: url.to_owned(),
                        received: have,
                        part: part.path.clone(),
                        limit: options.stall_timeout,
                    }
                } else {
                    FetchError::Interrupted {
                        url: url.to_owned(),
                        received: have,
                        part: part.path.clone(),
                        source: e,
                    }
                });
            }
        };
        file.write_all(&buf[..n]).map_err(write_err)?;
        have += n as u64;
        reporter.event(ProgressEvent::Downloaded { bytes: have });
    }
    file.sync_all().map_err(write_err)?;
    Ok(have)
}

fn open_part(path: &Path, append: bool) -> io::Result<File> {
    if append {
        OpenOptions::new().append(true).open(path)
    } else {
        File::create(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges() {
        assert_eq!(
            content_range("bytes 100-199/200"),
            Some((Some(100), Some(200)))
        );
        assert_eq!(content_range("bytes 0-9/*"), Some((Some(0), None)));
        assert_eq!(content_range("bytes */300"), Some((None, Some(300))));
        assert_eq!(content_range("bytes=1-2/3"), None);
        assert_eq!(content_range("items 1-2/3"), None);
        assert_eq!(content_range("bytes x-2/3"), None);
    }

    #[test]
    fn requests_are_checked() {
        assert!(matches!(
            FetchRequest::catalog("huge"),
            Err(FetchError::UnknownModel { known, .. }) if known.contains(&"tiny.en")
        ));
        let r = FetchRequest::catalog("tiny.en").unwrap();
        assert_eq!(r.expected.size, Some(77_704_715));
        assert!(r.expected.sha256.is_some() && r.expected.sha1.is_some());
        assert!(matches!(
            FetchRequest::url("x", "ftp://example.com/m.bin", None),
            Err(FetchError::BadUrl(_))
        ));
        assert!(matches!(
            FetchRequest::url("x", "https://example.com/m.bin", Some("abc")),
            Err(FetchError::BadSha256(_))
        ));
        assert!(matches!(
            FetchRequest::url("../x", "https://example.com/m.bin", None),
            Err(FetchError::Store(StoreError::BadName { .. }))
        ));
        let r =
            FetchRequest::url("x", "https://example.com/m.bin", Some(&"AB".repeat(32))).unwrap();
        assert_eq!(r.expected.sha256, Some("ab".repeat(32)));
    }

    #[test]
    fn status_messages_name_url_and_reason() {
        let e = FetchError::Status {
            url: "http://h/m.bin".into(),
            status: 404,
        };
        assert_eq!(e.to_string(), "http://h/m.bin answered HTTP 404 Not Found");
    }
}
