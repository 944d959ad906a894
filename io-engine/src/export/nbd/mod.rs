//! NBD (Network Block Device), the first export protocol: wire constants
//! and encoders ([`proto`]), the option phase ([`handshake`]) and request
//! parsing and validation ([`transmission`]) as sans-IO code; the view of
//! the export registry the option phase sees ([`ExportLookup`]);
//! connections on reactors ([`Connection`], in explicit phases);
//! listeners ([`NbdServer`]) and their bounds on clients that have not
//! reached transmission ([`Refusal`], [`SessionLimit`]); TLS after
//! `STARTTLS` ([`TlsConfig`], a per-connection session driven on the
//! reactor); counters ([`stats`]) and client-visible request durations
//! ([`request_durations`]).
//!
//! Thread: listeners run on the control-plane runtime; each connection runs
//! on one reactor from accept to close (see each module).

mod admission;
mod allocation;
mod block_limits;
mod conn;
mod conn_error;
mod export_info;
mod export_lookup;
pub mod handshake;
mod hold;
mod phase;
pub mod proto;
mod refusal;
mod request_durations;
mod server;
mod session_limit;
pub mod stats;
#[cfg(any(test, fuzzing))]
pub mod testing;
mod tls_config;
mod tls_mode;
mod tls_session;
pub mod transmission;

pub use allocation::Allocation;
pub use block_limits::BlockLimits;
pub use conn::Connection;
pub use conn_error::ConnError;
pub use export_info::ExportInfo;
pub use export_lookup::ExportLookup;
pub use phase::LINGER;
pub use refusal::Refusal;
pub use server::{Listener, NbdServer};
pub use session_limit::SessionLimit;
pub use stats::NbdCounters;
pub use tls_config::TlsConfig;
pub use tls_mode::TlsMode;
