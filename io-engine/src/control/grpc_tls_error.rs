//! Why the gRPC TLS files cannot be used.
//!
//! Thread: `main`, before the control-plane runtime serves.

use std::path::PathBuf;

/// Why the TLS files cannot be used: one line naming the file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {why}", path.display())]
pub struct GrpcTlsError {
    /// The file at fault.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: String,
}
