//! TLS for the gRPC listener: the server certificate and key, and the CA
//! that client certificates must chain to (mTLS), read from PEM files and
//! checked before the daemon says it serves.
//!
//! Every problem names the file and what is wrong with it (cannot be read,
//! holds no PEM certificate or key, the key does not match the certificate,
//! the CA is unusable), so the daemon exits with one line instead of
//! failing at the first connection. The files are read once: a renewed
//! certificate is served after a restart.
//!
//! Thread: `main`, before the control-plane runtime serves.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use super::GrpcTlsError;

/// Longest a TLS handshake on the gRPC port may take before the
/// connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The gRPC listener's TLS identity and, for mTLS, the client CA.
#[derive(Debug, Clone)]
pub struct GrpcTls {
    identity: Identity,
    client_ca: Option<Certificate>,
}

impl GrpcTls {
    /// Reads and checks the server certificate chain `cert`, its key `key`
    /// and, for mutual TLS, the CA bundle `client_ca`.
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<GrpcTls, GrpcTlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // tonic builds its rustls configurations with the process default.
        let _ = CryptoProvider::install_default(rustls::crypto::ring::default_provider());
        let cert_pem = read(cert)?;
        let key_pem = read(key)?;
        let chain = certificates(cert, &cert_pem)?;
        let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| GrpcTlsError {
            path: key.to_path_buf(),
            why: format!("no PEM private key in it ({e})"),
        })?;
        rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .and_then(|b| b.with_no_client_auth().with_single_cert(chain, private))
            .map_err(|e| GrpcTlsError {
                path: key.to_path_buf(),
                why: match e {
                    rustls::Error::InconsistentKeys(_) => format!(
                        "this key does not match the certificate in {}",
                        cert.display()
                    ),
                    e => format!("unusable with the certificate in {}: {e}", cert.display()),
                },
            })?;
        let client_ca = match client_ca {
            Some(path) => {
                let pem = read(path)?;
                let mut roots = RootCertStore::empty();
                for ca in certificates(path, &pem)? {
                    roots.add(ca).map_err(|e| GrpcTlsError {
                        path: path.to_path_buf(),
                        why: format!("not a usable CA certificate: {e}"),
                    })?;
                }
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| GrpcTlsError {
                        path: path.to_path_buf(),
                        why: format!("not a usable client CA: {e}"),
                    })?;
                Some(Certificate::from_pem(pem))
            }
            None => None,
        };
        Ok(GrpcTls {
            identity: Identity::from_pem(cert_pem, key_pem),
            client_ca,
        })
    }

    /// Whether clients must present a certificate of the client CA.
    pub fn mutual(&self) -> bool {
        self.client_ca.is_some()
    }

    /// tonic's server configuration: this identity, client certificates
    /// required (not optional) when there is a client CA.
    pub(super) fn server_config(&self) -> ServerTlsConfig {
        let config = ServerTlsConfig::new()
            .identity(self.identity.clone())
            .timeout(HANDSHAKE_TIMEOUT);
        match &self.client_ca {
            Some(ca) => config.client_ca_root(ca.clone()),
            None => config,
        }
    }
}

/// The file's bytes, or why it cannot be read.
fn read(path: &Path) -> Result<Vec<u8>, GrpcTlsError> {
    std::fs::read(path).map_err(|e| GrpcTlsError {
        path: path.to_path_buf(),
        why: format!("cannot read: {e}"),
    })
}

/// The PEM certificates in `pem` (at least one), read from `path`.
fn certificates(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, GrpcTlsError> {
    let fail = |why: String| GrpcTlsError {
        path: path.to_path_buf(),
        why,
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(format!("not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(fail(
            "no PEM certificate in it (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A scratch directory for one test, removed at the end.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir = std::env::temp_dir()
                .join(format!("io-engine-grpc-tls-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        fn file(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_missing_file_is_named() {
        let s = Scratch::new("missing");
        let key = s.file("tls.key", "");
        let e = GrpcTls::load(&s.0.join("nope.crt"), &key, None).unwrap_err();
        let line = e.to_string();
        assert!(line.contains("nope.crt: cannot read: "), "{line}");
    }

    #[test]
    fn a_file_without_pem_is_named() {
        let s = Scratch::new("notpem");
        let cert = s.file("tls.crt", "hello\n");
        let key = s.file("tls.key", "hello\n");
        let line = GrpcTls::load(&cert, &key, None).unwrap_err().to_string();
        assert!(line.contains("tls.crt: no PEM certificate in it"), "{line}");
    }
}
