//! [`TlsCa`]: a CA bundle read from a PEM file, every certificate checked
//! to be usable as a trust anchor: the client CA of the gRPC listener and
//! of NBD's STARTTLS, and the CA the CLI verifies the engine with.
//!
//! Thread: any; the daemon loads on `main` at start-up, the CLI on its
//! main thread.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::RootCertStore;

use super::pem_file::PemFile;
use super::tls_file::TlsFile;
use super::tls_file_error::TlsFileError;

/// CA certificates, read and checked.
pub struct TlsCa {
    path: PathBuf,
    pem: Vec<u8>,
    roots: Arc<RootCertStore>,
}

impl TlsCa {
    /// Reads the PEM certificates of `path` (at least one), each of which
    /// must be usable as a trust anchor.
    pub fn load(path: &Path) -> Result<TlsCa, TlsFileError> {
        let file = PemFile::read(TlsFile::Ca, path)?;
        let mut roots = RootCertStore::empty();
        for ca in file.certificates()? {
            roots.add(ca).map_err(|e| TlsFileError::UnusableCa {
                path: path.to_path_buf(),
                why: e.to_string(),
            })?;
        }
        Ok(TlsCa {
            path: path.to_path_buf(),
            pem: file.bytes().to_vec(),
            roots: Arc::new(roots),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The certificates as trust anchors, for a rustls verifier.
    pub fn roots(&self) -> Arc<RootCertStore> {
        self.roots.clone()
    }

    /// The file's PEM, for tonic.
    pub fn pem(&self) -> &[u8] {
        &self.pem
    }
}

impl fmt::Debug for TlsCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCa")
            .field("path", &self.path)
            .field("certificates", &self.roots.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::tls_scratch::TlsScratch;

    #[test]
    fn a_ca_bundle_loads() {
        let s = TlsScratch::new("ca-good");
        let ca = TlsCa::load(&s.ca).unwrap();
        assert_eq!(ca.roots().len(), 1);
        assert_eq!(ca.pem(), std::fs::read(&s.ca).unwrap());
        assert_eq!(ca.path(), s.ca);
        // The chain file: both its certificates are anchors.
        assert_eq!(TlsCa::load(&s.cert).unwrap().roots().len(), 2);
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_named() {
        let s = TlsScratch::new("ca-none");
        let e = TlsCa::load(&s.key).unwrap_err();
        assert_eq!(e.file(), TlsFile::Ca);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
                s.key.display()
            )
        );
        let e = TlsCa::load(&s.dir.join("missing.crt")).unwrap_err();
        assert!(e.to_string().contains("missing.crt: cannot read: "), "{e}");
    }

    #[test]
    fn a_certificate_that_is_no_certificate_is_named() {
        let s = TlsScratch::new("ca-garbage");
        // Valid PEM and base64, but not DER of a certificate.
        let bad = s.file(
            "bad.crt",
            "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
        );
        let e = TlsCa::load(&bad).unwrap_err();
        assert!(matches!(e, TlsFileError::UnusableCa { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("bad.crt: not a usable CA certificate: "),
            "{e}"
        );
    }
}
