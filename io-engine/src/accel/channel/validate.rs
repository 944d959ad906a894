//! What the framework checks of a request before any module sees it, and
//! the refusal it makes of a bad one.
//!
//! Thread: the channel's; called once per task, as it is built
//! ([`Stage::push`](super::stage::Stage::push)).

use crate::accel::{AccelError, IoVec, Opcode, Task};

/// Dualcast destinations must be aligned to this (SPDK's rule).
pub(super) const DUALCAST_ALIGN: usize = 4096;

/// Why a request is refused; made into a message only when it is.
pub(super) enum Refusal {
    Zero,
    Null,
    Overlap,
    Unaligned,
    EmptyVector,
    VectorOverflow,
    VectorTotal { total: usize, len: usize },
    TooLong { len: usize, max: usize },
}

impl Refusal {
    /// The error a submitter gets for `op`, routed to `module`.
    #[cold]
    pub(super) fn into_error(self, op: Opcode, module: &str) -> AccelError {
        AccelError::Invalid {
            op,
            reason: self.describe(module),
        }
    }

    fn describe(&self, module: &str) -> String {
        match self {
            Refusal::Zero => "zero length".into(),
            Refusal::Null => "null buffer".into(),
            Refusal::Overlap => "source and destination overlap".into(),
            Refusal::Unaligned => {
                format!("destinations must be {DUALCAST_ALIGN}-byte aligned")
            }
            Refusal::EmptyVector => "a source vector is null or empty".into(),
            Refusal::VectorOverflow => "the source vectors' lengths add up past usize".into(),
            Refusal::VectorTotal { total, len } => {
                format!("source vectors hold {total} bytes, not the {len} asked")
            }
            Refusal::TooLong { len, max } => {
                format!("length {len} is above the {max}-byte limit of module {module}")
            }
        }
    }
}

/// The total length of vectored sources, for the task's `len`: their sum,
/// or `usize::MAX` where it would pass it (which [`validate`] then refuses:
/// it is above every module's limit, or the sum checked there overflows).
#[inline]
pub(super) fn vector_len(srcs: &[IoVec]) -> usize {
    srcs.iter().fold(0usize, |sum, v| sum.saturating_add(v.len))
}

/// Checks what the framework can check before any module sees a task.
#[inline(always)]
pub(super) fn validate(t: &Task, max_len: usize) -> Result<(), Refusal> {
    if t.len == 0 {
        return Err(Refusal::Zero);
    }
    if t.len > max_len {
        return Err(Refusal::TooLong {
            len: t.len,
            max: max_len,
        });
    }
    let overlaps = |a: usize, alen: usize, b: usize, blen: usize| {
        a < b.saturating_add(blen) && b < a.saturating_add(alen)
    };
    match t.op {
        Opcode::Copy => {
            if t.dst.is_null() || t.src.is_null() {
                return Err(Refusal::Null);
            }
            if overlaps(t.dst as usize, t.len, t.src as usize, t.len) {
                return Err(Refusal::Overlap);
            }
        }
        Opcode::Fill => {
            if t.dst.is_null() {
                return Err(Refusal::Null);
            }
        }
        Opcode::Compare => {
            if t.src.is_null() || t.src2.is_null() {
                return Err(Refusal::Null);
            }
        }
        Opcode::Dualcast => {
            if t.dst.is_null() || t.dst2.is_null() || t.src.is_null() {
                return Err(Refusal::Null);
            }
            if !(t.dst as usize).is_multiple_of(DUALCAST_ALIGN)
                || !(t.dst2 as usize).is_multiple_of(DUALCAST_ALIGN)
            {
                return Err(Refusal::Unaligned);
            }
            let (d1, d2, s, n) = (t.dst as usize, t.dst2 as usize, t.src as usize, t.len);
            if overlaps(d1, n, d2, n) || overlaps(d1, n, s, n) || overlaps(d2, n, s, n) {
                return Err(Refusal::Overlap);
            }
        }
        Opcode::Crc32c | Opcode::CopyCrc32c => {
            let copy = t.op == Opcode::CopyCrc32c;
            if copy && t.dst.is_null() {
                return Err(Refusal::Null);
            }
            let mut total = 0usize;
            for v in t.sources().iter() {
                if v.base.is_null() || v.len == 0 {
                    return Err(Refusal::EmptyVector);
                }
                // Checked: a sum that wraps (a release build does not
                // trap) could match `len` and run over memory nobody gave.
                total = total.checked_add(v.len).ok_or(Refusal::VectorOverflow)?;
                if copy && overlaps(t.dst as usize, t.len, v.base as usize, v.len) {
                    return Err(Refusal::Overlap);
                }
            }
            if total != t.len {
                return Err(Refusal::VectorTotal { total, len: t.len });
            }
        }
    }
    Ok(())
}
