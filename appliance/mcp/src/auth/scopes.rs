//! Which scope each tool needs (the scopes themselves are
//! [`hark_core::scopes`]).

pub use hark_core::scopes::{Scope, ScopeError, Scopes};

/// The scope a tool needs; `None`: anyone may call it. A tool missing from
/// this list needs `admin`, so a new tool is never open by accident.
pub fn for_tool(tool: &str) -> Option<Scope> {
    Some(match tool {
        "get_status" => return None,
        "transcribe_voice" | "converse" | "confirm" | "choose" | "wait_for_person" => Scope::Listen,
        "speak_text" | "stop_speaking" | "list_voices" | "segment_sentences" | "list_scheduled"
        | "cancel_scheduled" => Scope::Speak,
        "transcribe_audio" | "detect_language" | "transcribe_batch" | "synthesize_speech"
        | "list_models" => Scope::Files,
        _ => Scope::Admin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_tool_has_its_scope() {
        let tools: Vec<String> = crate::server::HarkServer::router()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        for tool in &tools {
            let scope = for_tool(tool);
            match tool.as_str() {
                "get_status" => assert_eq!(scope, None),
                "set_volume" | "install_voice" | "remove_voice" | "list_captures"
                | "agent_settings" => {
                    assert_eq!(scope, Some(Scope::Admin), "{tool}")
                }
                "transcribe_voice" | "converse" | "confirm" | "choose" | "wait_for_person" => {
                    assert_eq!(scope, Some(Scope::Listen), "{tool}")
                }
                _ => assert!(
                    matches!(scope, Some(Scope::Speak | Scope::Files)),
                    "{tool} is {scope:?}"
                ),
            }
        }
        assert!(tools.len() >= 18, "{tools:?}");
        assert_eq!(for_tool("a_tool_added_later"), Some(Scope::Admin));
    }
}
