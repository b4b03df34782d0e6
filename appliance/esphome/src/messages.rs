//! The API messages Hark speaks, with their field numbers and type ids as
//! ESPHome's `api.proto` defines them (checked against aioesphomeapi
//! 46.23's descriptors). Fields Hark never sets or reads are left out:
//! protobuf skips what it does not know, both ways.

use prost::Message;

/// A message's type id on the wire.
pub trait Kind: Message + Default {
    const KIND: u32;
}

macro_rules! kinds {
    ($($name:ident = $id:expr),* $(,)?) => {
        $(impl Kind for $name { const KIND: u32 = $id; })*
    };
}

#[derive(Clone, PartialEq, Message)]
pub struct HelloRequest {
    #[prost(string, tag = "1")]
    pub client_info: String,
    #[prost(uint32, tag = "2")]
    pub api_version_major: u32,
    #[prost(uint32, tag = "3")]
    pub api_version_minor: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct HelloResponse {
    #[prost(uint32, tag = "1")]
    pub api_version_major: u32,
    #[prost(uint32, tag = "2")]
    pub api_version_minor: u32,
    #[prost(string, tag = "3")]
    pub server_info: String,
    #[prost(string, tag = "4")]
    pub name: String,
}

/// Older clients log in with a password; Hark has none to check.
#[derive(Clone, PartialEq, Message)]
pub struct AuthenticationRequest {
    #[prost(string, tag = "1")]
    pub password: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct AuthenticationResponse {
    #[prost(bool, tag = "1")]
    pub invalid_password: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct DisconnectRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct DisconnectResponse {}

#[derive(Clone, PartialEq, Message)]
pub struct PingRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct PingResponse {}

#[derive(Clone, PartialEq, Message)]
pub struct DeviceInfoRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct DeviceInfoResponse {
    #[prost(bool, tag = "1")]
    pub uses_password: bool,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub mac_address: String,
    #[prost(string, tag = "4")]
    pub esphome_version: String,
    #[prost(string, tag = "5")]
    pub compilation_time: String,
    #[prost(string, tag = "6")]
    pub model: String,
    #[prost(string, tag = "8")]
    pub project_name: String,
    #[prost(string, tag = "9")]
    pub project_version: String,
    #[prost(string, tag = "12")]
    pub manufacturer: String,
    #[prost(string, tag = "13")]
    pub friendly_name: String,
    #[prost(uint32, tag = "17")]
    pub voice_assistant_feature_flags: u32,
    #[prost(string, tag = "16")]
    pub suggested_area: String,
    #[prost(bool, tag = "19")]
    pub api_encryption_supported: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct ListEntitiesRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct ListEntitiesDoneResponse {}

#[derive(Clone, PartialEq, Message)]
pub struct SubscribeStatesRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct SubscribeHomeassistantServicesRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct SubscribeHomeAssistantStatesRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct SubscribeLogsRequest {
    #[prost(int32, tag = "1")]
    pub level: i32,
}

#[derive(Clone, PartialEq, Message)]
pub struct SubscribeVoiceAssistantRequest {
    #[prost(bool, tag = "1")]
    pub subscribe: bool,
    /// `VoiceAssistantSubscribeFlag`: the audio over this API (1 in the
    /// proto; aioesphomeapi sends 4).
    #[prost(uint32, tag = "2")]
    pub flags: u32,
}

/// A wake word the device offers.
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantWakeWord {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub wake_word: String,
    #[prost(string, repeated, tag = "3")]
    pub trained_languages: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantConfigurationRequest {}

#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantConfigurationResponse {
    #[prost(message, repeated, tag = "1")]
    pub available_wake_words: Vec<VoiceAssistantWakeWord>,
    #[prost(string, repeated, tag = "2")]
    pub active_wake_words: Vec<String>,
    #[prost(uint32, tag = "3")]
    pub max_active_wake_words: u32,
}

#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantSetConfiguration {
    #[prost(string, repeated, tag = "1")]
    pub active_wake_words: Vec<String>,
}

/// Home Assistant asks the satellite to say something (an announcement,
/// or the question of `ask_question` with `start_conversation`).
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantAnnounceRequest {
    #[prost(string, tag = "1")]
    pub media_id: String,
    #[prost(string, tag = "2")]
    pub text: String,
    #[prost(string, tag = "3")]
    pub preannounce_media_id: String,
    #[prost(bool, tag = "4")]
    pub start_conversation: bool,
}

#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantAnnounceFinished {
    #[prost(bool, tag = "1")]
    pub success: bool,
}

/// A timer Home Assistant keeps for the satellite (set by voice).
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantTimerEventResponse {
    /// `VoiceAssistantTimerEvent`: see [`timer`].
    #[prost(int32, tag = "1")]
    pub event_type: i32,
    #[prost(string, tag = "2")]
    pub timer_id: String,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(uint32, tag = "4")]
    pub total_seconds: u32,
    #[prost(uint32, tag = "5")]
    pub seconds_left: u32,
    #[prost(bool, tag = "6")]
    pub is_active: bool,
}

/// `VoiceAssistantTimerEvent`.
pub mod timer {
    pub const STARTED: i32 = 0;
    pub const UPDATED: i32 = 1;
    pub const CANCELLED: i32 = 2;
    pub const FINISHED: i32 = 3;
}

/// The satellite starts a run of Home Assistant's pipeline (`start`), or
/// ends the one running.
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantRequest {
    #[prost(bool, tag = "1")]
    pub start: bool,
    #[prost(string, tag = "2")]
    pub conversation_id: String,
    /// `VoiceAssistantRequestFlag`: see [`request`].
    #[prost(uint32, tag = "3")]
    pub flags: u32,
    #[prost(message, optional, tag = "4")]
    pub audio_settings: Option<VoiceAssistantAudioSettings>,
    /// The wake word the person said (the pipeline's own is skipped).
    #[prost(string, tag = "5")]
    pub wake_word_phrase: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantAudioSettings {
    #[prost(uint32, tag = "1")]
    pub noise_suppression_level: u32,
    #[prost(uint32, tag = "2")]
    pub auto_gain: u32,
    #[prost(float, tag = "3")]
    pub volume_multiplier: f32,
}

/// `VoiceAssistantRequestFlag`.
pub mod request {
    /// Home Assistant finds the end of speech itself.
    pub const USE_VAD: u32 = 1;
}

/// Home Assistant's answer to a start: port 0 is audio over this API.
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantResponse {
    #[prost(uint32, tag = "1")]
    pub port: u32,
    #[prost(bool, tag = "2")]
    pub error: bool,
}

/// A step of the run, from Home Assistant.
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantEventResponse {
    /// `VoiceAssistantEvent`: see [`event`].
    #[prost(int32, tag = "1")]
    pub event_type: i32,
    #[prost(message, repeated, tag = "2")]
    pub data: Vec<VoiceAssistantEventData>,
}

#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantEventData {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

impl VoiceAssistantEventResponse {
    /// The value of the data named `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.data
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.value.as_str())
    }
}

/// `VoiceAssistantEvent`.
pub mod event {
    pub const ERROR: i32 = 0;
    pub const RUN_START: i32 = 1;
    pub const RUN_END: i32 = 2;
    pub const STT_START: i32 = 3;
    pub const STT_END: i32 = 4;
    pub const INTENT_START: i32 = 5;
    pub const INTENT_END: i32 = 6;
    pub const TTS_START: i32 = 7;
    pub const TTS_END: i32 = 8;
    pub const STT_VAD_START: i32 = 11;
    pub const STT_VAD_END: i32 = 12;
}

/// The microphone's audio, 16-bit 16 kHz mono, both ways; `end` ends the
/// stream.
#[derive(Clone, PartialEq, Message)]
pub struct VoiceAssistantAudio {
    #[prost(bytes = "vec", tag = "1")]
    pub data: Vec<u8>,
    #[prost(bool, tag = "2")]
    pub end: bool,
}

kinds! {
    HelloRequest = 1,
    HelloResponse = 2,
    AuthenticationRequest = 3,
    AuthenticationResponse = 4,
    DisconnectRequest = 5,
    DisconnectResponse = 6,
    PingRequest = 7,
    PingResponse = 8,
    DeviceInfoRequest = 9,
    DeviceInfoResponse = 10,
    ListEntitiesRequest = 11,
    ListEntitiesDoneResponse = 19,
    SubscribeStatesRequest = 20,
    SubscribeLogsRequest = 28,
    SubscribeHomeassistantServicesRequest = 34,
    SubscribeHomeAssistantStatesRequest = 38,
    SubscribeVoiceAssistantRequest = 89,
    VoiceAssistantRequest = 90,
    VoiceAssistantResponse = 91,
    VoiceAssistantEventResponse = 92,
    VoiceAssistantAudio = 106,
    VoiceAssistantConfigurationRequest = 121,
    VoiceAssistantConfigurationResponse = 122,
    VoiceAssistantTimerEventResponse = 115,
    VoiceAssistantAnnounceRequest = 119,
    VoiceAssistantAnnounceFinished = 120,
    VoiceAssistantSetConfiguration = 123,
}

/// `VoiceAssistantFeature` flags of `DeviceInfoResponse`: what the
/// satellite can do (ESPHome's `voice_assistant.h`).
pub mod feature {
    pub const VOICE_ASSISTANT: u32 = 1 << 0;
    pub const SPEAKER: u32 = 1 << 1;
    pub const API_AUDIO: u32 = 1 << 2;
    pub const TIMERS: u32 = 1 << 3;
    pub const ANNOUNCE: u32 = 1 << 4;
    pub const START_CONVERSATION: u32 = 1 << 5;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_go_where_the_proto_puts_them() {
        let hello = HelloResponse {
            api_version_major: 1,
            api_version_minor: 10,
            server_info: "Hark".into(),
            name: "hark".into(),
        };
        // Tag 1 varint 1, tag 2 varint 10, tag 3 "Hark", tag 4 "hark".
        assert_eq!(
            hello.encode_to_vec(),
            [
                0x08, 1, 0x10, 10, 0x1a, 4, b'H', b'a', b'r', b'k', 0x22, 4, b'h', b'a', b'r', b'k'
            ]
        );
        let info = DeviceInfoResponse {
            voice_assistant_feature_flags: 3,
            ..Default::default()
        };
        // Field 17, varint: key (17 << 3) = 136 as a varint.
        assert_eq!(info.encode_to_vec(), [0x88, 0x01, 3]);
        // A field this side does not know is skipped.
        let with_unknown = [0x10, 1, 0x20, 1];
        let read = HelloRequest::decode(&with_unknown[..]).expect("decodes");
        assert_eq!(read.api_version_major, 1);
    }
}
