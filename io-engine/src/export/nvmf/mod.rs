//! The NVMe/TCP target (NVMe Base 2.0, NVMe over Fabrics 1.1 and the
//! NVMe/TCP transport 1.0, as the Linux host and SPDK's target implement
//! them): devices shared over NVMe-oF become subsystems with the device as
//! namespace 1, reached by hosts through the discovery subsystem and the
//! dynamic controller model; an allowed host given DH-HMAC-CHAP secrets
//! authenticates each queue after its Connect ([`auth`]). What NVMe-oF
//! adds to a share (its NQN, allowed hosts and their secrets) lives here,
//! in the [`Subsystems`] table of the [`Target`], not in the
//! protocol-independent export registry: a share over NVMe-oF is a
//! [`Subsystem`] plus the registry's share of its device.
//!
//! Thread: listeners on the control-plane runtime; every queue pair (one
//! TCP connection) on one reactor from accept to close (see
//! [`connection`]); a controller's state on its admin queue's reactor.

pub mod auth;
pub mod command;
mod completion;
mod connection;
mod controller;
mod identify;
mod limits;
mod listener;
pub mod nqn;
pub mod pdu;
mod server;
mod share_options;
mod stats;
mod subsystem;
mod subsystem_error;
mod subsystems;
mod target;

pub use command::Command;
pub use completion::{Completion, Status};
pub use controller::{Controller, Controllers};
pub use limits::Limits;
pub use listener::{Listener, Refusal};
pub use server::serve;
pub use share_options::ShareOptions;
pub use stats::{NvmfCounters, NvmfStats};
pub use subsystem::Subsystem;
pub use subsystem_error::SubsystemError;
pub use subsystems::Subsystems;
pub use target::Target;
