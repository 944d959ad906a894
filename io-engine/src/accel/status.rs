//! How a task ended.
//!
//! Thread: any; a plain value.

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Done as asked.
    Success,
    /// A compare found the buffers different (SPDK: `-EILSEQ`).
    Miscompare,
    /// The engine found the request invalid after submission.
    InvalidArgument,
    /// The engine failed the task (a device error, a channel reset).
    EngineError,
}

impl Status {
    /// `success`, `miscompare`, `invalid_argument`, `engine_error`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Miscompare => "miscompare",
            Status::InvalidArgument => "invalid_argument",
            Status::EngineError => "engine_error",
        }
    }
}
