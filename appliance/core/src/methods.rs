//! The appliance's own JSON-RPC methods beside MCP's, named once for the
//! server that answers them and the command-line client that sends them.

/// The simulated board's controls (`hark button`, `hark mute`), served on
/// the Unix socket only.
pub const BOARD: &str = "hark/board";

/// One step of `hark selftest` ([`crate::selftest::Request`]), served on
/// the Unix socket only.
pub const SELFTEST: &str = "hark/selftest";

/// Manages tokens (`hark token …`): the Unix socket, or an admin token.
pub const TOKENS: &str = "hark/tokens";

/// Asks to pair by the button (`hark pair`): open to unpaired clients,
/// answered when the person presses (or not).
pub const PAIR: &str = "hark/pair";

/// Presents a token on a stream connection (raw TCP, WebSocket), before or
/// after `initialize`. Answered by the transport itself.
pub const AUTH: &str = "hark/auth";

/// A [`TOKENS`] request (`hark token create|list|revoke`): what the
/// command line sends and the server reads.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "lowercase", deny_unknown_fields)]
pub enum TokenRequest {
    Create {
        name: String,
        /// `listen,speak` (the default), … or `all`.
        #[serde(default)]
        scopes: Option<String>,
        #[serde(default)]
        replace: bool,
    },
    List,
    Revoke {
        name: String,
    },
}
