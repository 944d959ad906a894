//! NBD (Network Block Device) export: wire constants and encoders
//! ([`proto`]), the option phase ([`handshake`]) and request parsing and
//! validation ([`transmission`]) as sans-IO code; the export table
//! ([`export`]); connections on reactors ([`conn`]); listeners ([`server`]);
//! counters ([`stats`]).
//!
//! Thread: listeners run on the control-plane runtime; each connection runs
//! on one reactor from accept to close (see each module).

pub mod conn;
pub mod export;
pub mod handshake;
pub mod proto;
pub mod server;
pub mod stats;
pub mod transmission;

pub use export::{ExportError, Exports, ShareInfo};
pub use server::{Dispatch, Listener, NbdServer};
pub use stats::NbdCounters;
