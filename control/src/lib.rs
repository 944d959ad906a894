//! io-engine-ctl: the command-line client of the engine's gRPC API.
//!
//! Empty until the control-plane issue lands the API it talks to; the crate
//! exists so the workspace has the layout of `docs/architecture.md`.
