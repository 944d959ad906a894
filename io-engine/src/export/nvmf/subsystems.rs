//! The NVMe-oF subsystems: one per device shared over NVMe-oF, each
//! under an NQN of its own that keeps the rules of [`nqn::check`].
//!
//! Thread: any. The table sits behind one mutex, taken on the control
//! path (share, unshare, list) and by a connection's Connect (`find`).
//! Lock order: [`Subsystems::add`] and [`Subsystems::remove`] hold it
//! across the export registry's share and unshare (so that an NQN is
//! checked and taken in one step with the share); the registry never
//! takes it, and nothing takes it while holding the registry's lock.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use super::nqn;
use super::{Subsystem, SubsystemError};

/// The subsystems, by export name.
#[derive(Default)]
pub struct Subsystems {
    table: Mutex<BTreeMap<String, Subsystem>>,
}

impl Subsystems {
    fn table(&self) -> MutexGuard<'_, BTreeMap<String, Subsystem>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The subsystem whose NQN is `nqn`.
    pub fn find(&self, nqn: &str) -> Option<Subsystem> {
        self.table().values().find(|s| s.nqn == nqn).cloned()
    }

    /// The subsystem that exports share `name`.
    pub fn of_export(&self, name: &str) -> Option<Subsystem> {
        self.table().get(name).cloned()
    }

    /// Every subsystem, by export name.
    pub fn all(&self) -> Vec<Subsystem> {
        self.table().values().cloned().collect()
    }

    /// Adds `sub` if its NQN keeps the rules, is no other share's, and
    /// `share` (the export registry's share of its device, run with the
    /// table locked) succeeds; returns what `share` does.
    pub fn add<T, E: From<SubsystemError>>(
        &self,
        sub: Subsystem,
        share: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        nqn::check(&sub.nqn).map_err(|why| SubsystemError::InvalidNqn {
            nqn: sub.nqn.clone(),
            why,
        })?;
        let mut table = self.table();
        // The device's own entry is not another's: sharing it again is
        // the registry's refusal.
        if let Some(other) = table
            .values()
            .find(|s| s.nqn == sub.nqn && s.export != sub.export)
        {
            return Err(SubsystemError::NqnInUse {
                nqn: sub.nqn,
                device: other.export.clone(),
            }
            .into());
        }
        let shared = share()?;
        tracing::info!(
            export = sub.export,
            nqn = sub.nqn,
            "NVMe-oF subsystem added"
        );
        table.insert(sub.export.clone(), sub);
        Ok(shared)
    }

    /// Runs `unshare` (the export registry's unshare of share `export`,
    /// with the table locked) and, if it succeeds, removes the share's
    /// subsystem if it has one; returns what `unshare` does.
    pub fn remove<T, E>(
        &self,
        export: &str,
        unshare: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        let mut table = self.table();
        let unshared = unshare()?;
        table.remove(export);
        Ok(unshared)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::nvmf::ShareOptions;
    use crate::export::nvmf::nqn::nqn_of;

    fn sub(export: &str, nqn: Option<&str>) -> Subsystem {
        ShareOptions {
            nqn: nqn.map(Into::into),
            ..ShareOptions::default()
        }
        .subsystem(export)
    }

    fn ok() -> Result<(), SubsystemError> {
        Ok(())
    }

    #[test]
    fn nqns_keep_the_rules_and_are_each_one_shares() {
        let t = Subsystems::default();
        t.add(sub("n0", None), ok).unwrap();
        assert_eq!(t.find(&nqn_of("n0")).unwrap().export, "n0");
        // Another share's NQN: refused, naming it; nothing added.
        let e = t
            .add(sub("n1", Some("nqn.2024-12.io.io-engine:n0")), ok)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "NQN \"nqn.2024-12.io.io-engine:n0\" is already the NQN of device \"n0\"'s share"
        );
        assert!(t.of_export("n1").is_none());
        // A bad NQN: refused, saying why, before the share runs.
        let e = t
            .add(sub("n1", Some("nqn.2024-1.x")), || -> Result<(), _> {
                panic!("shared a refused NQN")
            })
            .unwrap_err();
        assert!(matches!(e, SubsystemError::InvalidNqn { .. }), "{e}");
        assert!(e.to_string().contains("nqn.YYYY-MM."), "{e}");
        // A share that fails adds nothing.
        let failed = t.add(sub("n1", Some("nqn.2019-05.io.example:v")), || {
            Err::<(), _>(SubsystemError::HostsNotForProtocol(
                crate::export::Protocol::Nbd,
            ))
        });
        assert!(failed.is_err());
        assert!(t.find("nqn.2019-05.io.example:v").is_none());
        t.add(sub("n1", Some("nqn.2019-05.io.example:v")), ok)
            .unwrap();
        assert_eq!(t.of_export("n1").unwrap().nqn, "nqn.2019-05.io.example:v");
        assert!(t.find(&nqn_of("n1")).is_none());
        let all: Vec<String> = t.all().into_iter().map(|s| s.export).collect();
        assert_eq!(all, ["n0", "n1"]);
        // A failed unshare keeps the subsystem; once n0 goes, its NQN is free.
        assert!(t.remove("n0", || Err::<(), ()>(())).is_err());
        assert!(t.of_export("n0").is_some());
        t.remove("n0", ok).unwrap();
        assert!(t.find(&nqn_of("n0")).is_none());
        t.add(sub("n2", Some("nqn.2024-12.io.io-engine:n0")), ok)
            .unwrap();
    }
}
