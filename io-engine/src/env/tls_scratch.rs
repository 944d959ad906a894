//! [`TlsScratch`]: the test fixture of TLS files. A scratch directory
//! under the system's temporary directory, removed on drop, holding a
//! throw-away CA, a certificate it signed with that certificate's key, and
//! a key of nothing, for the tests of the TLS loader and of its users.
//!
//! Thread: the test threads (file writing only).

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

/// A scratch directory with a test PKI in it.
pub(crate) struct TlsScratch {
    /// The directory.
    pub(crate) dir: PathBuf,
    /// The CA's certificate (`ca.crt`).
    pub(crate) ca: PathBuf,
    /// A certificate the CA signed, for `localhost`, then the CA's: a
    /// chain of two (`tls.crt`).
    pub(crate) cert: PathBuf,
    /// Its key (`tls.key`, PKCS#8).
    pub(crate) key: PathBuf,
    /// The key's PEM, as written.
    pub(crate) key_pem: String,
    /// A key no certificate here is for (`other.key`).
    pub(crate) other_key: PathBuf,
}

impl TlsScratch {
    /// A new directory for the test `tag` of this process, with the PKI.
    pub(crate) fn new(tag: &str) -> TlsScratch {
        let dir = std::env::temp_dir().join(format!("io-engine-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        let ca_key = KeyPair::generate().expect("generate the CA key");
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).expect("the CA's parameters");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).expect("self-sign the CA");
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().expect("generate a key");
        let cert = CertificateParams::new(vec!["localhost".to_string()])
            .expect("the certificate's parameters")
            .signed_by(&key, &issuer)
            .expect("sign the certificate");
        let other = KeyPair::generate().expect("generate another key");
        let key_pem = key.serialize_pem();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("write a scratch file");
            path
        };
        TlsScratch {
            ca: write("ca.crt", &ca.pem()),
            cert: write("tls.crt", &format!("{}{}", cert.pem(), ca.pem())),
            key: write("tls.key", &key_pem),
            other_key: write("other.key", &other.serialize_pem()),
            key_pem,
            dir,
        }
    }

    /// Writes `text` to the file `name` in the directory.
    pub(crate) fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("write a scratch file");
        path
    }
}

impl Drop for TlsScratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
