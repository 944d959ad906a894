//! The export registry: which devices are shared, over which protocol,
//! read-only or not, with how many connections; the rules every protocol
//! keeps (a shared device is held open and may not be destroyed; an
//! unshare refuses new connections at once and is over when the attached
//! ones have let the device go).
//!
//! Thread: any. The table sits behind a mutex taken on the control path
//! (share, unshare, list) and by a connection when its option phase looks
//! a share up and when it attaches; attached connections hold an
//! [`Attachment`] and never touch the table again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::release::Release;
use super::share_state::ShareState;
use super::share_watch::ShareWatch;
use super::{Attachment, ExportError, Protocol, Share, ShareInfo};
use crate::bdev::{BdevRegistry, IoType, Quoted};

/// Longest an unshare waits for attached connections to let the device
/// go. Shorter than the time an NBD connection waits for the rest of a
/// WRITE taken before the unshare (`nbd::LINGER`), so a client that sends
/// it after the unshare returned still has it executed; every other
/// connection lets go within a reactor round of finishing its IO.
pub const RELEASE_WAIT: Duration = Duration::from_millis(250);

struct Entry {
    share: Share,
    state: Arc<ShareState>,
}

/// The shared devices.
pub struct Exports {
    entries: Mutex<BTreeMap<String, Entry>>,
    max_per_export: usize,
}

impl Exports {
    /// An empty table; at most `max_per_export` connections per share
    /// (0: no limit).
    pub fn new(max_per_export: usize) -> Arc<Exports> {
        Arc::new(Exports {
            entries: Mutex::new(BTreeMap::new()),
            max_per_export,
        })
    }

    fn entries(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shares device `name` over `protocol`, opening it (it cannot be
    /// destroyed while shared).
    pub fn share(
        &self,
        registry: &BdevRegistry,
        name: &str,
        protocol: Protocol,
        read_only: bool,
    ) -> Result<ShareInfo, ExportError> {
        let mut entries = self.entries();
        if entries.contains_key(name) {
            return Err(ExportError::AlreadyShared(name.into()));
        }
        let desc = registry.open(name)?;
        // A device that takes no writes (a read-only backing) is shared
        // read-only whatever was asked: hosts then see a read-only disk
        // rather than one that fails every write.
        let read_only = read_only || !desc.bdev().supports(IoType::Write);
        let share = Share {
            name: name.to_string(),
            protocol,
            read_only,
            desc,
        };
        let entry = Entry {
            share,
            state: Arc::default(),
        };
        let shared = info(&entry);
        entries.insert(name.to_string(), entry);
        tracing::info!(export = name, %protocol, read_only, "device shared");
        Ok(shared)
    }

    /// Stops sharing `name`: new connections are refused at once, attached
    /// ones finish the IO they took and let the device go; the returned
    /// [`Release`] waits for that.
    pub fn unshare(&self, name: &str) -> Result<Release, ExportError> {
        let entry = self
            .entries()
            .remove(name)
            .ok_or_else(|| ExportError::NotShared(name.into()))?;
        entry.state.close();
        tracing::info!(export = name, "device unshared");
        Ok(Release {
            name: name.into(),
            state: entry.state,
        })
    }

    /// Every share, by name.
    pub fn list(&self) -> Vec<ShareInfo> {
        self.entries().values().map(info).collect()
    }

    /// Share `name`, if it is shared.
    pub fn get(&self, name: &str) -> Option<ShareInfo> {
        self.entries().get(name).map(info)
    }

    /// Refuses to let a shared device be destroyed.
    pub fn ensure_unshared(&self, name: &str) -> Result<(), ExportError> {
        match self.entries().get(name) {
            Some(e) => Err(ExportError::Shared {
                name: name.into(),
                protocol: e.share.protocol,
            }),
            None => Ok(()),
        }
    }

    /// The share a `protocol` client names: `name` exactly, or, for an
    /// empty name, the only share over `protocol` (as many servers do).
    pub fn find(&self, protocol: Protocol, name: &str) -> Option<Share> {
        self.with_entry(protocol, name, |e| e.share.clone())
    }

    /// Every share over `protocol`, by name.
    pub fn shares(&self, protocol: Protocol) -> Vec<Share> {
        self.entries()
            .values()
            .filter(|e| e.share.protocol == protocol)
            .map(|e| e.share.clone())
            .collect()
    }

    /// Why a `protocol` client may not attach to `name` now (the share is
    /// at its connection limit), or `None` if it may (or `name` names no
    /// share: the caller says so its own way).
    pub fn refusal(&self, protocol: Protocol, name: &str) -> Option<String> {
        let max = self.max_per_export;
        self.with_entry(protocol, name, |e| {
            (max != 0 && e.state.connections() >= max).then(|| {
                format!(
                    "export {} is at its limit of {max} connections; try again later",
                    Quoted(&e.share.name)
                )
            })
        })
        .flatten()
    }

    /// A watch on share `name`'s closing flag, for a connection that
    /// serves it without attaching (`None` if it is not shared).
    pub fn watch(&self, protocol: Protocol, name: &str) -> Option<ShareWatch> {
        self.with_entry(protocol, name, |e| ShareWatch::new(&e.state))
    }

    /// Attaches a connection whose option phase chose share `name`; `None`
    /// if the share went away meanwhile or is at its connection limit.
    pub fn attach(&self, protocol: Protocol, name: &str) -> Option<Attachment> {
        let entries = self.entries();
        let e = entries.get(name).filter(|e| e.share.protocol == protocol)?;
        let attached = Attachment::take(e.share.desc.clone(), &e.state, self.max_per_export);
        if attached.is_none() {
            tracing::warn!(
                export = name,
                max = self.max_per_export,
                "connection refused: the export is at its limit"
            );
        }
        attached
    }

    fn with_entry<R>(
        &self,
        protocol: Protocol,
        name: &str,
        f: impl FnOnce(&Entry) -> R,
    ) -> Option<R> {
        let entries = self.entries();
        let mut of_protocol = entries.values().filter(|e| e.share.protocol == protocol);
        let entry = match entries.get(name) {
            Some(e) if e.share.protocol == protocol => Some(e),
            Some(_) => None,
            None if name.is_empty() => match (of_protocol.next(), of_protocol.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            },
            None => None,
        };
        entry.map(f)
    }
}

fn info(e: &Entry) -> ShareInfo {
    ShareInfo {
        name: e.share.name.clone(),
        protocol: e.share.protocol,
        read_only: e.share.read_only,
        connections: e.state.connections(),
    }
}

#[cfg(test)]
mod tests;
