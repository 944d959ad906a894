//! NVMe in-band authentication, DH-HMAC-CHAP (NVMe Base 2.0 section 8.13,
//! as the Linux host and target implement it): the `DHHC-1:` secrets a
//! share gives its allowed hosts, the key transform and the HMAC
//! responses, the ffdhe2048 exchange, and the transaction one queue runs
//! through AUTH_Send and AUTH_Receive between its Connect and its first
//! other command.
//!
//! Thread: secrets are parsed on the control plane (or `main`) and shared
//! read-only; a queue's transaction runs on its connection's reactor.

mod ffdhe2048;
mod hash;
mod host_secrets;
mod keys;
pub mod message;
mod secret;
mod transaction;

pub use ffdhe2048::Ffdhe2048;
pub use hash::Hash;
pub use host_secrets::HostSecrets;
pub use keys::DhchapKeys;
pub use secret::{Secret, SecretError};
pub use transaction::{Outcome, Received, Transaction};

#[cfg(test)]
mod tests;
