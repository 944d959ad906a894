//! Why a connection closes on its own initiative.
//!
//! Thread: the connection's reactor (plain data).

use super::handshake::HandshakeError;
use super::transmission::ProtocolError;

/// Why a connection closes on its own initiative.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The client broke the option phase's rules.
    #[error("handshake failed: {0}")]
    Handshake(#[from] HandshakeError),
    /// The client's request stream can no longer be framed.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}
