//! The export table: which devices are shared over NBD, under which name,
//! read-only or not, and how many connections each has.
//!
//! Thread: any. The table sits behind a mutex taken on the control path
//! (share, unshare, list) and once per connection when its handshake ends;
//! connections hold an [`Attached`] and never touch the table again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::handshake::{Allocation, ExportInfo, ExportLookup};
use super::proto::MAX_PAYLOAD;
use crate::bdev::{BdevDesc, BdevError, BdevRegistry};

/// Errors of the export table.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The device could not be opened.
    #[error(transparent)]
    Bdev(#[from] BdevError),
    /// The device is shared already.
    #[error("device {0:?} is already shared")]
    AlreadyShared(String),
    /// The device is not shared.
    #[error("device {0:?} is not shared")]
    NotShared(String),
}

struct Entry {
    desc: BdevDesc,
    info: ExportInfo,
    connections: Arc<AtomicUsize>,
    closing: Arc<AtomicBool>,
}

/// A share as the control plane shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ShareInfo {
    /// Export name (the device name).
    pub name: String,
    /// Read-only export.
    pub read_only: bool,
    /// Connections attached now.
    pub connections: usize,
}

/// The exported devices.
#[derive(Default)]
pub struct Exports {
    entries: Mutex<BTreeMap<String, Entry>>,
    max_per_export: AtomicUsize,
}

/// What a connection holds once its handshake picked an export: the device
/// and a place in the export's connection count (released on drop).
pub struct Attached {
    /// The device, open.
    pub desc: BdevDesc,
    /// The export as negotiated.
    pub info: ExportInfo,
    /// Set when the export is unshared: the connection finishes its IO and
    /// closes.
    pub closing: Arc<AtomicBool>,
    connections: Arc<AtomicUsize>,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Exports {
    /// An empty table; at most `max_per_export` connections per export
    /// (0: no limit).
    pub fn new(max_per_export: usize) -> Arc<Exports> {
        Arc::new(Exports {
            entries: Mutex::new(BTreeMap::new()),
            max_per_export: AtomicUsize::new(max_per_export),
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shares device `name` (opening it: it cannot be destroyed while shared).
    pub fn share(
        &self,
        registry: &BdevRegistry,
        name: &str,
        read_only: bool,
    ) -> Result<ShareInfo, ExportError> {
        let mut entries = self.entries();
        if entries.contains_key(name) {
            return Err(ExportError::AlreadyShared(name.into()));
        }
        let desc = registry.open(name)?;
        let bdev = desc.bdev();
        let info = ExportInfo {
            name: name.to_string(),
            description: format!("{} {}", bdev.product(), bdev.uri()),
            size: bdev.size_bytes(),
            read_only,
            block_size: bdev.block_size(),
            preferred: bdev.block_size().max(4096),
            max_payload: MAX_PAYLOAD,
            // Every connection sees every completed write at once: one device
            // memory, no per-connection cache.
            can_multi_conn: true,
            data_kind: if bdev.stores_data() {
                Allocation::Data
            } else {
                Allocation::Zero
            },
        };
        entries.insert(
            name.to_string(),
            Entry {
                desc,
                info,
                connections: Arc::new(AtomicUsize::new(0)),
                closing: Arc::new(AtomicBool::new(false)),
            },
        );
        tracing::info!(export = name, read_only, "device shared over NBD");
        Ok(ShareInfo {
            name: name.into(),
            read_only,
            connections: 0,
        })
    }

    /// Stops sharing `name`: new connections are refused at once; attached
    /// ones finish the IO they have in flight and close.
    pub fn unshare(&self, name: &str) -> Result<(), ExportError> {
        let entry = self
            .entries()
            .remove(name)
            .ok_or_else(|| ExportError::NotShared(name.into()))?;
        entry.closing.store(true, Ordering::Release);
        tracing::info!(export = name, "device unshared");
        Ok(())
    }

    /// Every share, by name.
    pub fn list(&self) -> Vec<ShareInfo> {
        self.entries()
            .values()
            .map(|e| ShareInfo {
                name: e.info.name.clone(),
                read_only: e.info.read_only,
                connections: e.connections.load(Ordering::Acquire),
            })
            .collect()
    }

    /// Whether `name` is shared, and read-only.
    pub fn get(&self, name: &str) -> Option<ShareInfo> {
        self.list().into_iter().find(|s| s.name == name)
    }

    /// Attaches a connection whose handshake chose `name`; `None` if the
    /// export went away meanwhile or is at its connection limit.
    pub fn attach(&self, name: &str) -> Option<Attached> {
        let entries = self.entries();
        let e = entries.get(name)?;
        let max = self.max_per_export.load(Ordering::Relaxed);
        let n = e.connections.fetch_add(1, Ordering::AcqRel);
        let attached = Attached {
            desc: e.desc.clone(),
            info: e.info.clone(),
            closing: e.closing.clone(),
            connections: e.connections.clone(),
        };
        if max != 0 && n >= max {
            tracing::warn!(
                export = name,
                max,
                "connection refused: the export is at its limit"
            );
            return None; // `attached` drops: the count goes back
        }
        Some(attached)
    }

    /// Unshares everything (daemon shutdown).
    pub fn unshare_all(&self) {
        let names: Vec<String> = self.entries().keys().cloned().collect();
        for n in names {
            let _ = self.unshare(&n);
        }
    }
}

impl ExportLookup for Exports {
    fn lookup(&self, name: &str) -> Option<ExportInfo> {
        let entries = self.entries();
        // An empty name picks the only export, as many servers do.
        match entries.get(name) {
            Some(e) => Some(e.info.clone()),
            None if name.is_empty() && entries.len() == 1 => {
                entries.values().next().map(|e| e.info.clone())
            }
            None => None,
        }
    }

    fn list(&self) -> Vec<(String, String)> {
        self.entries()
            .values()
            .map(|e| (e.info.name.clone(), e.info.description.clone()))
            .collect()
    }

    fn refusal(&self, name: &str) -> Option<String> {
        let max = self.max_per_export.load(Ordering::Relaxed);
        let entries = self.entries();
        let e = match entries.get(name) {
            Some(e) => e,
            None if name.is_empty() && entries.len() == 1 => entries.values().next()?,
            None => return None,
        };
        let n = e.connections.load(Ordering::Acquire);
        (max != 0 && n >= max).then(|| {
            format!(
                "export {} is at its limit of {max} connections; try again later",
                e.info.name
            )
        })
    }
}
