//! TLS for the gRPC listener: the server certificate and key, and the CA
//! that client certificates must chain to (mTLS), read and checked by
//! `env`'s TLS file loader before the daemon says it serves.
//!
//! Every problem names the file and what is wrong with it (cannot be read,
//! holds no PEM certificate or key, the key does not match the certificate,
//! the CA is unusable), so the daemon exits with one line instead of
//! failing at the first connection. The files are read once: a renewed
//! certificate is served after a restart. The key stays in the loader's
//! wiped buffers until tonic's configuration is built, and `Debug` shows
//! the files, not the key.
//!
//! Thread: `main`, before the control-plane runtime serves.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use crate::env::tls_ca::TlsCa;
use crate::env::tls_file_error::TlsFileError;
use crate::env::tls_identity::TlsIdentity;

/// Longest a TLS handshake on the gRPC port may take before the
/// connection is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The gRPC listener's TLS identity and, for mTLS, the client CA.
pub struct GrpcTls {
    identity: TlsIdentity,
    client_ca: Option<TlsCa>,
}

impl GrpcTls {
    /// Reads and checks the server certificate chain `cert`, its key `key`
    /// and, for mutual TLS, the CA bundle `client_ca`.
    pub fn load(
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
    ) -> Result<GrpcTls, TlsFileError> {
        // tonic builds its rustls configurations with the process default.
        let _ = CryptoProvider::install_default(rustls::crypto::ring::default_provider());
        Ok(GrpcTls {
            identity: TlsIdentity::load(cert, key)?,
            client_ca: client_ca.map(TlsCa::load).transpose()?,
        })
    }

    /// Whether clients must present a certificate of the client CA.
    pub fn mutual(&self) -> bool {
        self.client_ca.is_some()
    }

    /// tonic's server configuration: this identity, client certificates
    /// required (not optional) when there is a client CA.
    pub(super) fn server_config(&self) -> ServerTlsConfig {
        let identity = Identity::from_pem(self.identity.cert_pem(), self.identity.key_pem());
        let config = ServerTlsConfig::new()
            .identity(identity)
            .timeout(HANDSHAKE_TIMEOUT);
        match &self.client_ca {
            Some(ca) => config.client_ca_root(Certificate::from_pem(ca.pem())),
            None => config,
        }
    }
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
