//! The NBD server's TLS setup: its mode and, unless TLS is off, the
//! rustls server configuration every `STARTTLS` starts a session with
//! (certificate, key, and the CA client certificates must chain to when
//! one is given).
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

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::crypto::ring::{cipher_suite, default_provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::TlsMode;

/// Plaintext (and records) a session buffers for the socket: a 128 KiB
/// READ reply goes into TLS records in one write.
pub(super) const TLS_BUFFER_LIMIT: usize = 512 << 10;

/// The NBD server's TLS mode and configuration.
#[derive(Clone, Debug, Default)]
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
    /// is one line naming the flag and the file.
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
        let chain = certificates(cert).map_err(|e| format!("--nbd-tls-cert {e}"))?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("--nbd-tls-key {}: {e}", key.display()))?;
        let provider = Arc::new(provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| format!("NBD TLS: {e}"))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in certificates(ca).map_err(|e| format!("--nbd-tls-client-ca {e}"))? {
                    roots
                        .add(c)
                        .map_err(|e| format!("--nbd-tls-client-ca {}: {e}", ca.display()))?;
                }
                let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .map_err(|e| format!("--nbd-tls-client-ca {}: {e}", ca.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut server = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("--nbd-tls-cert/--nbd-tls-key: {e}"))?;
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

/// The certificates of a PEM file (at least one).
fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no certificate in the file", path.display()));
    }
    Ok(certs)
}
