//! TLS to the engine: the CA that verifies the engine's certificate, the
//! client certificate for mutual TLS, and the name the engine's
//! certificate must carry, as `--tls-*` give them; and the one-line
//! explanation of a failed handshake. The files are read and checked by
//! the engine's own TLS file loader (`io_engine::env`), so the CLI accepts
//! what the daemon accepts and names a bad file the same way, before it
//! connects (a key that does not match its certificate included).
//!
//! Thread: the CLI's main thread (files read before connecting).

use std::path::PathBuf;

use clap::ValueHint;

use io_engine::env::tls_ca::TlsCa;
use io_engine::env::tls_file::TlsFile;
use io_engine::env::tls_file_error::TlsFileError;
use io_engine::env::tls_identity::TlsIdentity;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use crate::error::CtlError;

/// The TLS options of an `https://` endpoint.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ClientTls {
    /// With an https:// endpoint: the CA certificate(s) (PEM) that signed
    /// the engine's certificate (cert-manager's ca.crt).
    #[arg(
        long = "tls-ca",
        global = true,
        env = "IO_ENGINE_TLS_CA",
        value_name = "FILE"
    )]
    pub(crate) ca: Option<PathBuf>,
    /// With an https:// endpoint: this client's certificate (PEM), for an
    /// engine that requires one (--grpc-tls-client-ca). Needs --tls-key.
    #[arg(
        long = "tls-cert",
        global = true,
        env = "IO_ENGINE_TLS_CERT",
        value_name = "FILE",
        requires = "key"
    )]
    pub(crate) cert: Option<PathBuf>,
    /// The key of --tls-cert (PEM).
    #[arg(
        long = "tls-key",
        global = true,
        env = "IO_ENGINE_TLS_KEY",
        value_name = "FILE",
        requires = "cert"
    )]
    pub(crate) key: Option<PathBuf>,
    /// With an https:// endpoint: the name the engine's certificate must
    /// carry, when it is not the endpoint's host (e.g. a certificate with
    /// a DNS name, reached by a node's IP address).
    #[arg(
        long = "tls-server-name",
        global = true,
        env = "IO_ENGINE_TLS_SERVER_NAME",
        value_name = "NAME", value_hint = ValueHint::Other
    )]
    pub(crate) server_name: Option<String>,
}

impl ClientTls {
    /// Whether any option is given.
    pub(crate) fn any(&self) -> bool {
        self.ca.is_some() || self.cert.is_some() || self.key.is_some() || self.server_name.is_some()
    }

    /// tonic's client configuration, the files read.
    pub(crate) fn config(&self) -> Result<ClientTlsConfig, CtlError> {
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &self.ca {
            let ca = TlsCa::load(ca).map_err(file_error)?;
            config = config.ca_certificate(Certificate::from_pem(ca.pem()));
        }
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            let identity = TlsIdentity::load(cert, key).map_err(file_error)?;
            config = config.identity(Identity::from_pem(identity.cert_pem(), identity.key_pem()));
        }
        if let Some(name) = &self.server_name {
            config = config.domain_name(name.clone());
        }
        Ok(config)
    }
}

/// A `--tls-*` file's error, with the option that named the file.
fn file_error(source: TlsFileError) -> CtlError {
    let option = match source.file() {
        TlsFile::Certificate => "--tls-cert",
        TlsFile::Key => "--tls-key",
        TlsFile::Ca => "--tls-ca",
    };
    CtlError::TlsFile { option, source }
}

/// What a connection error means when TLS is in use: the rustls alert or
/// verification failure in words, with the option to look at.
/// `None` when the cause is not about TLS.
pub(crate) fn explain_tls_failure(cause: &str) -> Option<String> {
    let lower = cause.to_ascii_lowercase();
    let hint = if lower.contains("certificaterequired") || lower.contains("certificate required") {
        "the engine requires a client certificate: give --tls-cert and --tls-key"
    } else if lower.contains("unknownca")
        || lower.contains("unknown ca")
        || lower.contains("badcertificate")
        || lower.contains("bad certificate")
        || lower.contains("decrypterror")
    {
        "the engine refused the client certificate: it must be signed by the CA of the \
         engine's --grpc-tls-client-ca"
    } else if lower.contains("unknownissuer") || lower.contains("invalid peer certificate") {
        "the engine's certificate is not signed by --tls-ca, or does not name the endpoint's \
         host (see --tls-server-name)"
    } else if lower.contains("notvalidforname") {
        "the engine's certificate does not name the endpoint's host: connect by a name it \
         carries, or give it with --tls-server-name"
    } else if lower.contains("corrupt message")
        || lower.contains("invalidcontenttype")
        || lower.contains("invalid content type")
        || lower.contains("received corrupt")
        || lower.contains("http/1")
    {
        "the engine does not speak TLS there: use an http:// endpoint, or enable TLS on the \
         engine (--grpc-tls-cert)"
    } else if lower.contains("tls") || lower.contains("certificate") || lower.contains("alert") {
        "the TLS handshake failed"
    } else {
        return None;
    };
    Some(format!("TLS handshake failed ({cause}): {hint}"))
}

/// What a connection the engine closed right after the TLS handshake
/// means: it requires a client certificate of its CA, and got none
/// (`client_cert` false) or another one.
pub(crate) fn refused_after_handshake(client_cert: bool) -> String {
    if client_cert {
        "the engine closed the connection after the TLS handshake: it refused the client \
         certificate, which must be signed by the CA of the engine's --grpc-tls-client-ca"
            .into()
    } else {
        "the engine closed the connection after the TLS handshake: it requires a client \
         certificate: give --tls-cert and --tls-key"
            .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_failures_say_what_to_fix() {
        let missing = explain_tls_failure("received fatal alert: CertificateRequired").unwrap();
        assert!(
            missing.contains("give --tls-cert and --tls-key"),
            "{missing}"
        );
        let wrong = explain_tls_failure("received fatal alert: UnknownCA").unwrap();
        assert!(wrong.contains("--grpc-tls-client-ca"), "{wrong}");
        let server = explain_tls_failure("invalid peer certificate: UnknownIssuer").unwrap();
        assert!(server.contains("--tls-ca"), "{server}");
        assert_eq!(
            explain_tls_failure("Connection refused (os error 111)"),
            None
        );
    }

    #[test]
    fn no_options_means_no_tls_options() {
        assert!(!ClientTls::default().any());
        let named = ClientTls {
            server_name: Some("engine".into()),
            ..ClientTls::default()
        };
        assert!(named.any());
    }

    #[test]
    fn a_bad_file_is_named_with_its_option() {
        let dir = std::env::temp_dir().join(format!("io-engine-ctl-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.crt");
        let not_pem = dir.join("not-pem.crt");
        std::fs::write(&not_pem, "hello\n").unwrap();
        let error = |tls: ClientTls| tls.config().unwrap_err().to_string();
        let ca = error(ClientTls {
            ca: Some(missing.clone()),
            ..ClientTls::default()
        });
        assert!(
            ca.starts_with(&format!("--tls-ca {}: cannot read: ", missing.display())),
            "{ca}"
        );
        let cert = error(ClientTls {
            cert: Some(not_pem.clone()),
            key: Some(missing.clone()),
            ..ClientTls::default()
        });
        assert!(
            cert.starts_with(&format!(
                "--tls-cert {}: no PEM certificate in it",
                not_pem.display()
            )),
            "{cert}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
