//! Certificates for the TLS tests: a throw-away PKI written into a
//! directory, in the file names every client and server under test reads.
//!
//! One directory serves all of them: cert-manager's Secret layout
//! (`tls.crt`, `tls.key`, `ca.crt`, which the daemon's flags and the chart
//! take) and the GnuTLS one that libnbd, nbdkit and QEMU's
//! `tls-creds-x509` read (`ca-cert.pem`, `server-cert.pem`,
//! `server-key.pem`, `client-cert.pem`, `client-key.pem`). A second,
//! unrelated CA with a client certificate of its own is there for the
//! "wrong CA" cases.
//!
//! The leaf certificates carry the key usages and extended key usages
//! QEMU's checks insist on (digitalSignature and keyEncipherment; serverAuth
//! or clientAuth), and the server certificate names 127.0.0.1, ::1 and
//! localhost, the only addresses the tests use.
//!
//! Thread: the test threads (pure file writing).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// The common name of the client certificate signed by the test CA.
pub const CLIENT_CN: &str = "io-engine-test-client";

/// A test PKI written into a directory; the fields are the files' paths.
#[derive(Debug, Clone)]
pub struct TestPki {
    /// The directory holding every file below.
    pub dir: PathBuf,
    /// The CA certificate (`ca.crt`; also `ca-cert.pem`).
    pub ca: PathBuf,
    /// The server certificate for 127.0.0.1, ::1 and localhost (`tls.crt`;
    /// also `server-cert.pem`).
    pub server_cert: PathBuf,
    /// Its key (`tls.key`; also `server-key.pem`).
    pub server_key: PathBuf,
    /// A client certificate the CA signed, CN [`CLIENT_CN`] (`client.crt`;
    /// also `client-cert.pem`).
    pub client_cert: PathBuf,
    /// Its key (`client.key`; also `client-key.pem`).
    pub client_key: PathBuf,
    /// Another CA, unrelated to the first (`other-ca.crt`).
    pub other_ca: PathBuf,
    /// A client certificate the other CA signed (`other-client.crt`).
    pub other_client_cert: PathBuf,
    /// Its key (`other-client.key`).
    pub other_client_key: PathBuf,
}

/// A CA: its certificate's PEM and what signs with it.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("generate a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("self-sign the CA");
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf certificate and its key, as PEM.
    fn sign(
        &self,
        cn: &str,
        sans: Vec<SanType>,
        usage: ExtendedKeyUsagePurpose,
    ) -> (String, String) {
        let key = KeyPair::generate().expect("generate a key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf parameters");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).expect("sign a leaf");
        (cert.pem(), key.serialize_pem())
    }
}

impl TestPki {
    /// Creates the PKI in `dir` (made if missing; files there are replaced).
    pub fn create(dir: &Path) -> io::Result<TestPki> {
        fs::create_dir_all(dir)?;
        let ca = Ca::new("io-engine test CA");
        let other = Ca::new("io-engine other test CA");
        let sans = vec![
            SanType::IpAddress([127, 0, 0, 1].into()),
            SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
            SanType::DnsName("localhost".try_into().expect("a DNS name")),
        ];
        let (server_cert, server_key) =
            ca.sign("localhost", sans, ExtendedKeyUsagePurpose::ServerAuth);
        let (client_cert, client_key) =
            ca.sign(CLIENT_CN, Vec::new(), ExtendedKeyUsagePurpose::ClientAuth);
        let (other_cert, other_key) = other.sign(
            "io-engine-other-client",
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let write = |names: &[&str], pem: &str, secret: bool| -> io::Result<PathBuf> {
            for name in names {
                let path = dir.join(name);
                fs::write(&path, pem)?;
                if secret {
                    use std::os::unix::fs::PermissionsExt;
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
                }
            }
            Ok(dir.join(names[0]))
        };
        Ok(TestPki {
            dir: dir.to_path_buf(),
            ca: write(&["ca.crt", "ca-cert.pem"], &ca.pem, false)?,
            server_cert: write(&["tls.crt", "server-cert.pem"], &server_cert, false)?,
            server_key: write(&["tls.key", "server-key.pem"], &server_key, true)?,
            client_cert: write(&["client.crt", "client-cert.pem"], &client_cert, false)?,
            client_key: write(&["client.key", "client-key.pem"], &client_key, true)?,
            other_ca: write(&["other-ca.crt"], &other.pem, false)?,
            other_client_cert: write(&["other-client.crt"], &other_cert, false)?,
            other_client_key: write(&["other-client.key"], &other_key, true)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// openssl, an independent implementation, verifies each leaf against
    /// its own CA and refuses it against the other.
    #[test]
    fn leaves_verify_against_their_ca_only() {
        let dir = std::env::temp_dir().join(format!("io-engine-certs-{}", std::process::id()));
        let pki = TestPki::create(&dir).unwrap();
        let verify = |ca: &Path, cert: &Path, purpose: &str| {
            Command::new("openssl")
                .args(["verify", "-purpose", purpose, "-CAfile"])
                .arg(ca)
                .arg(cert)
                .output()
                .expect("run openssl")
                .status
                .success()
        };
        assert!(verify(&pki.ca, &pki.server_cert, "sslserver"));
        assert!(verify(&pki.ca, &pki.client_cert, "sslclient"));
        assert!(verify(&pki.other_ca, &pki.other_client_cert, "sslclient"));
        assert!(!verify(&pki.ca, &pki.other_client_cert, "sslclient"));
        assert!(!verify(&pki.other_ca, &pki.client_cert, "sslclient"));
        let text = Command::new("openssl")
            .args(["x509", "-noout", "-ext", "subjectAltName", "-in"])
            .arg(&pki.server_cert)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains("IP Address:127.0.0.1"), "{text}");
        assert!(text.contains("DNS:localhost"), "{text}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
