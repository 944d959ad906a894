//! Compiles the API's .proto files with the vendored protoc, so building
//! needs no system protobuf compiler. Also writes the file descriptor set
//! that the daemon serves through gRPC reflection.

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
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("io_engine_v1_descriptor.bin"))
        .compile_protos(&files, &["."])?;
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    Ok(())
}
