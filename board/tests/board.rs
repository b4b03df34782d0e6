//! The board assembled: selection by config, and the simulated board
//! behaving like the device (debounce and classification on its button and
//! switch, frames on its LEDs).

use std::{
    path::Path,
    time::{Duration, Instant},
};

use hark_board::{
    Board, BoardConfig, BoardError, BoardEvent, button::ButtonEvent, led::Rgb, status::Status,
};

fn config(board: &str) -> BoardConfig {
    BoardConfig {
        board: board.into(),
        ..BoardConfig::default()
    }
}

/// A machine with no device tree and no sound card, like this one: a
/// directory tree removed when dropped.
struct BareMachine(std::path::PathBuf);

impl BareMachine {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for BareMachine {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bare_machine() -> BareMachine {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::temp_dir().join(format!("hark-board-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(root.join("proc/asound")).unwrap();
    std::fs::write(root.join("proc/asound/cards"), "--- no soundcards ---\n").unwrap();
    BareMachine(root)
}

async fn next(events: &mut tokio::sync::mpsc::Receiver<BoardEvent>) -> BoardEvent {
    tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("a board event")
        .expect("the board is running")
}

#[tokio::test(start_paused = true)]
async fn the_simulated_button_taps_holds_and_double_presses() {
    let mut board = Board::open(&config("simulated"), Path::new("/")).unwrap();
    let mut events = board.take_events().unwrap();
    let control = board.simulated_control().unwrap().clone();

    control.press().await.unwrap();
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::Press)
    );
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::Release)
    );

    // A second tap soon after: a double press.
    control.press().await.unwrap();
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::Press)
    );
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::DoublePress)
    );
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::Release)
    );

    tokio::time::sleep(Duration::from_secs(1)).await;
    control.hold().await.unwrap();
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::Press)
    );
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::LongPress)
    );
    control.release().await.unwrap();
    assert_eq!(
        next(&mut events).await,
        BoardEvent::Button(ButtonEvent::Release)
    );
}

#[tokio::test(start_paused = true)]
async fn the_simulated_mute_switch_is_debounced_and_remembered() {
    let mut board = Board::open(&config("simulated"), Path::new("/")).unwrap();
    let mut events = board.take_events().unwrap();
    let control = board.simulated_control().unwrap().clone();
    assert!(!control.muted());
    control.mute(true).await.unwrap();
    assert!(control.muted());
    assert_eq!(next(&mut events).await, BoardEvent::Mute(true));
    control.mute(false).await.unwrap();
    assert_eq!(next(&mut events).await, BoardEvent::Mute(false));
    // Flicked on and off within the debounce time: no change at all.
    control.mute(true).await.unwrap();
    control.mute(false).await.unwrap();
    let quiet = tokio::time::timeout(Duration::from_secs(2), events.recv()).await;
    assert!(quiet.is_err(), "{quiet:?}");
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[tokio::test]
async fn the_simulated_leds_show_the_status() {
    let board = Board::open(&config("simulated"), Path::new("/")).unwrap();
    let leds = board.simulated_leds().unwrap().clone();
    assert_eq!(leds.frame(), vec![Rgb::OFF; 12]);
    board.show(Status::Listening, None);
    wait_until("the listening light", || {
        leds.frame().iter().all(|c| c.2 > 200 && c.0 == 0)
    });
    board.show(Status::Muted, None);
    wait_until("the mute light", || {
        leds.frame() == vec![Rgb(255, 0, 0); 12]
    });
    assert_eq!(board.shown().frame, vec![Rgb(255, 0, 0); 12]);
    drop(board);
    assert_eq!(
        leds.frame(),
        vec![Rgb::OFF; 12],
        "dark once the board stops"
    );
}

#[tokio::test]
async fn auto_on_a_machine_without_gpio_is_the_simulated_board() {
    let root = bare_machine();
    let board = Board::open(&config("auto"), root.path()).unwrap();
    assert!(board.simulated_control().is_some());
    assert!(
        board.describe().starts_with("simulated"),
        "{}",
        board.describe()
    );
    assert!(board.profile().is_none());
}

#[tokio::test]
async fn a_pi_profile_on_a_machine_without_gpio_is_a_clear_error() {
    let root = bare_machine();
    let error = match Board::open(&config("respeaker-2mic"), root.path()) {
        Ok(_) => panic!("a Pi profile opened on a machine that is not a Pi"),
        Err(e) => e,
    };
    assert!(matches!(error, BoardError::Detect(_)), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("respeaker-2mic") && text.contains("not a Raspberry Pi"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unknown_profile_names_the_known_ones() {
    let error = match Board::open(&config("respeaker-9mic"), Path::new("/")) {
        Ok(_) => panic!("an unknown profile opened"),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains("respeaker-9mic") && error.contains("generic-pi"),
        "{error}"
    );
}

#[tokio::test]
async fn a_usb_array_without_gpio_runs_its_lights_on_nothing() {
    // The USB array profile needs no GPIO, so it opens here; its status
    // still reports what would show.
    let board = Board::open(&config("usb-mic-array"), Path::new("/")).unwrap();
    assert_eq!(
        board.profile().map(|p| p.name.as_str()),
        Some("usb-mic-array")
    );
    board.show(Status::Speaking, None);
    wait_until("the status", || {
        board.shown().light.pattern == Status::Speaking.pattern()
    });
}
