//! Downloads over real HTTP on loopback: checksums, resume, restarts,
//! errors. See `common` for the server.

mod common;

use std::{fs, time::Duration};

use common::{
    Behaviour, EN_VOCAB, F16, MULTI_VOCAB, Q8_0, Server, dir_names, fake_model, md5_hex, sha1_hex,
    sha256_hex,
};
use hark_models::{
    Expected, FetchError, FetchOptions, FetchRequest, Language, Progress, ProgressEvent, Store,
    StoreError, fetch, fetch_request,
};

/// Larger than the 256 KiB read size, so a body takes several reads.
const LEN: usize = 700_000;

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("models")).unwrap();
    (dir, store)
}

fn serve(body: &[u8]) -> Server {
    Server::start(Behaviour {
        body: body.to_vec(),
        ..Behaviour::default()
    })
}

fn installed(store: &Store, name: &str) -> Vec<u8> {
    fs::read(store.path(name).unwrap()).unwrap()
}

/// A fetch that records its progress events.
fn fetch_recording(
    store: &Store,
    request: &FetchRequest,
    options: &FetchOptions,
) -> (Result<hark_models::Fetched, FetchError>, Vec<ProgressEvent>) {
    let mut events = Vec::new();
    let mut record = |e: &ProgressEvent| events.push(e.clone());
    let result = fetch_request(store, request, options, Progress::Callback(&mut record));
    (result, events)
}

#[test]
fn full_download_with_matching_sha256_is_installed() {
    let body = fake_model(LEN, EN_VOCAB, Q8_0, 1);
    let server = serve(&body);
    let (_dir, store) = store();
    let url = server.url("/ggml-tiny.en-q8_0.bin");

    let fetched = fetch(
        &url,
        Some(&sha256_hex(&body)),
        &store,
        "tiny.en-q8_0",
        Progress::Silent,
    )
    .unwrap();

    assert!(fetched.verification.sha256 && fetched.verification.is_verified());
    assert_eq!(fetched.resumed_from, 0);
    assert_eq!(installed(&store, "tiny.en-q8_0"), body);
    let e = store.get("tiny.en-q8_0").unwrap();
    assert_eq!(e, fetched.entry);
    assert_eq!(
        (e.size, e.sha256.as_str()),
        (LEN as u64, sha256_hex(&body).as_str())
    );
    assert_eq!(
        (e.language, e.quantisation.as_str()),
        (Language::En, "q8_0")
    );
    assert_eq!(e.source, url);
    // Nothing but the model and the manifest: no part, no part record.
    assert_eq!(
        dir_names(store.dir()),
        ["ggml-tiny.en-q8_0.bin", "manifest.json"]
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].range, None);
    assert!(fetched.to_string().contains("matches the published sha256"));
}

#[test]
fn sha256_mismatch_is_an_error_and_leaves_nothing() {
    let body = fake_model(LEN, EN_VOCAB, F16, 2);
    let server = serve(&body);
    let (_dir, store) = store();
    let url = server.url("/m.bin");
    let wrong = "0".repeat(64);

    let err = fetch(&url, Some(&wrong), &store, "m", Progress::Silent).unwrap_err();

    let actual = sha256_hex(&body);
    match &err {
        FetchError::ChecksumMismatch {
            algorithm,
            expected,
            actual: got,
            ..
        } => {
            assert_eq!(
                (*algorithm, expected.as_str(), got.as_str()),
                ("sha256", wrong.as_str(), actual.as_str())
            );
        }
        other => panic!("expected a checksum mismatch, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&wrong) && message.contains(&actual) && message.contains(&url),
        "{message}"
    );
    assert!(matches!(store.get("m"), Err(StoreError::NotFound { .. })));
    assert!(
        dir_names(store.dir()).is_empty(),
        "{:?}",
        dir_names(store.dir())
    );
}

#[test]
fn interrupted_download_resumes_with_a_range_request() {
    let body = fake_model(LEN, MULTI_VOCAB, F16, 3);
    let cut = 300_000;
    let server = Server::start(Behaviour {
        body: body.clone(),
        drop_after: Some(cut),
        faults: 1,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let request = FetchRequest::url("m", &server.url("/m.bin"), Some(&sha256_hex(&body))).unwrap();

    let (first, _) = fetch_recording(&store, &request, &FetchOptions::default());
    match first {
        Err(FetchError::Interrupted { received, part, .. }) => {
            assert_eq!(received, cut as u64);
            assert_eq!(fs::read(&part).unwrap(), body[..cut]);
        }
        other => panic!("expected an interruption, got {other:?}"),
    }
    assert_eq!(store.list().unwrap().partial[0].bytes, cut as u64);

    let (second, events) = fetch_recording(&store, &request, &FetchOptions::default());
    let fetched = second.unwrap();

    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[1].range.as_deref(),
        Some(format!("bytes={cut}-").as_str())
    );
    assert_eq!(seen[1].status, 206);
    assert_eq!(fetched.resumed_from, cut as u64);
    assert_eq!(installed(&store, "m"), body, "the resumed file differs");
    assert_eq!(
        events.first(),
        Some(&ProgressEvent::Started {
            total: Some(LEN as u64),
            resumed_from: cut as u64
        })
    );
    assert!(events.contains(&ProgressEvent::Downloaded { bytes: LEN as u64 }));
    assert_eq!(
        &events[events.len() - 2..],
        [ProgressEvent::Verifying, ProgressEvent::Finished]
    );
    assert_eq!(dir_names(store.dir()), ["ggml-m.bin", "manifest.json"]);
}

#[test]
fn a_server_that_ignores_range_gets_a_fresh_download() {
    let body = fake_model(LEN, EN_VOCAB, F16, 4);
    let server = Server::start(Behaviour {
        body: body.clone(),
        drop_after: Some(123_456),
        faults: 1,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let request = FetchRequest::url("m", &server.url("/m.bin"), Some(&sha256_hex(&body))).unwrap();
    assert!(matches!(
        fetch_recording(&store, &request, &FetchOptions::default()).0,
        Err(FetchError::Interrupted { .. })
    ));

    server.set(|b| b.ignore_range = true);
    let (result, events) = fetch_recording(&store, &request, &FetchOptions::default());
    let fetched = result.unwrap();

    let seen = server.seen();
    assert_eq!(seen[1].range.as_deref(), Some("bytes=123456-"));
    assert_eq!(seen[1].status, 200);
    assert!(events.contains(&ProgressEvent::Restarted));
    assert_eq!(fetched.resumed_from, 0, "nothing of the old part was used");
    assert_eq!(installed(&store, "m"), body);
}

#[test]
fn a_part_that_is_already_whole_is_finished_by_a_416() {
    // The connection drops just as the last byte arrives: the body is all
    // there, but Content-Length promised more, so the fetch fails.
    let body = fake_model(LEN, EN_VOCAB, F16, 5);
    let server = Server::start(Behaviour {
        body: body.clone(),
        overstate_length: 10,
        faults: 1,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let request = FetchRequest::url("m", &server.url("/m.bin"), Some(&sha256_hex(&body))).unwrap();
    assert!(matches!(
        fetch_recording(&store, &request, &FetchOptions::default()).0,
        Err(FetchError::Interrupted { received, .. }) if received == LEN as u64
    ));

    let fetched = fetch_recording(&store, &request, &FetchOptions::default())
        .0
        .unwrap();

    let seen = server.seen();
    assert_eq!(
        seen[1].range.as_deref(),
        Some(format!("bytes={LEN}-").as_str())
    );
    assert_eq!(seen[1].status, 416);
    assert_eq!(fetched.resumed_from, LEN as u64);
    assert_eq!(installed(&store, "m"), body);
}

#[test]
fn a_part_longer_than_the_file_starts_over() {
    // Interrupted at 500 kB; meanwhile the file shrank to 300 kB. The 416
    // says so, and the whole (new) file is fetched.
    let old = fake_model(LEN, EN_VOCAB, F16, 6);
    let server = Server::start(Behaviour {
        body: old,
        drop_after: Some(500_000),
        faults: 1,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let url = server.url("/m.bin");
    assert!(fetch(&url, None, &store, "m", Progress::Silent).is_err());

    let new = fake_model(300_000, EN_VOCAB, F16, 7);
    server.set(|b| b.body = new.clone());
    let fetched = fetch(&url, None, &store, "m", Progress::Silent).unwrap();

    let statuses: Vec<u16> = server.seen().iter().map(|s| s.status).collect();
    assert_eq!(statuses, [200, 416, 200]);
    assert_eq!(server.seen()[2].range, None);
    assert_eq!(fetched.resumed_from, 0);
    assert_eq!(installed(&store, "m"), new);
}

#[test]
fn resume_follows_a_redirect_with_its_range() {
    // Hugging Face answers /resolve/ with a redirect to its CDN.
    let body = fake_model(LEN, EN_VOCAB, F16, 8);
    let server = Server::start(Behaviour {
        body: body.clone(),
        drop_after: Some(200_000),
        faults: 1,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let url = server.url("/redirect");
    assert!(
        fetch(
            &url,
            Some(&sha256_hex(&body)),
            &store,
            "m",
            Progress::Silent
        )
        .is_err()
    );
    fetch(
        &url,
        Some(&sha256_hex(&body)),
        &store,
        "m",
        Progress::Silent,
    )
    .unwrap();

    let seen = server.seen();
    let paths: Vec<&str> = seen.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(
        paths,
        ["/redirect", "/model.bin", "/redirect", "/model.bin"]
    );
    assert_eq!(seen[3].range.as_deref(), Some("bytes=200000-"));
    assert_eq!(seen[3].status, 206);
    assert_eq!(installed(&store, "m"), body);
}

#[test]
fn a_changed_file_is_not_spliced_onto_an_old_part() {
    // The server's ETag goes back as If-Range; a new ETag means the server
    // sends the whole new file, not the tail of it.
    let old = fake_model(LEN, EN_VOCAB, F16, 9);
    let server = Server::start(Behaviour {
        body: old,
        drop_after: Some(250_000),
        faults: 1,
        etag: Some("\"v1\"".into()),
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let url = server.url("/m.bin");
    assert!(fetch(&url, None, &store, "m", Progress::Silent).is_err());

    let new = fake_model(LEN, EN_VOCAB, F16, 10);
    server.set(|b| {
        b.body = new.clone();
        b.etag = Some("\"v2\"".into());
    });
    fetch(&url, None, &store, "m", Progress::Silent).unwrap();

    let seen = server.seen();
    assert_eq!(seen[1].if_range.as_deref(), Some("\"v1\""));
    assert_eq!(seen[1].status, 200);
    assert_eq!(installed(&store, "m"), new);
}

#[test]
fn a_part_from_another_url_is_not_resumed() {
    let body = fake_model(LEN, EN_VOCAB, F16, 11);
    let server = Server::start(Behaviour {
        body: body.clone(),
        drop_after: Some(100_000),
        faults: 1,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    assert!(fetch(&server.url("/a.bin"), None, &store, "m", Progress::Silent).is_err());
    fetch(&server.url("/b.bin"), None, &store, "m", Progress::Silent).unwrap();
    assert_eq!(server.seen()[1].range, None);
    assert_eq!(installed(&store, "m"), body);
}

#[test]
fn http_errors_name_the_url_and_the_status() {
    for status in [404, 500] {
        let server = Server::start(Behaviour {
            status: Some(status),
            ..Behaviour::default()
        });
        let (_dir, store) = store();
        let url = server.url("/ggml-nope.bin");
        let err = fetch(&url, None, &store, "nope", Progress::Silent).unwrap_err();
        assert!(
            matches!(&err, FetchError::Status { url: u, status: s } if *u == url && *s == status),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&url) && message.contains(&status.to_string()),
            "{message}"
        );
        assert!(
            dir_names(store.dir()).is_empty(),
            "{:?}",
            dir_names(store.dir())
        );
    }
}

#[test]
fn a_download_without_a_checksum_is_installed_as_unverified() {
    let body = fake_model(LEN, MULTI_VOCAB, Q8_0, 12);
    let server = serve(&body);
    let (_dir, store) = store();
    // The terminal bar's code path (drawn nowhere: stderr is not a terminal
    // under the test harness).
    let fetched = fetch(&server.url("/m.bin"), None, &store, "m", Progress::Bar).unwrap();
    assert!(!fetched.verification.is_verified());
    assert_eq!(fetched.entry.sha256, sha256_hex(&body));
    let summary = fetched.to_string();
    assert!(
        summary.contains("NOT verified") && summary.contains(&sha256_hex(&body)),
        "{summary}"
    );
}

#[test]
fn size_sha1_and_md5_are_checked_when_known() {
    let body = fake_model(LEN, EN_VOCAB, F16, 13);
    let server = serve(&body);
    let (_dir, store) = store();
    let request = |expected| FetchRequest {
        name: "m".into(),
        url: server.url("/m.bin"),
        expected,
    };
    let options = FetchOptions::default();

    let err = fetch_recording(
        &store,
        &request(Expected {
            size: Some(LEN as u64 + 1),
            ..Expected::default()
        }),
        &options,
    )
    .0
    .unwrap_err();
    assert!(
        matches!(err, FetchError::SizeMismatch { expected, actual, .. } if expected == LEN as u64 + 1 && actual == LEN as u64)
    );

    let wrong_sha1 = Expected {
        sha1: Some("f".repeat(40)),
        ..Expected::default()
    };
    let wrong_md5 = Expected {
        md5: Some("0".repeat(32)),
        ..Expected::default()
    };
    for (expected, algorithm, digest) in [
        (wrong_sha1, "sha1", sha1_hex(&body)),
        (wrong_md5, "md5", md5_hex(&body)),
    ] {
        let err = fetch_recording(&store, &request(expected), &options)
            .0
            .unwrap_err();
        assert!(
            matches!(
                &err,
                FetchError::ChecksumMismatch { algorithm: a, actual, .. } if *a == algorithm && *actual == digest
            ),
            "{err:?}"
        );
        assert!(dir_names(store.dir()).is_empty());
    }

    let fetched = fetch_recording(
        &store,
        &request(Expected {
            sha256: Some(sha256_hex(&body)),
            sha1: Some(sha1_hex(&body)),
            md5: Some(md5_hex(&body)),
            size: Some(LEN as u64),
        }),
        &options,
    )
    .0
    .unwrap();
    let v = fetched.verification;
    assert!(v.sha256 && v.sha1 && v.md5 && v.size);
    assert!(
        fetched
            .to_string()
            .contains("matches the published sha256 and sha1 and md5"),
        "{fetched}"
    );
}

#[test]
fn a_web_page_is_not_installed_as_a_model() {
    let page = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>\n".repeat(10);
    let server = serve(&page);
    let (_dir, store) = store();
    let err = fetch(&server.url("/m.bin"), None, &store, "m", Progress::Silent).unwrap_err();
    assert!(
        matches!(err, FetchError::Store(StoreError::NotAModel { .. })),
        "{err:?}"
    );
    assert!(
        dir_names(store.dir()).is_empty(),
        "{:?}",
        dir_names(store.dir())
    );
}

#[test]
fn an_installed_model_is_refused_before_downloading() {
    let body = fake_model(LEN, EN_VOCAB, F16, 14);
    let server = serve(&body);
    let (_dir, store) = store();
    let request = FetchRequest::url("m", &server.url("/m.bin"), None).unwrap();
    fetch_recording(&store, &request, &FetchOptions::default())
        .0
        .unwrap();

    let err = fetch_recording(&store, &request, &FetchOptions::default())
        .0
        .unwrap_err();
    assert!(
        matches!(err, FetchError::Store(StoreError::Exists { .. })),
        "{err:?}"
    );
    assert_eq!(server.seen().len(), 1, "no second download");

    let newer = fake_model(LEN, EN_VOCAB, F16, 15);
    server.set(|b| b.body = newer.clone());
    let replace = FetchOptions {
        replace: true,
        ..FetchOptions::default()
    };
    fetch_recording(&store, &request, &replace).0.unwrap();
    assert_eq!(installed(&store, "m"), newer);
}

#[test]
fn a_silent_server_times_out_with_the_url() {
    let server = Server::start(Behaviour {
        stall: true,
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let url = server.url("/m.bin");
    let options = FetchOptions {
        response_timeout: Duration::from_millis(300),
        ..FetchOptions::default()
    };
    let request = FetchRequest::url("m", &url, None).unwrap();
    let err = fetch_recording(&store, &request, &options).0.unwrap_err();
    assert!(
        matches!(
            err,
            FetchError::Timeout {
                phase: ureq::Timeout::RecvResponse,
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&url) && message.contains("no answer"),
        "{message}"
    );
}

#[test]
fn a_stalled_body_keeps_its_part() {
    let body = fake_model(LEN, EN_VOCAB, F16, 16);
    let server = Server::start(Behaviour {
        body,
        stall_after: Some(100_000),
        ..Behaviour::default()
    });
    let (_dir, store) = store();
    let options = FetchOptions {
        stall_timeout: Duration::from_millis(300),
        ..FetchOptions::default()
    };
    let request = FetchRequest::url("m", &server.url("/m.bin"), None).unwrap();
    let err = fetch_recording(&store, &request, &options).0.unwrap_err();
    match err {
        FetchError::Stalled { received, part, .. } => {
            assert_eq!(received, 100_000);
            assert_eq!(fs::metadata(part).unwrap().len(), 100_000);
        }
        other => panic!("expected a stall, got {other:?}"),
    }
}

#[test]
fn a_refused_connection_names_the_url() {
    // A port that was just free: nothing listens there any more.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_dir, store) = store();
    let url = format!("http://127.0.0.1:{port}/m.bin");
    let err = fetch(&url, None, &store, "m", Progress::Silent).unwrap_err();
    assert!(
        matches!(&err, FetchError::Request { url: u, .. } if *u == url),
        "{err:?}"
    );
    assert!(err.to_string().contains(&url), "{err}");
    assert!(dir_names(store.dir()).is_empty());
}
