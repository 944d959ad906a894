//! Why the gRPC server could not serve.
//!
//! Thread: the control-plane runtime.

/// Errors of the gRPC server.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The transport failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built.
    #[error("gRPC reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
}
