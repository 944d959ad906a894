//! [`TlsIdentity`]: a TLS end's certificate chain and private key, read
//! from PEM files and checked against each other, for every user of TLS:
//! the gRPC listener and the CLI (which hand tonic the PEM) and NBD's
//! STARTTLS (which builds its rustls configuration from the parsed chain
//! and key). One loader, so that all of them accept the same files and
//! say the same things about bad ones.
//!
//! The private key, PEM and DER, is held in `Zeroizing` buffers, wiped
//! when the identity is dropped; its `Debug` shows the paths, not the key.
//! (The copies tonic and rustls make are theirs to keep.)
//!
//! Thread: any; the daemon loads on `main` at start-up, the CLI on its
//! main thread.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use rustls::{Error as RustlsError, InconsistentKeys};
use zeroize::Zeroizing;

use super::pem_file::PemFile;
use super::tls_file::TlsFile;
use super::tls_file_error::TlsFileError;

/// A certificate chain and its private key, read and checked.
pub struct TlsIdentity {
    cert_path: PathBuf,
    key_path: PathBuf,
    cert_pem: Vec<u8>,
    key_pem: Zeroizing<Vec<u8>>,
    key: Zeroizing<PrivateKeyDer<'static>>,
    certified: Arc<CertifiedKey>,
}

impl TlsIdentity {
    /// Reads the chain `cert` (PEM certificates, this end's first) and the
    /// private key `key` (PEM: PKCS#8, PKCS#1 or SEC1), and checks that the
    /// key is the first certificate's.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsIdentity, TlsFileError> {
        let cert_file = PemFile::read(TlsFile::Certificate, cert)?;
        let chain = cert_file.certificates()?;
        let key_file = PemFile::read(TlsFile::Key, key)?;
        let private = key_file.private_key()?;
        // Borrowed: a provider's `load_private_key` takes the key by value
        // and drops it unwiped.
        let signer = rustls::crypto::ring::sign::any_supported_type(&private).map_err(|e| {
            TlsFileError::UnusableKey {
                path: key.to_path_buf(),
                why: e.to_string(),
            }
        })?;
        let certified = CertifiedKey::new(chain, signer);
        match certified.keys_match() {
            // rustls itself serves a key whose public half it cannot
            // derive; so does this.
            Ok(()) | Err(RustlsError::InconsistentKeys(InconsistentKeys::Unknown)) => {}
            Err(RustlsError::InconsistentKeys(_)) => {
                return Err(TlsFileError::KeyMismatch {
                    key: key.to_path_buf(),
                    cert: cert.to_path_buf(),
                });
            }
            Err(e) => {
                return Err(TlsFileError::UnusableCertificate {
                    path: cert.to_path_buf(),
                    why: e.to_string(),
                });
            }
        }
        Ok(TlsIdentity {
            cert_path: cert.to_path_buf(),
            key_path: key.to_path_buf(),
            cert_pem: cert_file.into_bytes().to_vec(),
            key_pem: key_file.into_bytes(),
            key: private,
            certified: Arc::new(certified),
        })
    }

    /// The certificate chain's and the key's files.
    pub fn paths(&self) -> (&Path, &Path) {
        (&self.cert_path, &self.key_path)
    }

    /// The certificates, DER, this end's first.
    pub fn chain(&self) -> &[CertificateDer<'static>] {
        &self.certified.cert
    }

    /// The private key, DER.
    pub fn key(&self) -> &PrivateKeyDer<'static> {
        &self.key
    }

    /// The chain with the key as rustls signs with it, for a
    /// `ServerConfig`'s certificate resolver.
    pub fn certified_key(&self) -> Arc<CertifiedKey> {
        self.certified.clone()
    }

    /// The certificate file's PEM, for tonic.
    pub fn cert_pem(&self) -> &[u8] {
        &self.cert_pem
    }

    /// The key file's PEM, for tonic.
    pub fn key_pem(&self) -> &[u8] {
        &self.key_pem
    }
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("cert", &self.cert_path)
            .field("certificates", &self.certified.cert.len())
            .field("key", &self.key_path)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::tls_scratch::TlsScratch;

    #[test]
    fn a_good_chain_and_key_load() {
        let s = TlsScratch::new("identity-good");
        let id = TlsIdentity::load(&s.cert, &s.key).unwrap();
        assert_eq!(id.chain().len(), 2);
        assert!(matches!(id.key(), PrivateKeyDer::Pkcs8(_)));
        assert_eq!(id.certified_key().cert.len(), 2);
        assert_eq!(id.cert_pem(), std::fs::read(&s.cert).unwrap());
        assert_eq!(id.key_pem(), s.key_pem.as_bytes());
    }

    #[test]
    fn a_missing_file_is_named() {
        let s = TlsScratch::new("identity-missing");
        let missing = s.dir.join("nope.crt");
        let e = TlsIdentity::load(&missing, &s.key).unwrap_err();
        assert_eq!(e.file(), TlsFile::Certificate);
        let line = e.to_string();
        assert!(
            line.starts_with(&format!("{}: cannot read: ", missing.display())),
            "{line}"
        );
        let e = TlsIdentity::load(&s.cert, &missing).unwrap_err();
        assert_eq!(e.file(), TlsFile::Key);
        assert!(e.to_string().contains("nope.crt: cannot read: "), "{e}");
    }

    #[test]
    fn a_file_without_pem_is_named() {
        let s = TlsScratch::new("identity-notpem");
        let hello = s.file("hello.txt", "hello\n");
        let e = TlsIdentity::load(&hello, &s.key).unwrap_err();
        assert_eq!(e.file(), TlsFile::Certificate);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)",
                hello.display()
            )
        );
        // A certificate where the key should be: no key in it.
        let e = TlsIdentity::load(&s.cert, &s.cert).unwrap_err();
        assert!(matches!(e, TlsFileError::NoKey { .. }), "{e}");
        assert!(
            e.to_string().contains("tls.crt: no PEM private key in it"),
            "{e}"
        );
    }

    #[test]
    fn a_broken_key_is_named_without_its_lines() {
        let s = TlsScratch::new("identity-broken");
        let broken = s.file(
            "broken.key",
            "-----BEGIN PRIVATE KEY-----\nU0VDUkVUU0VDUkVUU0VDUkVU\n",
        );
        let e = TlsIdentity::load(&s.cert, &broken).unwrap_err();
        assert_eq!(e.file(), TlsFile::Key);
        let line = e.to_string();
        assert!(line.contains("broken.key: not PEM: "), "{line}");
        assert!(!line.contains("U0VDUkVU"), "{line}");
    }

    #[test]
    fn a_key_of_another_certificate_is_named_with_both_files() {
        let s = TlsScratch::new("identity-mismatch");
        let e = TlsIdentity::load(&s.cert, &s.other_key).unwrap_err();
        assert_eq!(e.file(), TlsFile::Key);
        assert_eq!(
            e.to_string(),
            format!(
                "{}: this key does not match the certificate in {}",
                s.other_key.display(),
                s.cert.display()
            )
        );
    }

    #[test]
    fn debug_shows_no_key() {
        let s = TlsScratch::new("identity-debug");
        let id = TlsIdentity::load(&s.cert, &s.key).unwrap();
        let text = format!("{id:?}");
        assert!(text.contains("tls.key"), "{text}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        let base64 = s.key_pem.lines().nth(1).unwrap();
        assert!(!text.contains(base64), "{text}");
    }
}
