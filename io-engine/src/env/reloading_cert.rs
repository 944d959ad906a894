//! [`ReloadingCert`]: a TLS server's certificate resolver that serves the
//! chain and key of two PEM files and picks up their renewal without a
//! restart (cert-manager rewriting a mounted Secret, an operator replacing
//! the files). At a handshake, at most once per [`CHECK_EVERY`], it looks
//! at the files' metadata (modification time, size, inode, through any
//! symlink: a Kubernetes Secret volume swaps a symlink); when either file
//! changed it loads the pair again through the same loader and checks as
//! at start ([`TlsIdentity::load`]). A pair that does not load (half
//! written, a key that is not the certificate's) is logged once and the
//! last good one kept: a renewal never takes the listener down.
//!
//! Thread: any; rustls resolves on the handshaking thread (the gRPC
//! listener's runtime workers, a reactor for NBD's STARTTLS). A mutex
//! guards the current key, held to clone an `Arc` and, at most once per
//! [`CHECK_EVERY`], to `stat` two files (and to read them when they
//! changed).

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::tls_identity::TlsIdentity;

/// How often, at most, the files are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The certificate resolver.
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    every: Duration,
    state: Mutex<State>,
}

struct State {
    current: Arc<CertifiedKey>,
    /// The files as they were when `current` was loaded.
    loaded: Option<Stamp>,
    /// The files as they were when they last failed to load (not tried
    /// again until they change again).
    failed: Option<Stamp>,
    checked: Instant,
}

/// What says a file changed: modification time, size, inode, of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp([(SystemTime, u64, u64); 2]);

impl Stamp {
    fn of(cert: &Path, key: &Path) -> Option<Stamp> {
        let one = |p: &Path| {
            let m = std::fs::metadata(p).ok()?;
            Some((m.modified().ok()?, m.len(), m.ino()))
        };
        Some(Stamp([one(cert)?, one(key)?]))
    }
}

impl ReloadingCert {
    /// Serves `identity` (loaded and checked at start) and whatever its
    /// files hold later.
    pub fn new(identity: &TlsIdentity) -> ReloadingCert {
        ReloadingCert::checking_every(identity, CHECK_EVERY)
    }

    /// [`new`](Self::new), looking at the files at most once per `every`.
    pub fn checking_every(identity: &TlsIdentity, every: Duration) -> ReloadingCert {
        let (cert, key) = identity.paths();
        ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            every,
            state: Mutex::new(State {
                current: identity.certified_key(),
                loaded: Stamp::of(cert, key),
                failed: None,
                checked: Instant::now(),
            }),
        }
    }

    /// The chain and key to serve now, after looking at the files if it is
    /// time to.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.checked.elapsed() >= self.every {
            st.checked = Instant::now();
            self.refresh(&mut st);
        }
        st.current.clone()
    }

    fn refresh(&self, st: &mut State) {
        let Some(now) = Stamp::of(&self.cert, &self.key) else {
            return;
        };
        if Some(now) == st.loaded || Some(now) == st.failed {
            return;
        }
        match TlsIdentity::load(&self.cert, &self.key) {
            Ok(id) => {
                st.current = id.certified_key();
                st.loaded = Some(now);
                st.failed = None;
                tracing::info!(
                    cert = %self.cert.display(),
                    "TLS certificate and key reloaded: new handshakes use them"
                );
            }
            Err(e) => {
                st.failed = Some(now);
                tracing::warn!(
                    "TLS certificate or key changed but does not load ({e}); still serving \
                     the previous one"
                );
            }
        }
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::tls_scratch::TlsScratch;

    /// Replaces `to` with `from`'s bytes the way a Secret volume does: a
    /// new file renamed over the old.
    fn replace(from: &Path, to: &Path) {
        let tmp = to.with_extension("new");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }

    #[test]
    fn a_renewed_pair_is_served_and_a_bad_one_is_not() {
        let a = TlsScratch::new("reload-a");
        let b = TlsScratch::new("reload-b");
        let id = TlsIdentity::load(&a.cert, &a.key).unwrap();
        let r = ReloadingCert::checking_every(&id, Duration::ZERO);
        let first = r.current();
        assert_eq!(first.cert, id.chain());
        assert!(
            Arc::ptr_eq(&first, &r.current()),
            "unchanged files: not read again"
        );

        // Renewed: both files replaced.
        replace(&b.cert, &a.cert);
        replace(&b.key, &a.key);
        let renewed = TlsIdentity::load(&b.cert, &b.key).unwrap();
        assert_eq!(r.current().cert, renewed.chain());

        // Half written (the key of another certificate): the last good
        // pair stays.
        replace(&b.other_key, &a.key);
        assert_eq!(r.current().cert, renewed.chain());
        assert_eq!(
            r.current().cert,
            renewed.chain(),
            "a failed pair is not retried"
        );

        // Fixed: served.
        let c = TlsScratch::new("reload-c");
        replace(&c.cert, &a.cert);
        replace(&c.key, &a.key);
        let third = TlsIdentity::load(&c.cert, &c.key).unwrap();
        assert_eq!(r.current().cert, third.chain());

        // Gone: the last good pair stays.
        std::fs::remove_file(&a.key).unwrap();
        assert_eq!(r.current().cert, third.chain());
    }

    #[test]
    fn the_files_are_looked_at_once_per_period_at_most() {
        let a = TlsScratch::new("reload-period-a");
        let b = TlsScratch::new("reload-period-b");
        let id = TlsIdentity::load(&a.cert, &a.key).unwrap();
        let r = ReloadingCert::checking_every(&id, Duration::from_secs(3600));
        replace(&b.cert, &a.cert);
        replace(&b.key, &a.key);
        assert_eq!(r.current().cert, id.chain(), "not before the period");
    }
}
