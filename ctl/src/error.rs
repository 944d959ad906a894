//! The CLI's errors and their one-line messages: gRPC statuses as
//! `CODE_NAME: server message`, connection failures naming the endpoint.
//! Usage errors are clap's and are turned into one line by `lib.rs`.
//!
//! Thread: the CLI's main thread.

use std::io;
use std::time::Duration;

use tonic::{Code, Status};

/// Everything that can go wrong after the command line parsed; each exits
/// with status 1.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CtlError {
    /// The TCP connection or HTTP/2 setup failed.
    #[error(
        "cannot reach the engine at {endpoint}: {cause}; check that the io-engine \
         daemon runs and that --endpoint (or IO_ENGINE_ENDPOINT) names its gRPC address"
    )]
    Connect {
        /// The URL tried.
        endpoint: String,
        /// The innermost cause, e.g. "Connection refused (os error 111)".
        cause: String,
    },
    /// The TLS handshake with the engine failed, or TLS could not be set up.
    #[error("cannot talk TLS to the engine at {endpoint}: {message}")]
    Tls {
        /// The URL tried.
        endpoint: String,
        /// What failed and what to check.
        message: String,
    },
    /// An http:// endpoint whose engine serves gRPC over TLS only: it
    /// said so (`message`), or (an engine too old to say it) the
    /// connection failed before any answer.
    #[error("{}", tls_only_message(endpoint, *said_so, message))]
    TlsOnly {
        /// The http:// URL tried.
        endpoint: String,
        /// Whether the engine said it serves TLS only (else the transport
        /// failed, which a TLS port does to plaintext).
        said_so: bool,
        /// The engine's message, or the transport's error.
        message: String,
    },
    /// A `--tls-*` file cannot be read or used: `--tls-key FILE: this key
    /// does not match the certificate in ...`.
    #[error("{option} {source}")]
    TlsFile {
        /// The option that named the file.
        option: &'static str,
        /// What is wrong with the file (the message names it).
        source: io_engine::env::tls_file_error::TlsFileError,
    },
    /// An RPC got no answer in time.
    #[error(
        "the engine at {endpoint} did not answer {rpc} within {} s (see --timeout)",
        timeout.as_secs_f64()
    )]
    Timeout {
        /// The URL of the engine.
        endpoint: String,
        /// `Service.Method`.
        rpc: &'static str,
        /// How long the CLI waited.
        timeout: Duration,
    },
    /// The engine (or the transport under it) answered with a gRPC error.
    #[error("{}", status_message(status, endpoint))]
    Status {
        /// The URL of the engine.
        endpoint: String,
        /// The status (boxed: it is large).
        status: Box<Status>,
    },
    /// Writing to stdout failed.
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
    /// A --dhchap-secret / --dhchap-ctrl-secret value is wrong or its file
    /// unreadable (the message never holds a secret).
    #[error("{0}")]
    Secret(String),
    /// Ctrl-C could not be watched for.
    #[error("cannot listen for Ctrl-C: {0}")]
    Signal(#[source] io::Error),
    /// The async runtime could not be built.
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] io::Error),
}

/// `NOT_FOUND: no device named "x"`: the canonical code name, then the
/// server's message verbatim (or the code's description when it sent none).
/// UNAVAILABLE usually means the connection broke, so it names the endpoint.
fn status_message(status: &Status, endpoint: &str) -> String {
    let code = status.code();
    let mut text = match status.message() {
        "" => format!("{}: {}", code_name(code), code.description()),
        message => format!("{}: {message}", code_name(code)),
    };
    if code == Code::Unavailable {
        text.push_str(&format!(
            " (engine at {endpoint}; check that the io-engine daemon runs there)"
        ));
    }
    text
}

/// What to do about an http:// endpoint that serves TLS only.
fn tls_only_message(endpoint: &str, said_so: bool, message: &str) -> String {
    let fix = format!(
        "use --endpoint {} with --tls-ca FILE (the CA that signed the engine's certificate), \
         and --tls-cert and --tls-key if it asks for a client certificate",
        https_url(endpoint)
    );
    if said_so {
        format!("the engine at {endpoint} serves gRPC over TLS only: {fix}")
    } else {
        format!(
            "no gRPC answer from {endpoint} ({message}); if the engine serves gRPC over TLS, {fix}"
        )
    }
}

/// `url` with https:// for http://.
fn https_url(url: &str) -> String {
    match url.strip_prefix("http://") {
        Some(rest) => format!("https://{rest}"),
        None => url.to_owned(),
    }
}

/// The canonical gRPC name of a status code.
pub(crate) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// The innermost error of a chain: the one that says what actually failed
/// ("Connection refused") rather than the layers above it.
pub(crate) fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = err;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_error(status: Status) -> String {
        CtlError::Status {
            endpoint: "http://h:1".into(),
            status: Box::new(status),
        }
        .to_string()
    }

    #[test]
    fn statuses_show_the_code_name_and_the_server_message() {
        assert_eq!(
            status_error(Status::not_found("no device named \"x\"")),
            "NOT_FOUND: no device named \"x\""
        );
        assert_eq!(
            status_error(Status::invalid_argument("unknown scheme \"foo\"")),
            "INVALID_ARGUMENT: unknown scheme \"foo\""
        );
        assert_eq!(
            status_error(Status::new(Code::Internal, "")),
            "INTERNAL: Internal error"
        );
    }

    #[test]
    fn unavailable_names_the_endpoint() {
        let text = status_error(Status::unavailable("connection reset"));
        assert!(
            text.starts_with("UNAVAILABLE: connection reset (engine at http://h:1;"),
            "{text}"
        );
    }

    #[test]
    fn a_plaintext_client_of_a_tls_engine_is_told_the_fix() {
        let said = CtlError::TlsOnly {
            endpoint: "http://h:1".into(),
            said_so: true,
            message: "this engine serves gRPC over TLS only: ...".into(),
        }
        .to_string();
        assert!(
            said.starts_with("the engine at http://h:1 serves gRPC over TLS only: use --endpoint https://h:1 with --tls-ca FILE"),
            "{said}"
        );
        let guessed = CtlError::TlsOnly {
            endpoint: "http://h:1".into(),
            said_so: false,
            message: "transport error".into(),
        }
        .to_string();
        assert!(
            guessed.starts_with("no gRPC answer from http://h:1 (transport error); if the engine serves gRPC over TLS, use --endpoint https://h:1"),
            "{guessed}"
        );
    }

    #[test]
    fn every_code_has_its_canonical_name() {
        // Codes are numbered 0..=16; the name is the enum's in SCREAMING_CASE.
        for i in 0..=16 {
            let code = Code::from_i32(i);
            let expected: String = format!("{code:?}")
                .chars()
                .enumerate()
                .flat_map(|(n, c)| {
                    let sep = (n > 0 && c.is_ascii_uppercase()).then_some('_');
                    sep.into_iter()
                        .chain(std::iter::once(c.to_ascii_uppercase()))
                })
                .collect();
            assert_eq!(code_name(code), expected, "{code:?}");
        }
    }

    #[test]
    fn connection_errors_name_the_endpoint_and_the_fix() {
        let e = CtlError::Connect {
            endpoint: "http://127.0.0.1:1".into(),
            cause: "Connection refused (os error 111)".into(),
        };
        let text = e.to_string();
        assert!(
            text.starts_with("cannot reach the engine at http://127.0.0.1:1: Connection refused")
        );
        assert!(
            text.contains("--endpoint (or IO_ENGINE_ENDPOINT)"),
            "{text}"
        );
    }

    #[test]
    fn root_cause_is_the_innermost_error() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer")]
        struct Outer(#[source] io::Error);
        let e = Outer(io::Error::other("inner"));
        assert_eq!(root_cause(&e), "inner");
    }
}
