//! [`TlsFileError`]: why a TLS PEM file cannot be used. Each one is a line
//! naming the file and what is wrong with it; none quotes the file, whose
//! lines may be a private key.
//!
//! Thread: any (plain data).

use std::io;
use std::path::PathBuf;

use super::tls_file::TlsFile;

/// Why a TLS file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsFileError {
    /// The file cannot be read.
    #[error("{}: cannot read: {source}", path.display())]
    Unreadable {
        /// Which file.
        file: TlsFile,
        /// Its path.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A PEM section of the file is broken.
    #[error("{}: not PEM: {why}", path.display())]
    NotPem {
        /// Which file.
        file: TlsFile,
        /// Its path.
        path: PathBuf,
        /// What is broken, in words (never the file's lines).
        why: &'static str,
    },
    /// The chain or CA file holds no certificate.
    #[error("{}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate {
        /// Which file: the chain or the CA bundle.
        file: TlsFile,
        /// Its path.
        path: PathBuf,
    },
    /// The key file holds no private key.
    #[error(
        "{}: no PEM private key in it (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or \
         EC PRIVATE KEY)",
        path.display()
    )]
    NoKey {
        /// The key file.
        path: PathBuf,
    },
    /// The key is of a kind rustls cannot sign with.
    #[error(
        "{}: not a key TLS can sign with (RSA, ECDSA P-256/P-384 or Ed25519): {why}",
        path.display()
    )]
    UnusableKey {
        /// The key file.
        path: PathBuf,
        /// rustls's reason.
        why: String,
    },
    /// The key is not the key of the chain's first certificate.
    #[error(
        "{}: this key does not match the certificate in {}",
        key.display(),
        cert.display()
    )]
    KeyMismatch {
        /// The key file.
        key: PathBuf,
        /// The certificate chain file.
        cert: PathBuf,
    },
    /// The chain's first certificate cannot be parsed.
    #[error("{}: the first certificate is not a usable X.509 certificate: {why}", path.display())]
    UnusableCertificate {
        /// The certificate chain file.
        path: PathBuf,
        /// rustls's reason.
        why: String,
    },
    /// A certificate of the CA bundle cannot be a trust anchor.
    #[error("{}: not a usable CA certificate: {why}", path.display())]
    UnusableCa {
        /// The CA file.
        path: PathBuf,
        /// webpki's reason.
        why: String,
    },
}

impl TlsFileError {
    /// Which file the error is about (for a mismatch, the key).
    pub fn file(&self) -> TlsFile {
        match self {
            TlsFileError::Unreadable { file, .. }
            | TlsFileError::NotPem { file, .. }
            | TlsFileError::NoCertificate { file, .. } => *file,
            TlsFileError::NoKey { .. }
            | TlsFileError::UnusableKey { .. }
            | TlsFileError::KeyMismatch { .. } => TlsFile::Key,
            TlsFileError::UnusableCertificate { .. } => TlsFile::Certificate,
            TlsFileError::UnusableCa { .. } => TlsFile::Ca,
        }
    }
}
