//! Board profiles (parsing, validation, the shipped files) and detection
//! on fixture trees.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use hark_board::detect::{
    AlsaCard, DetectError, Detected, Machine, check_explicit, detect, parse_asound_cards,
};
use hark_board::profile::{LedRole, Leds, Profile, ProfileError, Pull};

/// A small valid profile the error tests change one thing in.
const BASE: &str = r#"
name = "test-board"
description = "a test board"
mics = [[-0.03, 0.0, 0.0], [0.03, 0.0, 0.0]]

[button]
pin = 17
active_low = true
pull = "up"

[leds]
type = "gpio"
pins = [{ role = "listening", pin = 22, active_low = false }]

[audio]
capture_channels = 2
playback_channels = 2
rate = 16000
"#;

fn parse(text: &str) -> Result<Profile, ProfileError> {
    Profile::from_toml("test-board", text)
}

/// The error's message, after checking that the text did not parse.
fn error_of(text: &str) -> (ProfileError, String) {
    match parse(text) {
        Ok(profile) => panic!("expected an error, parsed {profile:?}"),
        Err(error) => {
            let message = error.to_string();
            (error, message)
        }
    }
}

#[test]
fn base_profile_parses() {
    let profile = parse(BASE).expect("the base profile is valid");
    assert_eq!(profile.name, "test-board");
    assert!(matches!(&profile.leds, Leds::Gpio(leds) if leds.pins.len() == 1));
    assert!(profile.mute.is_none() && profile.link.is_none());
}

#[test]
fn every_shipped_profile_parses_and_validates() {
    let names: Vec<_> = Profile::builtin_names().collect();
    assert_eq!(
        names,
        [
            "generic-pi",
            "respeaker-2mic",
            "respeaker-4mic",
            "usb-mic-array"
        ]
    );
    let profiles = Profile::builtins().expect("shipped profiles parse");
    assert_eq!(profiles.len(), names.len());
    for profile in &profiles {
        profile.validate(&profile.name).expect("valid");
        assert!(!profile.description.is_empty(), "{}", profile.name);
        assert!(
            profile.detect.overlay.is_some(),
            "{} documents its overlay",
            profile.name
        );
    }
    // The file name is the profile name, and files on disk match the
    // embedded copies (Profile::load reads the same text).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("profiles");
    let mut on_disk = Vec::new();
    for entry in fs::read_dir(&dir).expect("profiles directory") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let loaded = Profile::load(&path).expect("loads");
            let stem = path.file_stem().and_then(|s| s.to_str()).expect("utf-8");
            assert_eq!(loaded.name, stem);
            assert_eq!(loaded, Profile::builtin(stem).expect("embedded"));
            on_disk.push(stem.to_owned());
        }
    }
    on_disk.sort();
    assert_eq!(on_disk, names, "every file in profiles/ is embedded");
}

#[test]
fn shipped_profiles_have_their_key_facts() {
    let two = Profile::builtin("respeaker-2mic").expect("2-mic");
    assert_eq!(two.button.map(|b| (b.pin, b.active_low)), Some((17, true)));
    let Leds::Apa102(ring) = two.leds else {
        panic!("2-mic has an APA102 ring")
    };
    assert_eq!((ring.spi_bus, ring.count, ring.power_pin), (0, 3, None));
    assert_eq!(two.mics.len(), 2);
    assert!(two.audio.cards.iter().any(|c| c == "seeed2micvoicec"));
    assert!(two.audio.cards.iter().any(|c| c == "wm8960soundcard"));
    assert!(two.needs_pi_header());

    let four = Profile::builtin("respeaker-4mic").expect("4-mic");
    assert!(four.button.is_none());
    let Leds::Apa102(ring) = four.leds else {
        panic!("4-mic has an APA102 ring")
    };
    assert_eq!((ring.count, ring.power_pin), (12, Some(5)));
    assert_eq!(four.mics.len(), 4);
    assert_eq!(four.audio.capture_channels, 4);
    // Opposite microphones 81 mm apart, as Seeed's DOA code has it.
    let span = (four.mics[0][0] - four.mics[2][0]).abs();
    assert!((span - 0.081).abs() < 0.001, "{span}");

    let usb = Profile::builtin("usb-mic-array").expect("usb");
    assert!(!usb.needs_pi_header());
    assert_eq!(usb.audio.mic_channels.as_deref(), Some(&[1, 2, 3, 4][..]));
    assert_eq!(usb.leds, Leds::None);

    let generic = Profile::builtin("generic-pi").expect("generic");
    let Leds::Gpio(leds) = &generic.leds else {
        panic!("generic-pi has GPIO LEDs")
    };
    let roles: Vec<_> = leds.pins.iter().map(|l| (l.role, l.pin)).collect();
    assert_eq!(
        roles,
        [
            (LedRole::Listening, 22),
            (LedRole::Speaking, 23),
            (LedRole::Error, 24)
        ]
    );
    assert_eq!(generic.mute.map(|m| (m.pin, m.pull)), Some((27, Pull::Up)));
    assert!(generic.audio.cards.is_empty(), "any card");
    assert!(generic.needs_pi_header() && generic.gpio_chip.is_none());
}

#[test]
fn a_profile_naming_its_gpio_chip_needs_no_pi_header_and_round_trips() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/profiles/generic-pi.toml"
    ))
    .expect("generic-pi.toml")
    .replace(
        "name = \"generic-pi\"",
        "name = \"on-sim\"\ngpio_chip = \"hark-sim\"",
    );
    let profile = Profile::from_toml("on-sim.toml", &text).expect("parses");
    assert_eq!(profile.gpio_chip.as_deref(), Some("hark-sim"));
    assert!(profile.gpio_lines());
    assert!(!profile.needs_pi_header(), "lines on a named chip");
    let again =
        Profile::from_toml("again", &profile.to_toml().expect("serialises")).expect("reads back");
    assert_eq!(again, profile);

    let empty = text.replace("gpio_chip = \"hark-sim\"", "gpio_chip = \" \"");
    let error = Profile::from_toml("on-sim.toml", &empty).expect_err("an empty chip name");
    assert!(error.to_string().contains("gpio_chip"), "{error}");
}

#[test]
fn profiles_round_trip_through_toml() {
    for profile in Profile::builtins().expect("builtins") {
        let text = profile.to_toml().expect("serialises");
        let again = Profile::from_toml(&profile.name, &text)
            .unwrap_or_else(|e| panic!("{} does not read back: {e}\n{text}", profile.name));
        assert_eq!(again, profile);
    }
    let base = parse(BASE).expect("base");
    let text = base.to_toml().expect("serialises");
    assert_eq!(parse(&text).expect("reads back"), base);
}

#[test]
fn unknown_builtin_lists_the_shipped_ones() {
    let error = Profile::builtin("respeaker-6mic").expect_err("not shipped");
    let message = error.to_string();
    assert!(message.contains("respeaker-6mic"), "{message}");
    assert!(
        message.contains("respeaker-2mic, respeaker-4mic"),
        "{message}"
    );
    assert!(matches!(
        Profile::open("respeaker-2mic"),
        Ok(Profile { ref name, .. }) if name == "respeaker-2mic"
    ));
}

#[test]
fn missing_file_names_the_path() {
    let error = Profile::open("/nonexistent/board.toml").expect_err("no such file");
    assert!(matches!(error, ProfileError::Read { .. }));
    assert!(error.to_string().contains("/nonexistent/board.toml"));
}

#[test]
fn syntax_error_gives_line_and_column() {
    let text = BASE.replace("pin = 17", "pin = = 17");
    let (error, message) = error_of(&text);
    let ProfileError::Syntax { line, .. } = error else {
        panic!("syntax error expected: {message}")
    };
    assert_eq!(line, 7, "{message}");
    assert!(message.contains("test-board"), "{message}");
    assert!(message.contains("line 7"), "{message}");
}

#[test]
fn unknown_key_names_the_key_and_where_it_is() {
    let text = BASE.replace("pull = \"up\"", "pull = \"up\"\npins = 3");
    let (error, message) = error_of(&text);
    assert!(
        matches!(&error, ProfileError::UnknownField { field, line: 10, .. } if field == "button.pins"),
        "{message}"
    );
    assert!(message.contains("`button.pins`"), "{message}");
    assert!(
        message.contains("`pin`"),
        "lists the allowed keys: {message}"
    );

    // At the top level, and inside an APA102 table (a tagged enum).
    let text = BASE.replace("name = ", "colour = \"red\"\nname = ");
    let (_, message) = error_of(&text);
    assert!(message.contains("unknown field `colour`"), "{message}");
    let text = BASE.replace(
        "type = \"gpio\"\npins = [{ role = \"listening\", pin = 22, active_low = false }]",
        "type = \"apa102\"\nspi_bus = 0\nchip_select = 1\ncount = 3\nmax_clock_hz = 8000000\nbrightness = 10\nspeed = 3",
    );
    let (_, message) = error_of(&text);
    assert!(message.contains("speed"), "{message}");
    let text = BASE.replace(
        "type = \"gpio\"\npins = [{ role = \"listening\", pin = 22, active_low = false }]",
        "type = \"none\"\ncount = 3",
    );
    let (_, message) = error_of(&text);
    assert!(message.contains("count"), "{message}");
}

#[test]
fn missing_key_names_the_key() {
    let text = BASE.replace("pin = 17\n", "");
    let (error, message) = error_of(&text);
    assert!(
        matches!(&error, ProfileError::MissingField { field, .. } if field == "button.pin"),
        "{message}"
    );
    assert!(message.contains("missing field `button.pin`"), "{message}");

    let text = BASE.replace("rate = 16000\n", "");
    let (_, message) = error_of(&text);
    assert!(message.contains("`audio.rate`"), "{message}");

    let text = BASE.replace("description = \"a test board\"\n", "");
    let (_, message) = error_of(&text);
    assert!(message.contains("`description`"), "{message}");
}

#[test]
fn wrong_type_names_the_field() {
    let text = BASE.replace("pin = 17", "pin = \"seventeen\"");
    let (error, message) = error_of(&text);
    assert!(
        matches!(&error, ProfileError::InvalidValue { field, line: 7, .. } if field == "button.pin"),
        "{message}"
    );

    let text = BASE.replace("pull = \"up\"", "pull = \"sideways\"");
    let (_, message) = error_of(&text);
    assert!(message.contains("button.pull"), "{message}");
    assert!(message.contains("sideways"), "{message}");

    let text = BASE.replace("role = \"listening\"", "role = \"dancing\"");
    let (_, message) = error_of(&text);
    assert!(message.contains("leds.pins[0].role"), "{message}");

    let text = BASE.replace("pin = 17", "pin = 300");
    let (_, message) = error_of(&text);
    assert!(message.contains("button.pin"), "{message}");

    let text = BASE.replace("type = \"gpio\"", "type = \"neopixel\"");
    let (_, message) = error_of(&text);
    assert!(message.contains("neopixel"), "{message}");
}

#[test]
fn pin_off_the_header_is_rejected_with_the_range() {
    let text = BASE.replace("pin = 22", "pin = 40");
    let (error, message) = error_of(&text);
    assert!(
        matches!(&error, ProfileError::PinOutOfRange { field, pin: 40, .. } if field == "leds.pins[0].pin"),
        "{message}"
    );
    assert!(message.contains("BCM 0–27"), "{message}");
}

#[test]
fn duplicate_pin_names_both_fields() {
    let text = BASE.replace("pin = 22", "pin = 17");
    let (error, message) = error_of(&text);
    assert!(
        matches!(&error, ProfileError::DuplicatePin { pin: 17, first, second, .. }
            if first == "button.pin" && second == "leds.pins[0].pin"),
        "{message}"
    );
    assert!(message.contains("GPIO 17"), "{message}");

    // A mute switch on the HAT's I2S pins.
    let text = format!(
        "{}\nheader_pins = [18, 19, 20, 21]\n[mute]\npin = 19\nactive_low = true\npull = \"up\"\n",
        BASE.trim_end()
    );
    let (_, message) = error_of(&text);
    assert!(message.contains("mute.pin"), "{message}");
    assert!(message.contains("audio.header_pins[1]"), "{message}");

    // The header UART's pins.
    let text = format!(
        "{}\n[link]\ndevice = \"/dev/serial0\"\nbaud = 115200\n",
        BASE.replace("pin = 22", "pin = 14")
    );
    let (_, message) = error_of(&text);
    assert!(message.contains("GPIO 14"), "{message}");
    assert!(message.contains("link.device"), "{message}");
}

/// The base profile with an APA102 ring instead of GPIO LEDs.
fn with_ring(ring: &str) -> String {
    BASE.replace(
        "type = \"gpio\"\npins = [{ role = \"listening\", pin = 22, active_low = false }]",
        &format!("type = \"apa102\"\n{ring}"),
    )
}

const RING: &str =
    "spi_bus = 0\nchip_select = 1\ncount = 3\nmax_clock_hz = 8000000\nbrightness = 10";

#[test]
fn plain_pin_on_the_rings_spi_bus_is_rejected() {
    parse(&with_ring(RING)).expect("a ring on SPI0 with the button on 17 is fine");

    // CE0 (GPIO 8) is claimed even though the ring uses CE1.
    let text = with_ring(RING).replace("pin = 17", "pin = 8");
    let (error, message) = error_of(&text);
    assert!(
        matches!(&error, ProfileError::SpiPinConflict { field, pin: 8, function: "SPI0 CE0", .. } if field == "button.pin"),
        "{message}"
    );
    assert!(message.contains("7–11"), "{message}");

    // The power pin on MOSI.
    let text = with_ring(&format!("{RING}\npower_pin = 10"));
    let (_, message) = error_of(&text);
    assert!(message.contains("leds.power_pin"), "{message}");
    assert!(message.contains("SPI0 MOSI"), "{message}");

    // SPI1's CE1 is GPIO 17, where the button is.
    let text = with_ring(&RING.replace("spi_bus = 0", "spi_bus = 1"));
    let (_, message) = error_of(&text);
    assert!(message.contains("SPI1 CE1"), "{message}");

    let text = with_ring(&RING.replace("chip_select = 1", "chip_select = 2"));
    let (_, message) = error_of(&text);
    assert!(message.contains("leds.chip_select"), "{message}");

    let text = with_ring(&RING.replace("spi_bus = 0", "spi_bus = 3"));
    let (_, message) = error_of(&text);
    assert!(message.contains("leds.spi_bus"), "{message}");
}

#[test]
fn ring_count_brightness_and_clock_are_checked() {
    let (error, message) = error_of(&with_ring(&RING.replace("count = 3", "count = 0")));
    assert!(
        matches!(error, ProfileError::ZeroLedCount { .. }),
        "{message}"
    );
    assert!(message.contains("leds.count"), "{message}");

    let (error, message) = error_of(&with_ring(
        &RING.replace("brightness = 10", "brightness = 32"),
    ));
    assert!(
        matches!(error, ProfileError::Brightness { value: 32, .. }),
        "{message}"
    );
    assert!(message.contains("0–31"), "{message}");

    let (_, message) = error_of(&with_ring(
        &RING.replace("max_clock_hz = 8000000", "max_clock_hz = 0"),
    ));
    assert!(message.contains("leds.max_clock_hz"), "{message}");

    let text = BASE.replace(
        "pins = [{ role = \"listening\", pin = 22, active_low = false }]",
        "pins = []",
    );
    let (_, message) = error_of(&text);
    assert!(message.contains("leds.pins"), "{message}");
}

#[test]
fn microphones_and_channels_are_checked() {
    let (error, message) =
        error_of(&BASE.replace("mics = [[-0.03, 0.0, 0.0], [0.03, 0.0, 0.0]]", "mics = []"));
    assert!(matches!(error, ProfileError::NoMics { .. }), "{message}");

    // TOML spells infinity and NaN `inf` and `nan`.
    let (error, message) = error_of(&BASE.replace("[0.03, 0.0, 0.0]", "[0.03, nan, 0.0]"));
    assert!(
        matches!(error, ProfileError::MicPosition { index: 1, .. }),
        "{message}"
    );
    assert!(message.contains("mics[1]"), "{message}");
    let (_, message) = error_of(&BASE.replace("[-0.03, 0.0, 0.0]", "[-inf, 0.0, 0.0]"));
    assert!(message.contains("mics[0]"), "{message}");

    let (_, message) = error_of(&BASE.replace("[0.03, 0.0, 0.0]", "[-0.03, 0.0, 0.0]"));
    assert!(message.contains("same position as mics[0]"), "{message}");

    let (error, message) = error_of(&BASE.replace("capture_channels = 2", "capture_channels = 1"));
    assert!(
        matches!(
            error,
            ProfileError::TooFewChannels {
                capture_channels: 1,
                mics: 2,
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains("audio.capture_channels"), "{message}");

    let (_, message) = error_of(&BASE.replace("rate = 16000", "rate = 100"));
    assert!(message.contains("audio.rate"), "{message}");

    let (_, message) =
        error_of(&BASE.replace("rate = 16000", "rate = 16000\nmic_channels = [0, 2]"));
    assert!(message.contains("audio.mic_channels[1]"), "{message}");
    let (_, message) =
        error_of(&BASE.replace("rate = 16000", "rate = 16000\nmic_channels = [1, 1]"));
    assert!(message.contains("already"), "{message}");
    let (_, message) = error_of(&BASE.replace("rate = 16000", "rate = 16000\nmic_channels = [0]"));
    assert!(message.contains("audio.mic_channels"), "{message}");
}

#[test]
fn names_links_and_patterns_are_checked() {
    let (_, message) = error_of(&BASE.replace("name = \"test-board\"", "name = \"Test Board\""));
    assert!(message.contains("name"), "{message}");

    let link = |device: &str, baud: u32| {
        format!(
            "{}\n[link]\ndevice = {device:?}\nbaud = {baud}\n",
            BASE.trim_end()
        )
    };
    parse(&link("/dev/ttyACM0", 115_200)).expect("a USB serial link");
    let (_, message) = error_of(&link("ttyACM0", 115_200));
    assert!(message.contains("link.device"), "{message}");
    let (_, message) = error_of(&link("/dev/ttyACM0", 0));
    assert!(message.contains("link.baud"), "{message}");

    let text = format!("{}\n[detect]\ncards = [\"\"]\n", BASE.trim_end());
    let (_, message) = error_of(&text);
    assert!(message.contains("detect.cards[0]"), "{message}");
}

// ---------------------------------------------------------------------------
// Detection on fixture trees.

/// A fresh directory standing in for `/`, removed when dropped.
struct Root(PathBuf);

impl Root {
    fn new(label: &str) -> Root {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "hark-board-detect-{}-{}-{label}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        // A leftover from a killed run would carry stale files.
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).expect("temp root");
        Root(path)
    }

    fn model(self, model: &str) -> Root {
        let dir = self.0.join("proc/device-tree");
        fs::create_dir_all(&dir).expect("device-tree dir");
        // The kernel's property ends in a NUL.
        fs::write(dir.join("model"), format!("{model}\0")).expect("model");
        self
    }

    fn cards(self, cards: &str) -> Root {
        let dir = self.0.join("proc/asound");
        fs::create_dir_all(&dir).expect("asound dir");
        fs::write(dir.join("cards"), cards).expect("cards");
        self
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

const PI4: &str = "Raspberry Pi 4 Model B Rev 1.4";
const PI5: &str = "Raspberry Pi 5 Model B Rev 1.0";

const CARDS_PI4_2MIC: &str = " 0 [Headphones     ]: bcm2835_headpho - bcm2835 Headphones
                      bcm2835 Headphones
 1 [seeed2micvoicec]: seeed-2mic-voic - seeed-2mic-voicecard
                      seeed-2mic-voicecard
";

const CARDS_PI5_HDMI: &str = " 0 [vc4hdmi0       ]: vc4-hdmi - vc4-hdmi-0
                      vc4-hdmi-0
 1 [vc4hdmi1       ]: vc4-hdmi - vc4-hdmi-1
                      vc4-hdmi-1
";

const CARDS_X86_USB: &str = " 0 [PCH            ]: HDA-Intel - HDA Intel PCH
                      HDA Intel PCH at 0xf7f10000 irq 32
 1 [ArrayUAC10     ]: USB-Audio - ReSpeaker 4 Mic Array (UAC1.0)
                      SEEED ReSpeaker 4 Mic Array (UAC1.0) at usb-0000:00:14.0-2, full speed
";

fn detected_profile(root: &Root) -> (String, String) {
    match detect(&root.0).expect("detection reads the fixture") {
        Detected::Profile { profile, reason } => (profile.name, reason),
        Detected::Simulated { reason } => panic!("expected a profile, got simulated: {reason}"),
    }
}

#[test]
fn asound_cards_are_parsed_with_long_names() {
    let cards = parse_asound_cards(CARDS_X86_USB);
    assert_eq!(
        cards[1],
        AlsaCard {
            index: 1,
            id: "ArrayUAC10".to_owned(),
            driver: "USB-Audio".to_owned(),
            name: "ReSpeaker 4 Mic Array (UAC1.0)".to_owned(),
            long_name: "SEEED ReSpeaker 4 Mic Array (UAC1.0) at usb-0000:00:14.0-2, full speed"
                .to_owned(),
        }
    );
    assert_eq!(cards[0].id, "PCH");
    assert!(cards[1].matches("arrayuac10"));
    assert!(cards[1].matches("ReSpeaker 4 Mic Array"));
    assert!(!cards[0].matches("ArrayUAC10"));
    assert!(parse_asound_cards("--- no soundcards ---\n").is_empty());
    // Double-digit indices are not padded.
    let cards = parse_asound_cards("10 [Device        ]: USB-Audio - USB Audio Device\n");
    assert_eq!((cards[0].index, cards[0].id.as_str()), (10, "Device"));
}

#[test]
fn pi4_with_the_2mic_card_is_a_respeaker_2mic() {
    let root = Root::new("pi4-2mic").model(PI4).cards(CARDS_PI4_2MIC);
    let (name, reason) = detected_profile(&root);
    assert_eq!(name, "respeaker-2mic");
    assert!(reason.contains(PI4), "{reason}");
    assert!(reason.contains("seeed2micvoicec"), "{reason}");

    // The newer overlay's card name too.
    let cards = CARDS_PI4_2MIC
        .replace("seeed2micvoicec", "wm8960soundcard")
        .replace(
            "seeed-2mic-voic - seeed-2mic-voicecard",
            "simple-card - wm8960-soundcard",
        );
    let root = Root::new("pi4-wm8960").model(PI4).cards(&cards);
    assert_eq!(detected_profile(&root).0, "respeaker-2mic");
}

#[test]
fn pi_with_the_4mic_card_is_a_respeaker_4mic() {
    let cards = " 0 [Headphones     ]: bcm2835_headpho - bcm2835 Headphones
                      bcm2835 Headphones
 1 [seeed4micvoicec]: seeed-4mic-voic - seeed-4mic-voicecard
                      seeed-4mic-voicecard
";
    let root = Root::new("pi3-4mic")
        .model("Raspberry Pi 3 Model B Plus Rev 1.3")
        .cards(cards);
    assert_eq!(detected_profile(&root).0, "respeaker-4mic");
}

#[test]
fn pi5_without_a_hat_is_a_generic_pi() {
    let root = Root::new("pi5").model(PI5).cards(CARDS_PI5_HDMI);
    let (name, reason) = detected_profile(&root);
    assert_eq!(name, "generic-pi");
    assert!(reason.contains(PI5), "{reason}");
    assert!(
        reason.contains("vc4hdmi0"),
        "lists the cards seen: {reason}"
    );

    // No /proc/asound at all (sound disabled) is the same.
    let root = Root::new("pi5-nosound").model(PI5);
    assert_eq!(detected_profile(&root).0, "generic-pi");
}

#[test]
fn machine_without_device_tree_or_cards_is_simulated() {
    let root = Root::new("bare");
    let Detected::Simulated { reason } = detect(&root.0).expect("detects") else {
        panic!("expected the simulated board")
    };
    assert!(reason.contains("not a Raspberry Pi"), "{reason}");
    assert!(reason.contains("proc/device-tree/model"), "{reason}");
    assert!(reason.contains("ALSA cards: none"), "{reason}");

    // A laptop's own card is not a known one.
    let root = Root::new("laptop").cards(
        " 0 [PCH            ]: HDA-Intel - HDA Intel PCH\n                      HDA Intel PCH at 0xf7f10000 irq 32\n",
    );
    let Detected::Simulated { reason } = detect(&root.0).expect("detects") else {
        panic!("expected the simulated board")
    };
    assert!(reason.contains("0 [PCH]"), "{reason}");

    // Another board with a device tree, and a ReSpeaker HAT overlay: the
    // HAT profile needs a Pi, and the reason says so.
    let root = Root::new("orange")
        .model("Xunlong Orange Pi 5")
        .cards(CARDS_PI4_2MIC);
    let Detected::Simulated { reason } = detect(&root.0).expect("detects") else {
        panic!("expected the simulated board")
    };
    assert!(reason.contains("Orange Pi 5"), "{reason}");
    assert!(reason.contains("respeaker-2mic"), "{reason}");
}

#[test]
fn usb_array_is_found_on_any_machine() {
    let root = Root::new("x86-usb").cards(CARDS_X86_USB);
    let (name, reason) = detected_profile(&root);
    assert_eq!(name, "usb-mic-array");
    assert!(reason.contains("ArrayUAC10"), "{reason}");

    // On a Pi too, where it is more specific than the generic profile.
    let root = Root::new("pi5-usb").model(PI5).cards(CARDS_X86_USB);
    assert_eq!(detected_profile(&root).0, "usb-mic-array");
}

fn probe(root: &std::path::Path) -> Machine {
    Machine::probe(root).expect("the fixture reads")
}

#[test]
fn explicit_pi_profile_on_a_non_pi_is_a_clear_error() {
    let root = Root::new("explicit-x86");
    let profile = Profile::builtin("respeaker-2mic").expect("2-mic");
    let error = check_explicit(&profile, &probe(&root.0)).expect_err("not a Pi");
    assert!(matches!(error, DetectError::NotAPi { .. }));
    let message = error.to_string();
    assert!(
        message.contains("profile respeaker-2mic needs a Raspberry Pi's GPIO, but this machine is not a Raspberry Pi (no "),
        "{message}"
    );
    assert!(message.contains("proc/device-tree/model)"), "{message}");

    // A device tree that is not a Pi's.
    let root = Root::new("explicit-orange").model("Xunlong Orange Pi 5");
    let generic = Profile::builtin("generic-pi").expect("generic");
    let message = check_explicit(&generic, &probe(&root.0))
        .expect_err("not a Pi")
        .to_string();
    assert!(message.contains("generic-pi"), "{message}");
    assert!(message.contains("Orange Pi 5"), "{message}");

    // A USB array needs no Pi; a Pi profile on a Pi is fine.
    let usb = Profile::builtin("usb-mic-array").expect("usb");
    check_explicit(&usb, &probe(&Root::new("explicit-usb").0)).expect("no GPIO needed");
    check_explicit(&profile, &probe(&Root::new("explicit-pi").model(PI4).0)).expect("a Pi");
}

#[test]
fn machine_probe_strips_the_nul() {
    let root = Root::new("probe").model(PI5);
    let machine = Machine::probe(&root.0).expect("probe");
    assert_eq!(machine.model.as_deref(), Some(PI5));
    assert!(machine.is_raspberry_pi());
    assert!(machine.cards.is_empty());
}

/// This machine, as CI runs it: no device tree and no sound card, so the
/// simulated board. On a real Pi (or any machine with a device tree) the
/// assertion would be wrong, so it only checks that detection runs.
#[test]
fn this_machine_is_detected() {
    let root = Path::new("/");
    let detected = detect(root).expect("detection reads /proc");
    if root.join("proc/device-tree/model").exists() {
        eprintln!("device tree present; detected {detected:?}");
        return;
    }
    let cards = fs::read_to_string("/proc/asound/cards").unwrap_or_default();
    if parse_asound_cards(&cards)
        .iter()
        .any(|card| card.matches("ArrayUAC10"))
    {
        eprintln!("a USB array is plugged in; detected {detected:?}");
        return;
    }
    assert!(
        matches!(detected, Detected::Simulated { .. }),
        "expected the simulated board here, got {detected:?}"
    );
}
