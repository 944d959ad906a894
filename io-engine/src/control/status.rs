//! The engine's errors become gRPC statuses here, and only here: one table
//! from error kinds to status codes, the message saying what was wrong.
//!
//! Thread: the control-plane runtime.

use tonic::{Code, Status};

use crate::bdev::BdevError;
use crate::engine::DestroyError;
use crate::export::ExportError;
use crate::perf::PerfError;
use crate::reactor::ReactorError;

/// The status for a device error.
pub(super) fn bdev(e: BdevError) -> Status {
    let code = match &e {
        BdevError::Uri(_) => Code::InvalidArgument,
        BdevError::Exists(_) => Code::AlreadyExists,
        BdevError::NotFound(_) => Code::NotFound,
        BdevError::Busy { .. } => Code::FailedPrecondition,
        BdevError::NoMemory { .. } => Code::ResourceExhausted,
        BdevError::NotOnReactor | BdevError::Pool(_) => Code::Internal,
    };
    Status::new(code, e.to_string())
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
    Status::new(code, e.to_string())
}

/// The status for a perf run that could not start or finish.
pub(super) fn perf(e: PerfError) -> Status {
    match e {
        PerfError::Invalid(m) => Status::invalid_argument(m),
        PerfError::Bdev(e) => bdev(e),
        PerfError::Reactor(e) => reactor(e),
        PerfError::Buffers(e) => Status::resource_exhausted(e.to_string()),
        e @ PerfError::Job { .. } => Status::internal(e.to_string()),
    }
}

/// The status for an export error.
pub(super) fn export(e: ExportError) -> Status {
    match e {
        ExportError::Bdev(e) => bdev(e),
        e @ (ExportError::AlreadyShared(_) | ExportError::NqnInUse { .. }) => {
            Status::already_exists(e.to_string())
        }
        e @ (ExportError::NqnNotForProtocol(_) | ExportError::InvalidNqn { .. }) => {
            Status::invalid_argument(e.to_string())
        }
        e @ ExportError::NotShared(_) => Status::not_found(e.to_string()),
        e @ ExportError::Shared { .. } => Status::failed_precondition(e.to_string()),
    }
}

/// A part of an engine snapshot, or `INTERNAL` if reading it panicked
/// (the snapshot logged it).
pub(super) fn snapshot_part<T>(part: Option<T>, what: &str) -> Result<T, Status> {
    part.ok_or_else(|| Status::internal(format!("reading the {what} failed")))
}

/// A request field that is out of range.
pub(super) fn invalid(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bdev::uri;

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
                export(ExportError::NqnInUse {
                    nqn: "\"nqn.2019-05.io.example:a\"".into(),
                    device: "m1".into(),
                }),
                Code::AlreadyExists,
                "device \"m1\"",
            ),
            (
                export(ExportError::InvalidNqn {
                    nqn: "\"x\"".into(),
                    why: "does not start with nqn.",
                }),
                Code::InvalidArgument,
                "NQN \"x\" does not start",
            ),
            (
                export(ExportError::NqnNotForProtocol(crate::export::Protocol::Nbd)),
                Code::InvalidArgument,
                "not nbd",
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
