//! The daemon's gRPC TLS flags, and the rule they enforce: plaintext gRPC
//! only on a loopback address, unless `--grpc-insecure` asks for it.
//!
//! Thread: `main`, while parsing flags and before serving.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::GrpcTls;

/// The gRPC listener's TLS flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GrpcTlsArgs {
    /// Serve gRPC over TLS with this certificate (PEM, the server's first,
    /// then its chain; cert-manager's tls.crt). Needs --grpc-tls-key.
    #[arg(
        long,
        env = "IO_ENGINE_GRPC_TLS_CERT",
        value_name = "FILE",
        requires = "grpc_tls_key"
    )]
    pub grpc_tls_cert: Option<PathBuf>,

    /// The private key of --grpc-tls-cert (PEM; cert-manager's tls.key).
    #[arg(
        long,
        env = "IO_ENGINE_GRPC_TLS_KEY",
        value_name = "FILE",
        requires = "grpc_tls_cert"
    )]
    pub grpc_tls_key: Option<PathBuf>,

    /// With TLS: require a client certificate signed by a CA of this PEM
    /// bundle (mutual TLS; cert-manager's ca.crt). A client without one,
    /// or with another CA's, fails the handshake.
    #[arg(
        long,
        env = "IO_ENGINE_GRPC_TLS_CLIENT_CA",
        value_name = "FILE",
        requires = "grpc_tls_cert"
    )]
    pub grpc_tls_client_ca: Option<PathBuf>,

    /// Serve gRPC without TLS on an address that is not loopback (refused
    /// otherwise: anyone who reaches the port controls the engine).
    #[arg(
        long,
        env = "IO_ENGINE_GRPC_INSECURE",
        conflicts_with = "grpc_tls_cert"
    )]
    pub grpc_insecure: bool,
}

impl GrpcTlsArgs {
    /// The TLS configuration to serve on `addr` with: `Some` with the
    /// certificate flags (files read and checked), `None` for plaintext,
    /// which needs a loopback `addr` or `--grpc-insecure` (then a warning
    /// is logged). An error is one line naming the flags or the file.
    pub fn load(&self, addr: SocketAddr) -> Result<Option<GrpcTls>, String> {
        if let (Some(cert), Some(key)) = (&self.grpc_tls_cert, &self.grpc_tls_key) {
            return GrpcTls::load(cert, key, self.grpc_tls_client_ca.as_deref())
                .map(Some)
                .map_err(|e| format!("gRPC TLS: {e}"));
        }
        if addr.ip().is_loopback() {
            return Ok(None);
        }
        if !self.grpc_insecure {
            return Err(format!(
                "--grpc-addr {addr} is not a loopback address and gRPC has no TLS: give \
                 --grpc-tls-cert and --grpc-tls-key (and --grpc-tls-client-ca to require \
                 client certificates), or --grpc-insecure for plaintext"
            ));
        }
        tracing::warn!(
            "gRPC serves plaintext on {addr} (--grpc-insecure): anyone who reaches it controls \
             the engine; see docs/operations.md, \"gRPC over TLS\""
        );
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plaintext_is_fine_on_loopback_only() {
        let args = GrpcTlsArgs::default();
        for addr in ["127.0.0.1:1", "[::1]:1", "127.0.0.2:1"] {
            assert!(
                args.load(addr.parse().unwrap()).unwrap().is_none(),
                "{addr}"
            );
        }
        for addr in ["0.0.0.0:1", "[::]:1", "10.0.0.5:1"] {
            let e = args.load(addr.parse().unwrap()).unwrap_err();
            assert!(e.contains("--grpc-insecure"), "{addr}: {e}");
            assert!(e.contains("--grpc-tls-cert"), "{addr}: {e}");
        }
        let insecure = GrpcTlsArgs {
            grpc_insecure: true,
            ..GrpcTlsArgs::default()
        };
        assert!(
            insecure
                .load("0.0.0.0:1".parse().unwrap())
                .unwrap()
                .is_none()
        );
    }
}
