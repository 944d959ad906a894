//! Exports: devices shared over a wire protocol. The registry
//! ([`Exports`]) keeps what every protocol has in common (names,
//! read-only, connection counts and limit, attach and detach, the refusal
//! to destroy a shared device, the wait for the device's release after an
//! unshare); each protocol ([`Protocol`]) brings its wire code and
//! connections, [`nbd`] and [`nvmf`], and keeps what it adds to a share
//! itself (NVMe-oF: its subsystems), so that the registry stays the same
//! for every protocol. What keeps connections that never finish their
//! handshake from locking others out is shared too: the bounded registry
//! of [`Handshakes`] and the rate-limited [`RefusalLog`].
//!
//! Thread: the registry is shared (control plane and connections, behind
//! one mutex); each protocol's connections live on reactors (see each
//! module).

// Input from the wire must never panic a reactor: no indexing, slicing,
// unwrap, expect or panic in the export layer (its tests aside). A length,
// count or offset a client controls is checked where it is read, and what
// cannot happen is answered as an error, not asserted.
#![cfg_attr(
    not(test),
    deny(
        clippy::indexing_slicing,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]

mod attachment;
mod buffers;
mod dispatch;
mod export_error;
mod exports;
mod flushed;
mod handshake_slot;
mod handshakes;
pub mod nbd;
pub mod nvmf;
mod output;
mod protocol;
mod refusal_log;
mod release;
mod share;
mod share_info;
mod share_state;
mod share_watch;
mod sink;
mod stream;

pub use attachment::Attachment;
use buffers::Buffers;
pub use dispatch::Dispatch;
pub use export_error::ExportError;
pub use exports::{Exports, RELEASE_WAIT};
use flushed::Flushed;
pub use handshake_slot::HandshakeSlot;
pub use handshakes::Handshakes;
use output::Output;
pub use protocol::Protocol;
pub use refusal_log::{REFUSAL_LOG_INTERVAL, RefusalLog};
pub use release::Release;
pub use share::Share;
pub use share_info::ShareInfo;
pub use share_watch::ShareWatch;
use sink::Sink;
pub use stream::Stream;
