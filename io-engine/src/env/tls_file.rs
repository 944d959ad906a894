//! [`TlsFile`]: which of a TLS end's files something is about, the
//! certificate chain, its private key or a CA bundle, so that a caller can
//! name the flag that gave the file.
//!
//! Thread: any (plain data).

use std::fmt;

/// One of the PEM files of a TLS end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFile {
    /// The certificate chain: this end's certificate, then its issuers.
    Certificate,
    /// The private key of the chain's first certificate.
    Key,
    /// The CA certificates that verify the peer.
    Ca,
}

impl fmt::Display for TlsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsFile::Certificate => "certificate chain",
            TlsFile::Key => "private key",
            TlsFile::Ca => "CA bundle",
        })
    }
}
