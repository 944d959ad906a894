//! Compiles the API's .proto files with the vendored protoc, so building
//! needs no system protobuf compiler. Also writes the file descriptor set
//! that the daemon serves through gRPC reflection.
//!
//! Every message derives `serde::Serialize`: `io-engine-ctl --output json`
//! prints the messages themselves, with the .proto field names, 64-bit
//! integers as JSON integers and absent messages and optional values as
//! `null`. The few fields that print otherwise carry a `serde` attribute
//! naming a function of `src/json.rs`.

/// The fields printed as their message's zero value when absent: the
/// per-operation counters of a device read as zeros, never `null`.
const ZEROS_IF_ABSENT: [&str; 6] = [
    ".io_engine.v1.BdevIoStats.read",
    ".io_engine.v1.BdevIoStats.write",
    ".io_engine.v1.BdevIoStats.unmap",
    ".io_engine.v1.BdevIoStats.flush",
    ".io_engine.v1.BdevIoStats.write_zeroes",
    ".io_engine.v1.BdevIoStats.copy",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY: a build script is single-threaded; nothing else reads the
    // environment concurrently.
    unsafe { std::env::set_var("PROTOC", protoc) };
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let files = [
        "io_engine/v1/bdev.proto",
        "io_engine/v1/stats.proto",
        "io_engine/v1/engine.proto",
        "io_engine/v1/perf.proto",
        "io_engine/v1/export.proto",
        "io_engine/v1/accel.proto",
    ];
    let mut builder = tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("io_engine_v1_descriptor.bin"))
        .message_attribute(".io_engine.v1", "#[derive(serde::Serialize)]");
    for field in ZEROS_IF_ABSENT {
        builder = builder.field_attribute(
            field,
            r#"#[serde(serialize_with = "crate::json::zeros_if_absent")]"#,
        );
    }
    builder.compile_protos(&files, &["."])?;
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    Ok(())
}
