//! The DH-HMAC-CHAP secrets of a share's allowed hosts, by host NQN: a
//! host named here must authenticate after its Connect, on every queue.
//!
//! Thread: any (shared read-only: an `Arc` of a map, cloned with the
//! share).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::keys::DhchapKeys;

/// Host NQN to secrets.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HostSecrets(Arc<BTreeMap<String, Arc<DhchapKeys>>>);

impl HostSecrets {
    /// The secrets of `hosts` (host NQN, secrets).
    pub fn new(hosts: impl IntoIterator<Item = (String, DhchapKeys)>) -> HostSecrets {
        HostSecrets(Arc::new(
            hosts.into_iter().map(|(h, k)| (h, Arc::new(k))).collect(),
        ))
    }

    /// The secrets of host `nqn`, if it has any.
    pub fn get(&self, nqn: &str) -> Option<Arc<DhchapKeys>> {
        self.0.get(nqn).cloned()
    }

    /// The hosts that have secrets.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for HostSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.hosts()).finish()
    }
}
