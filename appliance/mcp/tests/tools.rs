//! The tools over a real socket, served by the real transports to a real
//! MCP client (rmcp's), against the simulated room: what reaches the
//! room, what comes back, and how errors, the microphone's queue,
//! cancellation and `get_status` look to an agent. No speech models are
//! built or loaded here.

mod sim;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use hark_core::{events::Bus, room::Capabilities};
use hark_mcp::{
    ServerState,
    auth::Auth,
    config::{AuthConfig, McpConfig},
    transport::{Listeners, Shared},
};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequestParams, CallToolResult, ClientConfig, Implementation},
    service::RunningService,
};
use serde_json::{Value, json};
use sim::SimRoom;
use tokio_util::sync::CancellationToken;

struct Appliance {
    room: Arc<SimRoom>,
    tcp: SocketAddr,
    shutdown: CancellationToken,
}

impl Drop for Appliance {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The MCP side on a loopback port, serving the simulated room.
async fn appliance(auth: AuthConfig) -> Appliance {
    let mut config = McpConfig::default();
    config.tcp.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.http.enabled = false;
    config.unix.enabled = false;
    let listeners = Listeners::bind(&config).await.expect("binds loopback");
    let tcp = listeners
        .addresses()
        .into_iter()
        .find_map(|(_, a)| a.parse().ok())
        .expect("a TCP address");
    let bus = Bus::new(256);
    let auth = Arc::new(Auth::with_store(&auth, Err("no token store".into())));
    let state = Arc::new(ServerState::new(
        bus.clone(),
        auth,
        std::time::Instant::now(),
    ));
    let room = SimRoom::new(bus);
    let shutdown = CancellationToken::new();
    let shared = Arc::new(Shared::new(
        config,
        "",
        Duration::from_secs(1),
        state,
        Capabilities::of(Arc::clone(&room)),
        shutdown.clone(),
    ));
    drop(listeners.serve(&shared));
    Appliance {
        room,
        tcp,
        shutdown,
    }
}

/// A trusted appliance (loopback is trusted by default).
async fn trusted() -> Appliance {
    appliance(AuthConfig::default()).await
}

type Client = RunningService<RoleClient, ClientConfig>;

async fn agent(appliance: &Appliance, name: &str) -> Client {
    let stream = tokio::net::TcpStream::connect(appliance.tcp)
        .await
        .expect("connects");
    ClientConfig::new(Default::default(), Implementation::new(name, "1"))
        .serve(stream)
        .await
        .expect("initialises")
}

async fn call(client: &Client, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .expect("the call is answered")
}

/// A successful call's structured content.
fn ok(result: &CallToolResult) -> &Value {
    assert_ne!(result.is_error, Some(true), "the call failed: {result:?}");
    result.structured_content.as_ref().expect("structured")
}

/// A failed call's error type and message.
fn failed(result: &CallToolResult) -> (String, String) {
    assert_eq!(
        result.is_error,
        Some(true),
        "the call succeeded: {result:?}"
    );
    let error = &result
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured error: {result:?}"))["error"];
    (
        error["type"].as_str().expect("type").to_owned(),
        error["message"].as_str().expect("message").to_owned(),
    )
}

#[tokio::test]
async fn every_tool_is_listed_with_its_schemas() {
    let appliance = trusted().await;
    let client = agent(&appliance, "lister").await;
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "agent_settings",
            "cancel_scheduled",
            "choose",
            "confirm",
            "converse",
            "detect_language",
            "get_status",
            "install_voice",
            "list_captures",
            "list_models",
            "list_scheduled",
            "list_voices",
            "remove_voice",
            "segment_sentences",
            "set_volume",
            "speak_text",
            "stop_speaking",
            "synthesize_speech",
            "transcribe_audio",
            "transcribe_batch",
            "transcribe_voice",
            "wait_for_person",
        ]
        .map(str::to_owned)
    );
    for tool in &tools {
        assert!(
            tool.input_schema.get("type").is_some(),
            "{} has an input schema",
            tool.name
        );
    }
    let listen = tools
        .iter()
        .find(|t| t.name == "transcribe_voice")
        .expect("listed");
    let output = listen.output_schema.as_ref().expect("an output schema");
    assert!(output["properties"]["end_reason"].is_object());
}

#[tokio::test]
async fn transcribe_voice_returns_what_the_person_said() {
    let appliance = trusted().await;
    appliance.room.will_say("turn the oven off", 50);
    let client = agent(&appliance, "kitchen").await;
    let result = call(&client, "transcribe_voice", json!({ "timeout_seconds": 5 })).await;
    let heard = ok(&result);
    assert_eq!(heard["text"], "turn the oven off");
    assert_eq!(heard["speech"], true);
    assert_eq!(heard["end_reason"], "end_of_speech");
    // Nobody speaks: the timeout, as the device says it.
    let result = call(
        &client,
        "transcribe_voice",
        json!({ "timeout_seconds": 0.5 }),
    )
    .await;
    let heard = ok(&result);
    assert_eq!(heard["text"], "(no speech detected)");
    assert_eq!(heard["end_reason"], "timeout");
}

#[tokio::test]
async fn a_second_listen_waits_or_is_told_the_microphone_is_busy() {
    let appliance = trusted().await;
    appliance.room.will_say("first", 600);
    appliance.room.will_say("second", 50);
    let (a, b, c) = (
        agent(&appliance, "alpha").await,
        agent(&appliance, "beta").await,
        agent(&appliance, "gamma").await,
    );
    let first =
        tokio::spawn(
            async move { call(&a, "transcribe_voice", json!({ "timeout_seconds": 5 })).await },
        );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let refused = call(&b, "transcribe_voice", json!({ "queue": false })).await;
    let (kind, message) = failed(&refused);
    assert_eq!(kind, "BusyError");
    assert!(message.contains("is busy: alpha is using it"), "{message}");
    assert_eq!(
        refused.structured_content.as_ref().expect("structured")["error"]["context"]["holder"],
        "alpha"
    );
    // Queued, it gets the microphone after the first and hears the next words.
    let queued = call(&c, "transcribe_voice", json!({ "timeout_seconds": 5 })).await;
    assert_eq!(ok(&queued)["text"], "second");
    let first = first.await.expect("joins");
    assert_eq!(ok(&first)["text"], "first");
}

#[tokio::test]
async fn confirm_and_choose_read_the_answer_with_the_rooms_words() {
    let appliance = trusted().await;
    let client = agent(&appliance, "deployer").await;
    appliance.room.will_say("Yeah, go ahead.", 20);
    let result = call(
        &client,
        "confirm",
        json!({ "question": "Deploy to production?" }),
    )
    .await;
    let confirmed = ok(&result);
    assert_eq!(confirmed["answer"], "yes");
    assert_eq!(confirmed["by"], "voice");
    assert_eq!(confirmed["transcript"], "Yeah, go ahead.");

    appliance.room.will_say("Which one?", 20);
    let result = call(
        &client,
        "confirm",
        json!({ "question": "Delete the branch?" }),
    )
    .await;
    assert_eq!(ok(&result)["answer"], "unclear");

    appliance.room.will_say("the second one please", 20);
    let result = call(
        &client,
        "choose",
        json!({ "question": "Lunch?", "options": ["sushi", "pizza", "salad"] }),
    )
    .await;
    let chosen = ok(&result);
    assert_eq!(chosen["choice"], "pizza");
    assert_eq!(chosen["index"], 1);
    assert_eq!(chosen["matched_by"], "ordinal");
    let spoken = appliance.room.spoken();
    assert!(spoken.iter().any(|s| s.contains("Deploy to production?")));
    assert!(
        spoken
            .join(" ")
            .contains("Lunch? One: sushi. Two: pizza. Three: salad."),
        "{spoken:?}"
    );

    // One option is no choice: refused before anything is said.
    let said = appliance.room.spoken().len();
    let result = call(
        &client,
        "choose",
        json!({ "question": "Q?", "options": ["only"] }),
    )
    .await;
    let (kind, message) = failed(&result);
    assert_eq!(kind, "InvalidArgumentError");
    assert!(message.contains("2"), "{message}");
    assert_eq!(appliance.room.spoken().len(), said);
}

#[tokio::test]
async fn converse_speaks_then_listens_in_one_call() {
    let appliance = trusted().await;
    let client = agent(&appliance, "chat").await;
    appliance.room.will_say("at seven", 20);
    let result = call(
        &client,
        "converse",
        json!({ "text": "When shall I wake you? Say a time.", "timeout_seconds": 3 }),
    )
    .await;
    let conversed = ok(&result);
    assert_eq!(conversed["spoken"], "When shall I wake you? Say a time.");
    assert_eq!(conversed["speech_status"], "spoken");
    assert_eq!(conversed["text"], "at seven");
    assert_eq!(
        appliance.room.spoken(),
        ["When shall I wake you?", "Say a time."]
    );
}

#[tokio::test]
async fn arguments_are_checked_with_the_field_named() {
    let appliance = trusted().await;
    let client = agent(&appliance, "careless").await;
    // The wrong type, naming the field.
    let (kind, message) = failed(&call(&client, "set_volume", json!({ "volume": "loud" })).await);
    assert_eq!(kind, "InvalidArgumentError");
    assert!(message.contains("`volume` must be integer"), "{message}");
    let (kind, message) = failed(
        &call(
            &client,
            "choose",
            json!({ "question": "Q?", "options": "a, b" }),
        )
        .await,
    );
    assert_eq!(kind, "InvalidArgumentError");
    assert!(message.contains("`options` must be array"), "{message}");
    // A field missing, a value not in an enum: rmcp's refusals, typed.
    let (kind, message) = failed(&call(&client, "confirm", json!({})).await);
    assert_eq!(kind, "InvalidArgumentError");
    assert!(message.contains("question"), "{message}");
    let (kind, message) = failed(
        &call(
            &client,
            "speak_text",
            json!({ "text": "Hello.", "priority": "urgentt" }),
        )
        .await,
    );
    assert_eq!(kind, "InvalidArgumentError");
    assert!(message.contains("urgentt"), "{message}");
    // The right type out of range: the room's own words, typed.
    let (kind, message) = failed(&call(&client, "set_volume", json!({ "volume": 150 })).await);
    assert_eq!(kind, "InvalidArgumentError");
    assert!(message.contains("0–100"), "{message}");
    let (kind, _) =
        failed(&call(&client, "transcribe_voice", json!({ "timeout_seconds": 0 })).await);
    assert_eq!(kind, "InvalidArgumentError");
    let (kind, _) = failed(&call(&client, "speak_text", json!({ "text": "  " })).await);
    assert_eq!(kind, "InvalidArgumentError");
    // The room's failures keep their kind: no models in this room.
    let (kind, message) = failed(
        &call(
            &client,
            "transcribe_audio",
            json!({ "audio_path": "/tmp/x.wav" }),
        )
        .await,
    );
    assert_eq!(kind, "ModelNotLoadedError");
    assert!(message.contains("no speech models"), "{message}");
}

#[tokio::test]
async fn get_status_shows_the_volume_and_who_holds_the_microphone() {
    let appliance = trusted().await;
    let (a, b) = (
        agent(&appliance, "alpha").await,
        agent(&appliance, "beta").await,
    );
    let set = call(&b, "set_volume", json!({ "volume": 35 })).await;
    assert_eq!(ok(&set)["volume"], 35);
    appliance.room.will_say("hello", 800);
    let listening =
        tokio::spawn(
            async move { call(&a, "transcribe_voice", json!({ "timeout_seconds": 5 })).await },
        );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = call(&b, "get_status", json!({})).await;
    let status = ok(&status);
    assert_eq!(status["volume"], 35);
    assert_eq!(status["recording"], true, "{status}");
    assert_eq!(status["floor"]["holder"]["who"], "alpha", "{status}");
    let doing: Vec<_> = status["clients"]
        .as_array()
        .expect("clients")
        .iter()
        .map(|c| (c["name"].clone(), c["doing"].clone()))
        .collect();
    assert!(
        doing.contains(&(json!("alpha"), json!("listening"))),
        "{doing:?}"
    );
    assert_eq!(ok(&listening.await.expect("joins"))["text"], "hello");
    let status = call(&b, "get_status", json!({})).await;
    assert_eq!(ok(&status)["recording"], false);
    assert!(ok(&status)["floor"]["holder"].is_null());
}

#[tokio::test]
async fn a_call_whose_agent_goes_away_frees_the_microphone() {
    let appliance = trusted().await;
    let leaving = agent(&appliance, "leaving").await;
    let call_in_flight = tokio::spawn(async move {
        let _ = call(
            &leaving,
            "transcribe_voice",
            json!({ "timeout_seconds": 30 }),
        )
        .await;
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The agent's connection drops mid-call.
    call_in_flight.abort();
    let _ = call_in_flight.await;
    let other = agent(&appliance, "other").await;
    appliance.room.will_say("still here", 20);
    let mut result = None;
    // The server notices the closed connection and cancels the listen.
    for _ in 0..50 {
        let r = call(
            &other,
            "transcribe_voice",
            json!({ "queue": false, "timeout_seconds": 2 }),
        )
        .await;
        if r.is_error != Some(true) {
            result = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let result = result.expect("the microphone came free within 5 s");
    assert_eq!(ok(&result)["text"], "still here");
}

#[tokio::test]
async fn an_unpaired_agent_is_told_to_pair() {
    let appliance = appliance(AuthConfig {
        trust_loopback: false,
        ..AuthConfig::default()
    })
    .await;
    let client = agent(&appliance, "stranger").await;
    appliance.room.will_say("secret", 20);
    let result = call(&client, "transcribe_voice", json!({})).await;
    let (kind, message) = failed(&result);
    assert_eq!(kind, "NotPairedError");
    assert!(message.contains("hark pair"), "{message}");
    // Nothing reached the room: the person's words are still to be heard.
    assert_eq!(appliance.room.waiting_utterances(), 1);
}
