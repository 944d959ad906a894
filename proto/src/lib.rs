//! The io-engine gRPC API, package `io_engine.v1`: messages, clients and
//! server traits generated from `proto/io_engine/v1/*.proto`. Every message
//! implements `serde::Serialize` (the JSON of `io-engine-ctl --output json`;
//! `build.rs` says how).
//!
//! Thread: any (generated code). The daemon serves it on its control-plane
//! runtime; `io-engine-ctl` and the tests are its clients.

#![allow(missing_docs)] // the documentation is in the .proto files

mod json;

/// Package `io_engine.v1`.
pub mod v1 {
    tonic::include_proto!("io_engine.v1");

    /// Encoded file descriptor set of the API, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("io_engine_v1_descriptor");
}
