//! [`ModelConfig`] and [`WqConfig`]: what a model DSA device offers.
//!
//! Thread: any (plain values).

use std::time::Duration;

use crate::accel::dsa::portal::WqMode;
use crate::accel::dsa::spec::{self, opcode};

/// The default distance between a region's virtual address and its IOVA
/// in the model's address space (2^47, above every user-space address on
/// x86_64): a driver that puts a virtual address in a descriptor instead
/// of the address [`DmaMemory`](crate::env::dma::DmaMemory) gives hits
/// no mapped memory and gets a page fault.
pub const IOVA_OFFSET: u64 = 1 << 47;

/// One work queue of a model device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WqConfig {
    /// Dedicated or shared.
    pub mode: WqMode,
    /// Entries.
    pub size: u32,
    /// The largest transfer of one descriptor, in bytes.
    pub max_transfer: u64,
    /// The largest batch, in descriptors.
    pub max_batch: u32,
    /// Whether descriptors may set Block on Fault.
    pub block_on_fault: bool,
}

impl Default for WqConfig {
    /// A dedicated WQ of 128 entries (Sapphire Rapids' total), 2 MiB
    /// transfers and batches of up to 1024 (its GENCAP maximum).
    fn default() -> Self {
        WqConfig {
            mode: WqMode::Dedicated,
            size: 128,
            max_transfer: 2 << 20,
            max_batch: 1024,
            block_on_fault: false,
        }
    }
}

impl WqConfig {
    /// A shared WQ of `size` entries, the other settings the defaults.
    pub fn shared(size: u32) -> WqConfig {
        WqConfig {
            mode: WqMode::Shared,
            size,
            ..WqConfig::default()
        }
    }
}

/// What a model device offers, and how its thread waits.
#[derive(Debug, Clone)]
pub struct ModelConfig {
    /// Its work queues (at least one).
    pub wqs: Vec<WqConfig>,
    /// OPCAP: the operations it supports. The default is every operation
    /// the model implements.
    pub opcap: [u64; 4],
    /// IOVA minus virtual address of every mapped region
    /// ([`IOVA_OFFSET`] by default; 0 models SVA, where the device uses
    /// virtual addresses).
    pub iova_offset: u64,
    /// How long the device thread spins idle before it parks.
    pub spin: Duration,
}

/// The operations the model implements: those of DSA 1.0 the engine
/// drives.
pub const IMPLEMENTED: &[u8] = opcode::DSA1;

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            wqs: vec![WqConfig::default()],
            opcap: spec::opcap_of(IMPLEMENTED),
            iova_offset: IOVA_OFFSET,
            spin: Duration::from_micros(50),
        }
    }
}

impl ModelConfig {
    /// One WQ, as given.
    pub fn with_wq(wq: WqConfig) -> ModelConfig {
        ModelConfig {
            wqs: vec![wq],
            ..ModelConfig::default()
        }
    }
}
