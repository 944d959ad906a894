//! TLS for the gRPC listener: the server certificate and key, and the CA
//! that client certificates must chain to (mTLS), read and checked by
//! `env`'s TLS file loader before the daemon says it serves, and the rustls
//! configuration the listener's acceptor (`tls_incoming`) handshakes with.
//!
//! Every problem names the file and what is wrong with it (cannot be read,
//! holds no PEM certificate or key, the key does not match the certificate,
//! the CA is unusable), so the daemon exits with one line instead of
//! failing at the first connection. A renewed certificate and key are
//! served to new handshakes without a restart ([`ReloadingCert`]: the
//! files are looked at once a second at most); the client CA is read once.
//! The key goes from the loader's
//! wiped buffers into rustls's signing key, and `Debug` shows the files,
//! not the key.
//!
//! Thread: `main`, before the control-plane runtime serves.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;

use crate::env::reloading_cert::ReloadingCert;
use crate::env::tls_ca::TlsCa;
use crate::env::tls_file_error::TlsFileError;
use crate::env::tls_identity::TlsIdentity;

/// Longest a TLS handshake on the gRPC port may take (from the connection's
/// accept to the handshake's end) before the connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The ALPN protocol of gRPC over TLS; clients (tonic's among them) insist
/// on it.
const ALPN_H2: &[u8] = b"h2";

/// The gRPC listener's TLS identity and, for mTLS, the client CA.
pub struct GrpcTls {
    identity: TlsIdentity,
    client_ca: Option<TlsCa>,
    server: Arc<ServerConfig>,
}

impl GrpcTls {
    /// Reads and checks the server certificate chain `cert`, its key `key`
    /// and, for mutual TLS, the CA bundle `client_ca`.
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<GrpcTls, TlsFileError> {
        // The process default, for the rustls users that take it.
        let _ = CryptoProvider::install_default(rustls::crypto::ring::default_provider());
        let identity = TlsIdentity::load(cert, key)?;
        let client_ca = client_ca.map(TlsCa::load).transpose()?;
        let server = server_config(&identity, client_ca.as_ref())?;
        Ok(GrpcTls {
            identity,
            client_ca,
            server,
        })
    }

    /// Whether clients must present a certificate of the client CA.
    pub fn mutual(&self) -> bool {
        self.client_ca.is_some()
    }

    /// The rustls configuration of the listener: this identity, client
    /// certificates required (not optional) when there is a client CA,
    /// ALPN `h2`. (What tonic's own TLS acceptor built from the same files.)
    pub(super) fn server_config(&self) -> Arc<ServerConfig> {
        self.server.clone()
    }
}

/// Builds the listener's rustls configuration with ring, TLS 1.3 and 1.2.
fn server_config(
    identity: &TlsIdentity,
    client_ca: Option<&TlsCa>,
) -> Result<Arc<ServerConfig>, TlsFileError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    // Not from a file or a client: ring has both versions.
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .expect("ring supports TLS 1.3 and 1.2");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(ca.roots(), provider)
                .build()
                .map_err(|e| TlsFileError::UnusableCa {
                    path: ca.path().to_path_buf(),
                    why: e.to_string(),
                })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder.with_cert_resolver(Arc::new(ReloadingCert::new(identity)));
    server.alpn_protocols = vec![ALPN_H2.to_vec()];
    Ok(Arc::new(server))
}

impl fmt::Debug for GrpcTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcTls")
            .field("identity", &self.identity)
            .field("client_ca", &self.client_ca)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::tls_scratch::TlsScratch;

    #[test]
    fn a_missing_file_is_named() {
        let s = TlsScratch::new("grpc-missing");
        let e = GrpcTls::load(&s.dir.join("nope.crt"), &s.key, None).unwrap_err();
        let line = e.to_string();
        assert!(line.contains("nope.crt: cannot read: "), "{line}");
    }

    #[test]
    fn a_file_without_pem_is_named() {
        let s = TlsScratch::new("grpc-notpem");
        let cert = s.file("hello.crt", "hello\n");
        let line = GrpcTls::load(&cert, &s.key, None).unwrap_err().to_string();
        assert!(
            line.contains("hello.crt: no PEM certificate in it"),
            "{line}"
        );
    }

    #[test]
    fn a_client_ca_makes_it_mutual() {
        let s = TlsScratch::new("grpc-mutual");
        assert!(!GrpcTls::load(&s.cert, &s.key, None).unwrap().mutual());
        assert!(
            GrpcTls::load(&s.cert, &s.key, Some(&s.ca))
                .unwrap()
                .mutual()
        );
        let e = GrpcTls::load(&s.cert, &s.key, Some(&s.key)).unwrap_err();
        assert!(e.to_string().contains("tls.key: no PEM certificate"), "{e}");
    }

    /// tonic's `Identity` derives `Debug` and would print the key's bytes;
    /// `GrpcTls` must not, in any rendering: the PEM text, its base64, or
    /// the bytes as a list of numbers.
    #[test]
    fn debug_shows_no_key_material() {
        let s = TlsScratch::new("grpc-debug");
        let tls = GrpcTls::load(&s.cert, &s.key, Some(&s.ca)).unwrap();
        let text = format!("{tls:?}");
        assert!(text.contains("tls.key"), "{text}");
        assert!(!text.contains("PRIVATE KEY"), "{text}");
        for line in s.key_pem.lines().filter(|l| !l.starts_with("-----")) {
            assert!(!text.contains(line), "{text}");
        }
        let head = format!("{:?}", &s.key_pem.as_bytes()[..16]);
        assert!(!text.contains(head.trim_matches(['[', ']'])), "{text}");
    }
}
