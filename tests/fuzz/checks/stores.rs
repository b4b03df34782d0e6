//! The SQLite stores' inputs: the names and texts agents and the person
//! give them (a token's name, a history row's text and agent, speech kept
//! for later), through each store's own API on its own thread, as the
//! daemon uses them. The first byte picks the store; the rest, as text
//! (invalid UTF-8 replaced, as a JSON string would have it), is the input.
//!
//! Checks: what a store accepts reads back exactly as given (a name as
//! `check_name` makes it); a name `check_name` refuses is refused by the
//! store too, as a bad name; a presented token that was never made is
//! refused; nothing panics.

use std::{
    sync::OnceLock,
    time::{Duration, SystemTime},
};

use hark_core::scopes::Scopes;
use hark_store::{
    history::{self, History, Kind, New, Query},
    schedule::{Entry, ScheduleStore},
    tokens::{self, TokenError, TokenStore},
};

struct Stores {
    runtime: tokio::runtime::Runtime,
    tokens: TokenStore,
    history: History,
    schedule: ScheduleStore,
}

fn stores() -> &'static Stores {
    static STORES: OnceLock<Stores> = OnceLock::new();
    STORES.get_or_init(|| {
        // On disk, as on the appliance (a directory of this process's own).
        let dir = std::env::temp_dir().join(format!("hark-fuzz-stores-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let settings = history::Settings {
            max_rows: 500,
            keep: Duration::from_secs(3600),
            keep_audio: false,
        };
        Stores {
            runtime: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime"),
            tokens: TokenStore::open(&dir).expect("the token store").0,
            history: History::open(&dir, settings).expect("the history"),
            schedule: ScheduleStore::open(&dir).expect("the schedule"),
        }
    })
}

pub fn check(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest).into_owned();
    let s = stores();
    match which % 4 {
        0 => token_name(s, &text),
        1 => history_row(s, &text),
        2 => kept_speech(s, &text),
        _ => presented_token(s, &text),
    }
}

fn token_name(s: &Stores, name: &str) {
    let made = s
        .runtime
        .block_on(s.tokens.create(name, Scopes::DEFAULT, true));
    match tokens::check_name(name) {
        Ok(clean) => {
            let (token, info) = made.unwrap_or_else(|e| panic!("{name:?} refused: {e}"));
            assert_eq!(info.name, clean);
            assert!(s.tokens.list().iter().any(|t| t.name == clean));
            assert!(s.tokens.check(&token, None).is_ok(), "its own token works");
            let revoked = s.runtime.block_on(s.tokens.revoke(&clean));
            assert_eq!(revoked.expect("revoked").name, clean);
            assert!(
                s.tokens.check(&token, None).is_err(),
                "a revoked token is refused"
            );
        }
        Err(_) => assert!(
            matches!(made, Err(TokenError::BadName(_))),
            "{name:?} is not a name, yet: {made:?}"
        ),
    }
}

fn history_row(s: &Stores, text: &str) {
    let row = New {
        at: SystemTime::now(),
        kind: Kind::Spoken,
        agent: Some(text.to_owned()),
        text: text.to_owned(),
        end_reason: Some("spoken".into()),
        duration: Some(1.0),
        delivered_to: None,
        listen: None,
    };
    let id = s.runtime.block_on(s.history.add(row)).expect("kept");
    let query = Query {
        limit: 1,
        ..Query::default()
    };
    let (rows, _) = s.runtime.block_on(s.history.list(query)).expect("listed");
    let newest = rows.first().expect("the row just added");
    assert_eq!(newest.id, id);
    assert_eq!(newest.text, text, "the text reads back as given");
    assert_eq!(newest.agent.as_deref(), Some(text), "the agent too");
}

fn kept_speech(s: &Stores, text: &str) {
    let entry = Entry {
        id: 0,
        agent: Some(text.to_owned()),
        text: text.to_owned(),
        voice: None,
        rate: None,
        set: SystemTime::now(),
        due: SystemTime::now() + Duration::from_secs(3600),
        ring: None,
    };
    let id = s.runtime.block_on(s.schedule.add(entry)).expect("kept");
    let all = s.runtime.block_on(s.schedule.all()).expect("listed");
    let kept = all
        .iter()
        .find(|e| e.id == id)
        .expect("the entry just added");
    assert_eq!(kept.text, text, "the text reads back as given");
    assert_eq!(kept.agent.as_deref(), Some(text));
    assert!(s.runtime.block_on(s.schedule.remove(id)).expect("removed"));
}

fn presented_token(s: &Stores, token: &str) {
    assert!(
        s.tokens.check(token, Some(token)).is_err(),
        "{token:?} was never made"
    );
}
