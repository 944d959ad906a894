//! The NBD server's TLS setup: its mode and, unless TLS is off, the
//! rustls server configuration every `STARTTLS` starts a session with
//! (certificate, key, and the CA client certificates must chain to when
//! one is given), the files read and checked by `env`'s TLS file loader
//! and its errors prefixed with the flag that named the file. A renewed
//! certificate and key are served to new sessions without a restart
//! (`env::reloading_cert`); the client CA is read once.
//!
//! Crypto: rustls with the *ring* provider, which uses the CPU's AES and
//! carry-less multiply instructions (AES-NI/VAES, PCLMULQDQ) for AES-GCM
//! where the CPU has them. TLS 1.3 first; AES-128-GCM, then AES-256-GCM,
//! ChaCha20-Poly1305 last, and the server's order wins over the
//! client's, so that a client that lists ChaCha first (a guess that the
//! CPU has no AES instructions) still gets AES-GCM.
//!
//! Thread: loaded on the main thread at start-up; the configuration is
//! shared (`Arc`) by the reactors' connections.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::crypto::ring::{cipher_suite, default_provider};
use rustls::server::WebPkiClientVerifier;

use super::TlsMode;
use crate::env::reloading_cert::ReloadingCert;
use crate::env::tls_ca::TlsCa;
use crate::env::tls_file::TlsFile;
use crate::env::tls_file_error::TlsFileError;
use crate::env::tls_identity::TlsIdentity;

/// Plaintext (and records) a session buffers for the socket: a 128 KiB
/// READ reply goes into TLS records in one write.
pub(super) const TLS_BUFFER_LIMIT: usize = 512 << 10;

/// The NBD server's TLS mode and configuration. Its `Debug` shows the
/// mode, not the configuration, which holds the signing key.
#[derive(Clone, Default)]
pub struct TlsConfig {
    mode: TlsMode,
    server: Option<Arc<ServerConfig>>,
}

impl TlsConfig {
    /// No TLS.
    pub fn off() -> TlsConfig {
        TlsConfig::default()
    }

    /// Loads the PEM files for `mode`. `allow` and `require` need `cert`
    /// and `key`; with `client_ca`, clients must present a certificate
    /// that chains to it. With `off` the files are not read. The error
    /// is one line naming the flag and the file (`--nbd-tls-key FILE:
    /// this key does not match the certificate in ...`).
    pub fn load(
        mode: TlsMode,
        cert: Option<&Path>,
        key: Option<&Path>,
        client_ca: Option<&Path>,
    ) -> Result<TlsConfig, String> {
        if mode == TlsMode::Off {
            return Ok(TlsConfig::off());
        }
        let (Some(cert), Some(key)) = (cert, key) else {
            return Err(format!(
                "--nbd-tls {mode} needs --nbd-tls-cert and --nbd-tls-key"
            ));
        };
        let identity = TlsIdentity::load(cert, key).map_err(flag_error)?;
        let client_ca = client_ca.map(TlsCa::load).transpose().map_err(flag_error)?;
        let provider = Arc::new(provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("NBD TLS: {e}"))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let verifier = WebPkiClientVerifier::builder_with_provider(ca.roots(), provider)
                    .build()
                    .map_err(|e| format!("--nbd-tls-client-ca {}: {e}", ca.path().display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut server = builder.with_cert_resolver(Arc::new(ReloadingCert::new(&identity)));
        server.ignore_client_order = true;
        Ok(TlsConfig {
            mode,
            server: Some(Arc::new(server)),
        })
    }

    /// The mode.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// Whether clients must use TLS (export URIs are then `nbds://`).
    pub fn required(&self) -> bool {
        self.mode == TlsMode::Require
    }

    /// The configuration a session starts with; `None` when TLS is off.
    pub(super) fn server(&self) -> Option<&Arc<ServerConfig>> {
        self.server.as_ref()
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig")
            .field("mode", &self.mode)
            .field("configured", &self.server.is_some())
            .finish()
    }
}

/// The ring provider with the AES-GCM suites first, ChaCha20 last.
fn provider() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![
            cipher_suite::TLS13_AES_128_GCM_SHA256,
            cipher_suite::TLS13_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ],
        ..default_provider()
    }
}

/// A file error as the daemon prints it: the flag that named the file,
/// then the file and what is wrong with it.
fn flag_error(e: TlsFileError) -> String {
    let flag = match e.file() {
        TlsFile::Certificate => "--nbd-tls-cert",
        TlsFile::Key => "--nbd-tls-key",
        TlsFile::Ca => "--nbd-tls-client-ca",
    };
    format!("{flag} {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::tls_scratch::TlsScratch;

    fn require(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<TlsConfig, String> {
        TlsConfig::load(TlsMode::Require, Some(cert), Some(key), ca)
    }

    #[test]
    fn good_files_load() {
        let s = TlsScratch::new("nbd-good");
        let config = require(&s.cert, &s.key, Some(&s.ca)).unwrap();
        assert!(config.required());
        assert!(config.server().is_some());
        let text = format!("{config:?}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        assert_eq!(text, "TlsConfig { mode: Require, configured: true }");
        assert!(
            TlsConfig::load(TlsMode::Off, None, None, None)
                .unwrap()
                .server()
                .is_none()
        );
    }

    #[test]
    fn errors_start_with_the_flag_of_the_file() {
        let s = TlsScratch::new("nbd-flags");
        let missing = s.dir.join("missing.pem");
        let cases = [
            (require(&missing, &s.key, None), "--nbd-tls-cert "),
            (require(&s.cert, &missing, None), "--nbd-tls-key "),
            (require(&s.cert, &s.cert, None), "--nbd-tls-key "),
            (
                require(&s.cert, &s.key, Some(&missing)),
                "--nbd-tls-client-ca ",
            ),
            (
                require(&s.cert, &s.key, Some(&s.key)),
                "--nbd-tls-client-ca ",
            ),
        ];
        for (result, flag) in cases {
            let e = result.unwrap_err();
            assert!(e.starts_with(flag), "{flag}: {e}");
        }
        let e = require(&s.cert, &s.other_key, None).unwrap_err();
        assert_eq!(
            e,
            format!(
                "--nbd-tls-key {}: this key does not match the certificate in {}",
                s.other_key.display(),
                s.cert.display()
            )
        );
    }
}
