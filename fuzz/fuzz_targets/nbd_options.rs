//! Fuzzes the NBD option phase: arbitrary client bytes after the greeting.
//!
//! Thread: libFuzzer's; `Handshake` is pure code, no IO.
//!
//! Each input is fed twice, once whole and once in small pieces the way a
//! connection's read buffer would see it; both runs must consume the same
//! bytes, write the same replies and end the same way. Every reply written
//! before the phase ends must be a well-formed option reply, and `feed` must
//! never report more bytes consumed than it was given.

#![no_main]

use std::sync::Arc;

use io_engine::export::nbd::TlsMode;
use io_engine::export::nbd::handshake::{Handshake, HandshakeConfig, HandshakeError, Outcome};
use io_engine::export::nbd::proto::{OPTION_REPLY_HEADER_LEN, OPTION_REPLY_MAGIC};
use io_engine::export::nbd::testing::StaticExports;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, PartialEq)]
struct Run {
    out: Vec<u8>,
    consumed: usize,
    outcome: Option<Outcome>,
    error: Option<HandshakeError>,
}

fn drive(input: &[u8], chunk: usize) -> Run {
    let mut h = Handshake::new(HandshakeConfig {
        exports: Arc::new(StaticExports::two()),
        tls: TlsMode::Off,
    });
    let mut greeting = Vec::new();
    h.greeting(&mut greeting);
    assert_eq!(greeting.len(), 18);

    let mut run = Run {
        out: Vec::new(),
        consumed: 0,
        outcome: None,
        error: None,
    };
    let mut buf = Vec::new();
    for piece in input.chunks(chunk.max(1)) {
        buf.extend_from_slice(piece);
        match h.feed(&buf, &mut run.out) {
            Ok((n, outcome)) => {
                assert!(n <= buf.len(), "consumed {n} of {}", buf.len());
                buf.drain(..n);
                run.consumed += n;
                if outcome.is_some() {
                    run.outcome = outcome;
                    return run;
                }
            }
            Err(e) => {
                // Fatal: the connection closes, so how much of the failing
                // call's input was used does not matter (and differs with
                // chunking).
                run.consumed = 0;
                run.error = Some(e);
                return run;
            }
        }
    }
    run
}

fn well_formed(mut out: &[u8]) -> bool {
    while !out.is_empty() {
        if out.len() < OPTION_REPLY_HEADER_LEN || out[..8] != OPTION_REPLY_MAGIC.to_be_bytes() {
            return false;
        }
        let len = u32::from_be_bytes([out[16], out[17], out[18], out[19]]) as usize;
        if out.len() < OPTION_REPLY_HEADER_LEN + len {
            return false;
        }
        out = &out[OPTION_REPLY_HEADER_LEN + len..];
    }
    true
}

fuzz_target!(|data: &[u8]| {
    let whole = drive(data, data.len());
    let pieces = drive(data, data.len() % 13 + 1);
    assert_eq!(whole, pieces, "chunking changed the result");
    assert!(whole.consumed <= data.len());
    if !matches!(whole.outcome, Some(Outcome::Transmission { .. })) {
        assert!(well_formed(&whole.out), "malformed option replies");
    }
});
