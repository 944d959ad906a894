//! The `io-engine-ctl` binary: see the library for the commands.
//!
//! Thread: the process's main thread.

fn main() -> std::process::ExitCode {
    io_engine_ctl::run()
}
