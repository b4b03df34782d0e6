//! Patterns, the status → light mapping, and the LED thread on the
//! simulated LEDs.

use std::time::{Duration, Instant};

use hark_board::{
    led::{Light, Lights, Pattern, Rgb},
    sim::SimLeds,
    status::{Activity, LedRoles, Status, light},
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
fn precedence_keeps_the_mute_and_listening_lights_first() {
    let all = Activity {
        muted: true,
        listening: true,
        speaking: true,
        transcribing: true,
        error: true,
        pairing: true,
        asking: true,
        message_waiting: true,
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
