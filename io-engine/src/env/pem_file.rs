//! [`PemFile`]: one TLS file read into memory and parsed as PEM, with the
//! errors naming it. The bytes are wiped when it is dropped (they may be a
//! private key), and the read reserves the file's size first so that no
//! copy is left behind in a buffer that grew.
//!
//! Thread: any; the daemon reads its files on `main` at start-up, the CLI
//! on its main thread.

use std::io::Read;
use std::path::Path;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use zeroize::Zeroizing;

use super::tls_file::TlsFile;
use super::tls_file_error::TlsFileError;

/// A PEM file's bytes, and which file it is.
pub(super) struct PemFile<'a> {
    file: TlsFile,
    path: &'a Path,
    bytes: Zeroizing<Vec<u8>>,
}

impl<'a> PemFile<'a> {
    /// Reads `path`, the TLS file `file`.
    pub(super) fn read(file: TlsFile, path: &'a Path) -> Result<PemFile<'a>, TlsFileError> {
        let unreadable = |source| TlsFileError::Unreadable {
            file,
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::File::open(path).map_err(unreadable)?;
        let size = f.metadata().map_err(unreadable)?.len();
        // One more byte than the file holds: read_to_end then sees the end
        // without growing the buffer.
        let capacity = usize::try_from(size).unwrap_or(0).saturating_add(1);
        let mut bytes = Zeroizing::new(Vec::with_capacity(capacity));
        f.read_to_end(&mut bytes).map_err(unreadable)?;
        Ok(PemFile { file, path, bytes })
    }

    /// The file's bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The file's bytes, kept wiped on drop.
    pub(super) fn into_bytes(self) -> Zeroizing<Vec<u8>> {
        self.bytes
    }

    /// The certificates in the file, in order; at least one.
    pub(super) fn certificates(&self) -> Result<Vec<CertificateDer<'static>>, TlsFileError> {
        let certs = CertificateDer::pem_slice_iter(&self.bytes)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.not_pem(&e))?;
        if certs.is_empty() {
            return Err(TlsFileError::NoCertificate {
                file: self.file,
                path: self.path.to_path_buf(),
            });
        }
        Ok(certs)
    }

    /// The first private key in the file (PKCS#8, PKCS#1 or SEC1), wiped
    /// when dropped.
    pub(super) fn private_key(&self) -> Result<Zeroizing<PrivateKeyDer<'static>>, TlsFileError> {
        match PrivateKeyDer::from_pem_slice(&self.bytes) {
            Ok(key) => Ok(Zeroizing::new(key)),
            Err(pem::Error::NoItemsFound) => Err(TlsFileError::NoKey {
                path: self.path.to_path_buf(),
            }),
            Err(e) => Err(self.not_pem(&e)),
        }
    }

    /// What is wrong with the PEM, in words: the parser's own messages
    /// quote the line at fault, which may be part of a key.
    fn not_pem(&self, e: &pem::Error) -> TlsFileError {
        let why = match e {
            pem::Error::MissingSectionEnd { .. } => "a section has no -----END line",
            pem::Error::IllegalSectionStart { .. } => "a malformed -----BEGIN line",
            pem::Error::Base64Decode(_) => "a section is not valid base64",
            pem::Error::SectionTooLarge => "a section is larger than 256 MiB",
            _ => "unreadable PEM",
        };
        TlsFileError::NotPem {
            file: self.file,
            path: self.path.to_path_buf(),
            why,
        }
    }
}
