//! The engine's errors become gRPC statuses here, and only here: one table
//! from error kinds to status codes, the message saying what was wrong.
//! Every status the services make goes through [`status`], which caps its
//! message at [`MAX_MESSAGE`] bytes: the errors quote client input through
//! `Quoted` already, so the cap is a backstop that keeps any message within
//! what every client's metadata limit takes.
//!
//! Thread: the control-plane runtime.

use tonic::{Code, Status};

use crate::bdev::{BackingError, BdevError};
use crate::engine::{DestroyError, ShareError};
use crate::export::ExportError;
use crate::export::nvmf::SubsystemError;
use crate::perf::PerfError;
use crate::reactor::ReactorError;

/// Longest status message, in bytes (`grpc-message` is a header: a
/// longer one could exceed a client's metadata limit and turn the error
/// into `RESOURCE_EXHAUSTED`).
pub const MAX_MESSAGE: usize = 1024;

/// A status with `code` and `msg`, cut to [`MAX_MESSAGE`] bytes on a
/// character boundary, ending `... (N bytes)` with the whole length when
/// cut.
pub(super) fn status(code: Code, msg: impl Into<String>) -> Status {
    let mut msg = msg.into();
    if msg.len() > MAX_MESSAGE {
        let tail = format!("... ({} bytes)", msg.len());
        let mut end = MAX_MESSAGE - tail.len();
        while !msg.is_char_boundary(end) {
            end -= 1;
        }
        msg.truncate(end);
        msg.push_str(&tail);
    }
    Status::new(code, msg)
}

/// The status for a device error.
pub(super) fn bdev(e: BdevError) -> Status {
    let code = match &e {
        BdevError::Uri(_) => Code::InvalidArgument,
        BdevError::Exists(_) => Code::AlreadyExists,
        BdevError::NotFound(_) => Code::NotFound,
        BdevError::Busy { .. } => Code::FailedPrecondition,
        BdevError::NoMemory { .. } => Code::ResourceExhausted,
        BdevError::Backing { source, .. } => match source {
            BackingError::Missing(_) => Code::NotFound,
            BackingError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                Code::PermissionDenied
            }
            BackingError::Io { .. } | BackingError::Unavailable { .. } => Code::FailedPrecondition,
            _ => Code::InvalidArgument,
        },
        BdevError::NotOnReactor | BdevError::Pool(_) => Code::Internal,
    };
    status(code, e.to_string())
}

/// The status for a device that could not be destroyed.
pub(super) fn destroy(e: DestroyError) -> Status {
    match e {
        DestroyError::Shared(e) => export(e),
        DestroyError::Bdev(e) => bdev(e),
    }
}

/// The status for a reactor that did not answer.
pub(super) fn reactor(e: ReactorError) -> Status {
    let code = match &e {
        ReactorError::NoSuchCore { .. } => Code::InvalidArgument,
        ReactorError::Canceled(_) => Code::Unavailable,
        ReactorError::Start { .. } => Code::Internal,
    };
    status(code, e.to_string())
}

/// The status for a perf run that could not start or finish.
pub(super) fn perf(e: PerfError) -> Status {
    match e {
        PerfError::Invalid(m) => status(Code::InvalidArgument, m),
        PerfError::Bdev(e) => bdev(e),
        PerfError::Reactor(e) => reactor(e),
        PerfError::Buffers(e) => status(Code::ResourceExhausted, e.to_string()),
        e @ PerfError::Job { .. } => status(Code::Internal, e.to_string()),
    }
}

/// The status for an export error.
pub(super) fn export(e: ExportError) -> Status {
    let code = match e {
        ExportError::Bdev(e) => return bdev(e),
        ExportError::AlreadyShared(_) => Code::AlreadyExists,
        ExportError::NotShared(_) => Code::NotFound,
        ExportError::Shared { .. } => Code::FailedPrecondition,
    };
    status(code, e.to_string())
}

/// The status for NVMe-oF share options the subsystem table refused.
pub(super) fn subsystem(e: SubsystemError) -> Status {
    let code = match e {
        SubsystemError::NqnInUse { .. } => Code::AlreadyExists,
        SubsystemError::NqnNotForProtocol(_)
        | SubsystemError::HostsNotForProtocol(_)
        | SubsystemError::InvalidNqn { .. } => Code::InvalidArgument,
    };
    status(code, e.to_string())
}

/// The status for a share that was refused.
pub(super) fn share(e: ShareError) -> Status {
    match e {
        ShareError::Export(e) => export(e),
        ShareError::Nvmf(e) => subsystem(e),
    }
}

/// A part of an engine snapshot, or `INTERNAL` if reading it panicked
/// (the snapshot logged it).
pub(super) fn snapshot_part<T>(part: Option<T>, what: &str) -> Result<T, Status> {
    part.ok_or_else(|| status(Code::Internal, format!("reading the {what} failed")))
}

/// A request field that is out of range.
pub(super) fn invalid(msg: impl Into<String>) -> Status {
    status(Code::InvalidArgument, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::uri;

    #[test]
    fn messages_are_capped_at_1_kib_on_a_character_boundary() {
        let short = status(Code::NotFound, "no device named \"m0\"");
        assert_eq!(short.message(), "no device named \"m0\"");
        let exact = "x".repeat(MAX_MESSAGE);
        assert_eq!(status(Code::Internal, exact.clone()).message(), exact);
        for long in ["x".repeat(1 << 20), "é".repeat(5000)] {
            let s = status(Code::InvalidArgument, long.clone());
            assert_eq!(s.code(), Code::InvalidArgument);
            assert!(s.message().len() <= MAX_MESSAGE, "{}", s.message().len());
            assert!(long.starts_with(s.message().split("... (").next().unwrap()));
            assert!(
                s.message()
                    .ends_with(&format!("... ({} bytes)", long.len()))
            );
        }
    }

    #[test]
    fn errors_quoting_huge_input_stay_small() {
        let big = "9".repeat(1 << 20);
        let name = "n".repeat(10_000);
        for s in [
            bdev(BdevError::Uri(
                uri::parse(&format!("null:///n0?size_mb=1&blk_size={big}")).unwrap_err(),
            )),
            bdev(BdevError::Uri(
                uri::parse(&format!("null:///{name}?size_mb=1")).unwrap_err(),
            )),
            bdev(BdevError::NotFound(name.clone())),
            subsystem(SubsystemError::InvalidNqn {
                nqn: format!("nqn.2019-05.io.example:{name}"),
                why: "is longer than 223 bytes",
            }),
        ] {
            assert_eq!(
                s.code() == Code::NotFound,
                s.message().starts_with("no device")
            );
            assert!(s.message().len() < 400, "{}", s.message());
            assert!(s.message().contains(" bytes)"), "{}", s.message());
        }
    }

    #[test]
    fn each_error_kind_has_its_code_and_says_what_was_wrong() {
        let cases = [
            (
                bdev(BdevError::Uri(uri::parse("nvme:///x").unwrap_err())),
                Code::InvalidArgument,
                "nvme",
            ),
            (
                bdev(BdevError::Exists("m0".into())),
                Code::AlreadyExists,
                "m0",
            ),
            (bdev(BdevError::NotFound("zz".into())), Code::NotFound, "zz"),
            (
                bdev(BdevError::Busy {
                    name: "b".into(),
                    open: 2,
                }),
                Code::FailedPrecondition,
                "open",
            ),
            (
                destroy(DestroyError::Shared(ExportError::Shared {
                    name: "s0".into(),
                    protocol: crate::export::Protocol::Nbd,
                })),
                Code::FailedPrecondition,
                "shared over NBD; unshare it",
            ),
            (
                share(ShareError::Nvmf(SubsystemError::NqnInUse {
                    nqn: "nqn.2019-05.io.example:a".into(),
                    device: "m1".into(),
                })),
                Code::AlreadyExists,
                "device \"m1\"",
            ),
            (
                share(ShareError::Nvmf(SubsystemError::InvalidNqn {
                    nqn: "x".into(),
                    why: "does not start with nqn.",
                })),
                Code::InvalidArgument,
                "NQN \"x\" does not start",
            ),
            (
                share(ShareError::Nvmf(SubsystemError::NqnNotForProtocol(
                    crate::export::Protocol::Nbd,
                ))),
                Code::InvalidArgument,
                "not nbd",
            ),
            (
                share(ShareError::Export(ExportError::AlreadyShared("m0".into()))),
                Code::AlreadyExists,
                "already shared",
            ),
            (
                perf(PerfError::Invalid("queue depth 0".into())),
                Code::InvalidArgument,
                "queue depth",
            ),
            (
                reactor(ReactorError::NoSuchCore { index: 9, count: 2 }),
                Code::InvalidArgument,
                "9",
            ),
        ];
        for (status, code, word) in cases {
            assert_eq!(status.code(), code, "{status:?}");
            assert!(status.message().contains(word), "{status:?}");
        }
    }
}
