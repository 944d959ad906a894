//! The device registry: creates devices from URIs, finds, lists and
//! destroys them, and opens them into descriptors.
//!
//! Thread: any. The registry's map sits behind a mutex, taken only on the
//! control path (create, destroy, open, list); the data path holds a
//! [`BdevDesc`] and never touches the map.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::Bdev;
use super::channel::IoChannel;
use super::io::IoSlot;
use super::malloc::Malloc;
use super::null::Null;
use super::stats::{DeviceStats, IoStats};
use super::uri::{self, BdevKind, BdevSpec, UriError};
use crate::accel::Accel;
use crate::env::dma::DmaError;
use crate::pool::{DEFAULT_CACHE_SIZE, ObjectPool, PoolConfig, PoolError, PoolStats};

/// Errors of the registry and of opening devices.
#[derive(Debug, thiserror::Error)]
pub enum BdevError {
    /// The URI does not describe a device.
    #[error("invalid device URI: {0}")]
    Uri(#[from] UriError),
    /// A device with that name exists.
    #[error("a device named {0:?} already exists")]
    Exists(String),
    /// No device with that name.
    #[error("no device named {0:?}")]
    NotFound(String),
    /// The device is open (by a channel, a share, a benchmark).
    #[error("device {name:?} is open ({open} descriptor(s)); close it before destroying it")]
    Busy {
        /// Device name.
        name: String,
        /// Open descriptors.
        open: usize,
    },
    /// The device's memory could not be had.
    #[error("cannot allocate memory for device {name:?}: {source}")]
    NoMemory {
        /// Device name.
        name: String,
        /// Why.
        source: DmaError,
    },
    /// A channel can only be opened on a reactor thread.
    #[error("IO channels are opened on a reactor thread")]
    NotOnReactor,
    /// The IO pool could not be built.
    #[error(transparent)]
    Pool(#[from] PoolError),
}

/// Shape of the IO object pool shared by every device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoPoolConfig {
    /// IO objects in total (Mayastor: 65535).
    pub size: usize,
    /// Objects cached per core (Mayastor: 512); 0 disables the cache.
    pub cache: usize,
    /// Cores that will submit IO.
    pub cores: usize,
}

impl IoPoolConfig {
    /// Mayastor's sizes for `cores` cores.
    pub fn new(cores: usize) -> Self {
        IoPoolConfig {
            size: 65535,
            cache: DEFAULT_CACHE_SIZE,
            cores,
        }
    }
}

/// What the registry keeps per device.
pub(super) struct Entry {
    bdev: Arc<dyn Bdev>,
    open: AtomicUsize,
    stats: DeviceStats,
}

/// A device's description, as the control plane shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BdevInfo {
    /// Name.
    pub name: String,
    /// Identity.
    pub uuid: uuid::Uuid,
    /// Canonical URI.
    pub uri: String,
    /// `null` or `malloc`.
    pub product: String,
    /// Bytes per block.
    pub block_size: u32,
    /// Number of blocks.
    pub num_blocks: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// Open descriptors.
    pub open: usize,
}

impl BdevInfo {
    fn of(e: &Entry) -> BdevInfo {
        let b = &e.bdev;
        BdevInfo {
            name: b.name().to_string(),
            uuid: b.uuid(),
            uri: b.uri(),
            product: b.product().to_string(),
            block_size: b.block_size(),
            num_blocks: b.num_blocks(),
            size_bytes: b.size_bytes(),
            open: e.open.load(Ordering::Relaxed),
        }
    }
}

/// The set of devices of one engine, and the IO object pool they share.
pub struct BdevRegistry {
    devices: Mutex<BTreeMap<String, Arc<Entry>>>,
    io_pool: Arc<ObjectPool<IoSlot>>,
    /// Held while a device's memory is checked and mapped, so two creates
    /// are never both checked against the same free memory. Lookups do not
    /// wait for it.
    building: Mutex<()>,
    /// The accel framework that moves the data of devices that move data.
    accel: Arc<Accel>,
}

impl BdevRegistry {
    /// An empty registry with an IO pool of the given shape, its devices'
    /// data moved by the software accel module.
    pub fn new(pool: IoPoolConfig) -> Result<BdevRegistry, BdevError> {
        Self::with_accel(pool, Accel::software())
    }

    /// An empty registry whose devices move data through `accel`.
    pub fn with_accel(pool: IoPoolConfig, accel: Arc<Accel>) -> Result<BdevRegistry, BdevError> {
        let io_pool = ObjectPool::new(
            PoolConfig::new("bdev_io", pool.size, pool.cores).cache_size(pool.cache),
            |_| IoSlot::default(),
        )?;
        Ok(BdevRegistry {
            devices: Mutex::new(BTreeMap::new()),
            io_pool: Arc::new(io_pool),
            building: Mutex::new(()),
            accel,
        })
    }

    fn devices(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Entry>>> {
        // A panic while holding the lock leaves the map itself consistent
        // (every mutation is a single insert or remove).
        self.devices.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Creates a device from its URI.
    pub fn create(&self, uri_text: &str) -> Result<BdevInfo, BdevError> {
        let spec = uri::parse(uri_text)?;
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        // Check the name before allocating (a malloc device may be large).
        if self.devices().contains_key(&spec.name) {
            return Err(BdevError::Exists(spec.name));
        }
        let bdev = self.build(spec)?;
        let mut devices = self.devices();
        let name = bdev.name().to_string();
        if devices.contains_key(&name) {
            return Err(BdevError::Exists(name));
        }
        let entry = Arc::new(Entry {
            bdev,
            open: AtomicUsize::new(0),
            stats: DeviceStats::new(),
        });
        let info = BdevInfo::of(&entry);
        devices.insert(name, entry);
        tracing::info!(name = %info.name, uri = %info.uri, "device created");
        Ok(info)
    }

    fn build(&self, spec: BdevSpec) -> Result<Arc<dyn Bdev>, BdevError> {
        Ok(match spec.kind {
            BdevKind::Null => Arc::new(Null::new(spec)),
            BdevKind::Malloc => {
                let name = spec.name.clone();
                Arc::new(
                    Malloc::new(spec, self.accel.clone())
                        .map_err(|source| BdevError::NoMemory { name, source })?,
                )
            }
        })
    }

    /// Destroys a device that no one has open.
    pub fn destroy(&self, name: &str) -> Result<(), BdevError> {
        let mut devices = self.devices();
        let entry = devices
            .get(name)
            .ok_or_else(|| BdevError::NotFound(name.into()))?;
        // `open` leaves 0 only in `open`, under this lock (a clone needs a
        // descriptor, so it never raises 0), so the check holds.
        let open = entry.open.load(Ordering::Acquire);
        if open > 0 {
            return Err(BdevError::Busy {
                name: name.into(),
                open,
            });
        }
        let removed = devices.remove(name);
        drop(devices);
        // The device's memory is released here, outside the lock.
        drop(removed);
        tracing::info!(name, "device destroyed");
        Ok(())
    }

    /// Describes one device.
    pub fn get(&self, name: &str) -> Option<BdevInfo> {
        self.devices().get(name).map(|e| BdevInfo::of(e))
    }

    /// Describes every device, by name.
    pub fn list(&self) -> Vec<BdevInfo> {
        self.devices().values().map(|e| BdevInfo::of(e)).collect()
    }

    /// Opens a device: the descriptor keeps it from being destroyed and opens
    /// channels on reactors.
    pub fn open(&self, name: &str) -> Result<BdevDesc, BdevError> {
        let devices = self.devices();
        let entry = devices
            .get(name)
            .ok_or_else(|| BdevError::NotFound(name.into()))?;
        entry.open.fetch_add(1, Ordering::AcqRel);
        Ok(BdevDesc {
            entry: entry.clone(),
            io_pool: self.io_pool.clone(),
        })
    }

    /// IO counters of one device.
    pub fn io_stats(&self, name: &str) -> Option<IoStats> {
        self.devices().get(name).map(|e| e.stats.snapshot())
    }

    /// The counters of device `name`, or of every device, for a reset: the
    /// handle goes to each reactor, which zeroes its own entries without
    /// touching the registry's lock.
    pub fn stats_reset(&self, name: Option<&str>) -> Result<StatsReset, BdevError> {
        let devices = self.devices();
        let entries = match name {
            Some(n) => vec![
                devices
                    .get(n)
                    .ok_or_else(|| BdevError::NotFound(n.into()))?
                    .clone(),
            ],
            None => devices.values().cloned().collect(),
        };
        Ok(StatsReset { entries })
    }

    /// Counters of the shared IO object pool.
    pub fn io_pool_stats(&self) -> PoolStats {
        self.io_pool.stats()
    }
}

/// Device counters to zero, one core at a time (see
/// [`BdevRegistry::stats_reset`]). Cheap to clone.
#[derive(Clone)]
pub struct StatsReset {
    entries: Vec<Arc<Entry>>,
}

impl StatsReset {
    /// Zeroes the calling thread's entries: a reactor's own, or, off the
    /// reactors, the one shared by threads without a core slot.
    pub fn reset_local(&self) {
        let slot = crate::env::core_slot::current();
        for e in &self.entries {
            e.stats.reset(slot);
        }
    }
}

/// An open device. `Send + Sync`: hand it to the reactors that will open
/// channels on it. Dropping the last one closes the device.
pub struct BdevDesc {
    entry: Arc<Entry>,
    io_pool: Arc<ObjectPool<IoSlot>>,
}

impl BdevDesc {
    /// The device.
    pub fn bdev(&self) -> &Arc<dyn Bdev> {
        &self.entry.bdev
    }

    /// Opens a channel on the calling reactor.
    pub fn open_channel(&self) -> Result<IoChannel, BdevError> {
        IoChannel::open(self.clone())
    }

    /// The device's IO counters.
    pub fn io_stats(&self) -> IoStats {
        self.entry.stats.snapshot()
    }

    pub(super) fn stats(&self) -> &DeviceStats {
        &self.entry.stats
    }

    pub(super) fn io_pool_arc(&self) -> Arc<ObjectPool<IoSlot>> {
        self.io_pool.clone()
    }
}

impl Clone for BdevDesc {
    fn clone(&self) -> Self {
        self.entry.open.fetch_add(1, Ordering::AcqRel);
        BdevDesc {
            entry: self.entry.clone(),
            io_pool: self.io_pool.clone(),
        }
    }
}

impl Drop for BdevDesc {
    fn drop(&mut self) {
        self.entry.open.fetch_sub(1, Ordering::AcqRel);
    }
}
