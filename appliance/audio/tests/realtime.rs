//! Real-time priority of the audio threads, on whatever machine the tests
//! run on: with the right to use `SCHED_FIFO` (root with `CAP_SYS_NICE`, or
//! an `RLIMIT_RTPRIO` high enough) the thread must really run under it at
//! that priority; without it the helper must return `EPERM`, not panic, and
//! leave the thread as it was.

use std::{
    sync::{Arc, atomic::AtomicBool},
    thread,
    time::{Duration, Instant},
};

use hark_audio::{
    Capture,
    capture::CaptureError,
    config::{CaptureConfig, PlaybackConfig},
    playback::Player,
    realtime,
};

/// `SCHED_FIFO` priority the tests ask for: low, and within the systemd
/// unit's `LimitRTPRIO=20`.
const PRIORITY: u8 = 5;

/// The calling thread's scheduling policy and priority.
fn current_policy() -> (libc::c_int, libc::c_int) {
    let mut policy = 0;
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both out-pointers are valid for the call; `pthread_self()` is
    // the calling thread.
    let rc = unsafe { libc::pthread_getschedparam(libc::pthread_self(), &mut policy, &mut param) };
    assert_eq!(rc, 0, "pthread_getschedparam");
    (policy, param.sched_priority)
}

/// The policy and priority of thread `tid` of this process.
fn policy_of(tid: libc::pid_t) -> (libc::c_int, libc::c_int) {
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: plain syscalls on a thread id; `param` is valid for the call.
    let (policy, rc) = unsafe {
        (
            libc::sched_getscheduler(tid),
            libc::sched_getparam(tid, &mut param),
        )
    };
    assert!(policy >= 0 && rc == 0, "cannot read thread {tid}'s policy");
    (policy, param.sched_priority)
}

/// Whether the kernel lets this process use `SCHED_FIFO` at `priority`:
/// `CAP_SYS_NICE` in the effective set, or `RLIMIT_RTPRIO` at least that
/// high (sched(7)). Root usually has the capability; a container may drop it.
fn may_use_realtime(priority: u8) -> bool {
    const CAP_SYS_NICE: u32 = 23;
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let cap_eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .expect("CapEff in /proc/self/status");
    if cap_eff & (1 << CAP_SYS_NICE) != 0 {
        return true;
    }
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is valid for the call.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut limit) };
    rc == 0 && limit.rlim_cur >= libc::rlim_t::from(priority)
}

#[test]
fn priority_zero_leaves_the_thread_alone() {
    thread::spawn(|| {
        let before = current_policy();
        realtime::set_current_thread(0).expect("0 never fails");
        assert_eq!(current_policy(), before);
        assert_eq!(before.0, libc::SCHED_OTHER);
    })
    .join()
    .expect("test thread");
}

#[test]
fn a_priority_is_applied_or_refused_with_eperm() {
    // A thread of its own: the policy must not leak into the test harness.
    thread::spawn(|| {
        let result = realtime::set_current_thread(PRIORITY);
        if may_use_realtime(PRIORITY) {
            // SAFETY: geteuid cannot fail.
            let euid = unsafe { libc::geteuid() };
            result.unwrap_or_else(|e| panic!("allowed to use SCHED_FIFO (euid {euid}): {e}"));
            assert_eq!(
                current_policy(),
                (libc::SCHED_FIFO, libc::c_int::from(PRIORITY))
            );
        } else {
            let err = result.expect_err("no right to SCHED_FIFO here");
            assert_eq!(err.priority, PRIORITY);
            assert_eq!(err.source.raw_os_error(), Some(libc::EPERM), "{err}");
            assert!(err.to_string().contains("priority 5"), "{err}");
            assert_eq!(current_policy().0, libc::SCHED_OTHER);
        }
    })
    .join()
    .expect("test thread");
}

#[test]
fn an_impossible_priority_is_an_error_not_a_panic() {
    thread::spawn(|| {
        let err = realtime::set_current_thread(100).expect_err("SCHED_FIFO stops at 99");
        assert_eq!(err.priority, 100);
        // EINVAL as root; EPERM when the range check comes after the
        // permission check.
        assert!(
            matches!(err.source.raw_os_error(), Some(libc::EINVAL | libc::EPERM)),
            "{err}"
        );
        assert_eq!(current_policy().0, libc::SCHED_OTHER);
    })
    .join()
    .expect("test thread");
}

/// The thread ids of this process's threads named `name`.
fn threads_named(name: &str) -> Vec<libc::pid_t> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let task = task.expect("task entry");
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name
            && let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok())
        {
            found.push(tid);
        }
    }
    found
}

/// Waits until the thread named `name` runs under `expected`.
fn wait_for_policy(name: &str, expected: (libc::c_int, libc::c_int)) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let tids = threads_named(name);
        if tids.iter().any(|&tid| policy_of(tid) == expected) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} ({tids:?}) never ran under {expected:?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// What an audio thread started with `realtime_priority = PRIORITY` must run
/// under here.
fn expected_audio_policy() -> (libc::c_int, libc::c_int) {
    if may_use_realtime(PRIORITY) {
        (libc::SCHED_FIFO, libc::c_int::from(PRIORITY))
    } else {
        (libc::SCHED_OTHER, 0)
    }
}

#[test]
fn the_capture_thread_runs_at_the_configured_priority() {
    // No device at all: the thread starts, fails to open and retries, which
    // is all this needs.
    let opener: hark_audio::capture::Opener = Box::new(|config: &CaptureConfig| {
        Err(CaptureError::Missing {
            device: config.device.clone(),
            reason: "not plugged in".into(),
        })
    });
    let capture = Capture::start_with(
        CaptureConfig {
            realtime_priority: PRIORITY,
            ..CaptureConfig::default()
        },
        Vec::new(),
        opener,
    )
    .expect("capture thread");
    wait_for_policy("hark-capture", expected_audio_policy());
    drop(capture);
}

#[test]
fn the_playback_thread_runs_at_the_configured_priority() {
    let player = Player::start(
        PlaybackConfig {
            device: "hark_test_no_such_device".into(),
            realtime_priority: PRIORITY,
            ..PlaybackConfig::default()
        },
        Arc::new(AtomicBool::new(false)),
    )
    .expect("playback thread");
    wait_for_policy("hark-playback", expected_audio_policy());
    drop(player);
}
