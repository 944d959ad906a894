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
//! Each queue pair is a sans-IO core ([`QueuePair`]: PDUs, Connect,
//! authentication, admin and NVM commands, every bound a host is held to)
//! inside a thin transport (`connection`: the socket and the device
//! channel on a reactor). What every queue shares is the [`Target`]: the
//! exports, the controllers, the hosts' queue counts, the DH budget and
//! the rate limits of the log lines hosts cause.
//!
//! Thread: listeners on the control-plane runtime; every queue pair (one
//! TCP connection) on one reactor from accept to close; a controller's
//! state on its admin queue's reactor.

pub mod auth;
pub mod command;
mod completion;
mod connection;
mod controller;
mod cqe;
mod dh_budget;
mod digest_offload;
mod digest_offload_min;
mod digest_queue;
mod host_queues;
mod identify;
mod io_outcome;
mod limits;
mod listener;
pub mod nqn;
pub mod pdu;
mod peer_event;
mod peer_logs;
mod queue_pair;
mod recv_buf;
mod server;
mod share_options;
mod stats;
mod subsystem;
mod subsystem_error;
mod subsystems;
mod target;
#[cfg(any(test, fuzzing))]
pub mod testing;

pub use command::Command;
pub use completion::{Completion, Status};
pub use controller::{Controller, Controllers};
pub use cqe::Cqe;
pub use dh_budget::{DH_BURST, DH_RATE, DhBudget};
pub use digest_offload::{DIGEST_OFFLOAD_FLOOR, DIGEST_OFFLOAD_MIN, DigestOffload};
pub use digest_offload_min::DigestOffloadMin;
pub use host_queues::{HostQueues, HostSlot};
pub use io_outcome::IoOutcome;
pub use limits::{Limits, QUEUES_PER_HOST};
pub use listener::{Listener, Refusal};
pub use peer_event::PeerEvent;
pub use peer_logs::PeerLogs;
pub use queue_pair::{CONNECT_DEADLINE, COPY_LIMITS, INPUT_BYTES, OUTPUT_CAP, QueuePair};
pub use recv_buf::RecvBuf;
pub use server::serve;
pub use share_options::ShareOptions;
pub use stats::{NvmfCounters, NvmfStats};
pub use subsystem::Subsystem;
pub use subsystem_error::SubsystemError;
pub use subsystems::Subsystems;
pub use target::Target;
