//! The device registry: creates devices from URIs (built by the
//! [`Factory`]), finds, lists and destroys them, and opens them into
//! descriptors.
//!
//! Thread: any. The registry's map sits behind a mutex, taken only on the
//! control path (create, destroy, open, list); the data path holds a
//! [`BdevDesc`] and never touches the map.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::desc::BdevDesc;
use super::entry::Entry;
use super::error::BdevError;
use super::factory::Factory;
use super::info::BdevInfo;
use super::io::IoSlot;
use super::io_pool_config::IoPoolConfig;
use super::stats::IoStats;
use super::stats_reset::StatsReset;
use super::uri;
use crate::accel::Accel;
use crate::pool::{ObjectPool, PoolConfig, PoolStats};

/// The set of devices of one engine, and the IO object pool they share.
pub struct BdevRegistry {
    devices: Mutex<BTreeMap<String, Arc<Entry>>>,
    io_pool: Arc<ObjectPool<IoSlot>>,
    /// Held while a device's memory is checked and mapped, so two creates
    /// are never both checked against the same free memory. Lookups do not
    /// wait for it.
    building: Mutex<()>,
    /// Builds each kind of device.
    factory: Factory,
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
            factory: Factory::new(accel),
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
        let bdev = self.factory.build(spec)?;
        let mut devices = self.devices();
        let name = bdev.name().to_string();
        if devices.contains_key(&name) {
            return Err(BdevError::Exists(name));
        }
        let entry = Arc::new(Entry::new(bdev));
        let info = BdevInfo::of(&entry);
        devices.insert(name, entry);
        tracing::info!(name = %info.name, uri = %info.uri, "device created");
        Ok(info)
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
        Ok(BdevDesc::new(entry.clone(), self.io_pool.clone()))
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

    /// Adds a device built outside the factory (tests' own devices).
    #[cfg(test)]
    pub(super) fn insert(&self, bdev: Arc<dyn super::Bdev>) {
        let name = bdev.name().to_string();
        self.devices().insert(name, Arc::new(Entry::new(bdev)));
    }

    /// Counters of the shared IO object pool.
    pub fn io_pool_stats(&self) -> PoolStats {
        self.io_pool.stats()
    }
}
