//! Patterns, the status → light mapping, and the LED thread on the
//! simulated LEDs.

use std::time::{Duration, Instant};

use hark_board::{
    led::{Light, Lights, Pattern, Rgb},
    sim::SimLeds,
    status::{Activity, Countdown, LedRoles, Status, light, light_at},
};

const C: Rgb = Rgb(200, 100, 50);

fn frame(pattern: Pattern, n: usize, ms: u64) -> Vec<Rgb> {
    let mut out = vec![Rgb(1, 1, 1); n];
    pattern.frame(Duration::from_millis(ms), &mut out);
    out
}

fn brightest(frame: &[Rgb]) -> usize {
    frame
        .iter()
        .enumerate()
        .max_by_key(|(_, c)| u16::from(c.0) + u16::from(c.1) + u16::from(c.2))
        .map_or(0, |(i, _)| i)
}

#[test]
fn off_and_solid() {
    assert_eq!(frame(Pattern::Off, 3, 0), vec![Rgb::OFF; 3]);
    assert_eq!(frame(Pattern::Solid { color: C }, 3, 12345), vec![C; 3]);
    assert!(!Pattern::Solid { color: C }.animated());
}

#[test]
fn blink_is_on_for_the_first_half_of_each_period() {
    let blink = Pattern::Blink {
        color: C,
        period_ms: 1000,
    };
    assert!(blink.animated());
    assert_eq!(frame(blink, 2, 0), vec![C; 2]);
    assert_eq!(frame(blink, 2, 499), vec![C; 2]);
    assert_eq!(frame(blink, 2, 500), vec![Rgb::OFF; 2]);
    assert_eq!(frame(blink, 2, 999), vec![Rgb::OFF; 2]);
    assert_eq!(frame(blink, 2, 3000), vec![C; 2], "periodic");
}

#[test]
fn pulse_rises_to_full_and_never_goes_dark() {
    let pulse = Pattern::Pulse {
        color: Rgb(200, 0, 0),
        period_ms: 1000,
    };
    let at = |ms| frame(pulse, 1, ms)[0].0;
    assert_eq!(at(500), 200, "full at half period");
    assert!(
        at(0) > 0 && at(0) < 50,
        "dim but on at the start: {}",
        at(0)
    );
    assert!(at(250) > at(0) && at(250) < at(500), "rising");
    assert!(at(750) < at(500), "falling");
    assert_eq!(at(1500), at(500), "periodic");
}

#[test]
fn spin_goes_round_once_per_period() {
    let spin = Pattern::Spin {
        color: C,
        period_ms: 1200,
    };
    // 12 LEDs, 100 ms each: the head is LED k at k × 100 ms.
    for k in 0..12 {
        let f = frame(spin, 12, k * 100 + 50);
        assert_eq!(brightest(&f), k as usize, "{f:?}");
        assert_eq!(f[k as usize], C);
        // A tail behind the head, dark well ahead of it.
        assert!(f[(k as usize + 11) % 12] != Rgb::OFF);
        assert_eq!(f[(k as usize + 6) % 12], Rgb::OFF);
    }
    // One LED cannot spin: it pulses.
    let single = frame(spin, 1, 600);
    assert_eq!(single, vec![C]);
}

#[test]
fn a_countdown_lights_the_share_of_the_ring_the_time_left_is() {
    let countdown = Pattern::Countdown {
        color: C,
        left_ms: 60_000,
        total_ms: 120_000,
    };
    assert!(countdown.animated());
    let lit = |f: &[Rgb]| f.iter().filter(|c| **c != Rgb::OFF).count();
    // Half left: half the ring, in full.
    let half = frame(countdown, 12, 0);
    assert_eq!(half[..6], [C; 6]);
    assert_eq!(half[6..], [Rgb::OFF; 6]);
    // 5 s later: 55 of 120 s left, 5.5 LEDs' worth: 5 full and the sixth
    // at half.
    let later = frame(countdown, 12, 5_000);
    assert_eq!(later[..5], [C; 5]);
    assert!(later[5] != Rgb::OFF && later[5].0 < C.0, "{:?}", later[5]);
    assert_eq!(lit(&later), 6);
    // It only ever shrinks, and is dark when the time is up.
    let mut before = usize::MAX;
    for ms in (0..=60_000).step_by(2_500) {
        let n = lit(&frame(countdown, 12, ms));
        assert!(n <= before, "grew at {ms} ms");
        before = n;
    }
    assert_eq!(frame(countdown, 12, 60_000), vec![Rgb::OFF; 12]);
    assert_eq!(frame(countdown, 12, 90_000), vec![Rgb::OFF; 12]);
    // One LED cannot show a share: it pulses, never dark.
    for ms in [0, 500, 1_000, 1_500] {
        assert_ne!(frame(countdown, 1, ms)[0], Rgb::OFF);
    }
}

#[test]
fn a_timer_counts_down_from_its_own_times() {
    let timer = Countdown {
        set_ms: 1_000_000,
        due_ms: 1_300_000,
    };
    assert_eq!(timer.total_ms(), 300_000);
    assert_eq!(timer.left_ms(1_100_000), 200_000);
    assert_eq!(timer.left_ms(2_000_000), 0, "past due: nothing left");
    let ring = light_at(Status::Timer, Some(timer), 1_100_000, &LedRoles::Shared);
    let Pattern::Countdown {
        left_ms, total_ms, ..
    } = ring.pattern
    else {
        panic!("{ring:?}");
    };
    assert_eq!((left_ms, total_ms), (200_000, 300_000));
    let mut out = vec![Rgb::OFF; 12];
    ring.frame(Duration::ZERO, &mut out);
    assert_eq!(
        out.iter().filter(|c| **c != Rgb::OFF).count(),
        8,
        "2/3 of 12"
    );
    // Other statuses ignore it; one GPIO LED per purpose pulses instead of
    // drawing an arc over LEDs that mean other things.
    assert_eq!(
        light_at(Status::Speaking, Some(timer), 1_100_000, &LedRoles::Shared),
        light(Status::Speaking, &LedRoles::Shared)
    );
    let roles = LedRoles::PerLed(vec![vec![Status::Idle, Status::Timer], vec![Status::Error]]);
    let led = light_at(Status::Timer, Some(timer), 1_100_000, &roles);
    assert_eq!(led.leds, 0b01);
    assert!(matches!(led.pattern, Pattern::Pulse { .. }), "{led:?}");
}

#[test]
fn precedence_keeps_the_mute_and_listening_lights_first() {
    let timer = Some(Countdown {
        set_ms: 0,
        due_ms: 60_000,
    });
    let all = Activity {
        muted: true,
        listening: true,
        speaking: true,
        transcribing: true,
        error: true,
        pairing: true,
        asking: true,
        message_waiting: true,
        ringing: true,
        timer,
    };
    assert_eq!(Status::of(all), Status::Muted);
    assert_eq!(
        Status::of(Activity {
            muted: false,
            ..all
        }),
        Status::Asking,
        "an open microphone for an answer shows over everything but the mute"
    );
    assert_eq!(
        Status::of(Activity {
            asking: true,
            ..Activity::default()
        }),
        Status::Idle,
        "asking shows only while the microphone is open for the answer"
    );
    assert_eq!(
        Status::of(Activity {
            message_waiting: true,
            transcribing: true,
            ..Activity::default()
        }),
        Status::Transcribing,
        "a waiting message is the quietest light"
    );
    assert_eq!(
        Status::of(Activity {
            message_waiting: true,
            ..Activity::default()
        }),
        Status::Message
    );
    assert_eq!(
        Status::of(Activity {
            muted: false,
            asking: false,
            ..all
        }),
        Status::Listening,
        "an open microphone shows over everything but the mute"
    );
    assert_eq!(
        Status::of(Activity {
            muted: false,
            asking: false,
            listening: false,
            ..all
        }),
        Status::Ringing,
        "a ringing timer shows over the error light: with the speaker failed it is all the person has"
    );
    assert_eq!(
        Status::of(Activity {
            timer,
            message_waiting: true,
            ..Activity::default()
        }),
        Status::Timer,
        "a running timer shows over a waiting message"
    );
    assert_eq!(
        Status::of(Activity {
            timer,
            speaking: true,
            ..Activity::default()
        }),
        Status::Speaking,
        "and under what Hark is doing"
    );
    let open_mic = Activity {
        listening: true,
        ..Activity::default()
    };
    for other in [
        Activity {
            error: true,
            ..open_mic
        },
        Activity {
            speaking: true,
            ..open_mic
        },
        Activity {
            transcribing: true,
            ..open_mic
        },
    ] {
        assert_eq!(Status::of(other), Status::Listening, "{other:?}");
    }
    assert_eq!(
        Status::of(Activity {
            error: true,
            speaking: true,
            ..Activity::default()
        }),
        Status::Error
    );
    assert_eq!(
        Status::of(Activity {
            speaking: true,
            transcribing: true,
            ..Activity::default()
        }),
        Status::Speaking
    );
    assert_eq!(Status::of(Activity::default()), Status::Idle);
}

#[test]
fn every_transition_between_statuses_changes_the_light() {
    // Each status has its own look, so no transition is invisible.
    for a in Status::ALL {
        for b in Status::ALL {
            if a != b {
                assert_ne!(a.pattern(), b.pattern(), "{a} and {b} look alike");
            }
        }
    }
    // The two promises are steady lights, not blinking ones a glance
    // could miss.
    assert!(!Status::Muted.pattern().animated());
    assert!(!Status::Listening.pattern().animated());
    assert!(!Status::Asking.pattern().animated());
    assert_eq!(Status::Idle.pattern(), Pattern::Off);
}

#[test]
fn per_led_roles_light_only_the_states_led() {
    let roles = LedRoles::PerLed(vec![
        vec![Status::Listening],
        vec![Status::Speaking, Status::Transcribing],
        vec![Status::Muted, Status::Error],
    ]);
    assert_eq!(light(Status::Listening, &roles).leds, 0b001);
    assert_eq!(light(Status::Transcribing, &roles).leds, 0b010);
    assert_eq!(light(Status::Muted, &roles).leds, 0b100);
    assert_eq!(light(Status::Idle, &roles).leds, 0);
    let shared = light(Status::Speaking, &LedRoles::Shared);
    assert_eq!(shared, Light::all(Status::Speaking.pattern()));

    let mut out = vec![Rgb::OFF; 3];
    light(Status::Muted, &roles).frame(Duration::ZERO, &mut out);
    assert_eq!(out[..2], [Rgb::OFF, Rgb::OFF]);
    assert_ne!(out[2], Rgb::OFF);
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_led_thread_shows_the_newest_light_and_goes_dark_when_dropped() {
    let (leds, view) = SimLeds::new(4);
    let lights = Lights::start(Box::new(leds)).unwrap();
    lights.set(Light::all(Pattern::Solid { color: C }));
    wait_until("solid", || view.frame() == vec![C; 4]);
    // A burst of changes ends on the last one.
    for i in 0..50u8 {
        lights.set(Light::all(Pattern::Solid {
            color: Rgb(i, 0, 0),
        }));
    }
    wait_until("the last change", || view.frame() == vec![Rgb(49, 0, 0); 4]);
    assert_eq!(
        lights.shown().frame,
        vec![Rgb(49, 0, 0); 4],
        "status reports what is shown"
    );
    // A steady light is written once, not every frame.
    let writes = view.writes();
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(view.writes(), writes);
    // An animated one is redrawn.
    lights.set(Light::all(Pattern::Pulse {
        color: C,
        period_ms: 400,
    }));
    wait_until("pulse frames", || view.writes() > writes + 5);
    drop(lights);
    assert_eq!(view.frame(), vec![Rgb::OFF; 4], "dark after shutdown");
}
