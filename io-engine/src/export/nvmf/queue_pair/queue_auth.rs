//! A queue's in-band authentication (DH-HMAC-CHAP) as its core sees it:
//! not required, in progress, or done.
//!
//! Thread: the queue's reactor.

use crate::export::nvmf::auth::Transaction;
use crate::export::nvmf::command::Command;
use crate::export::nvmf::command::{admin, fctype};

/// The queue's authentication.
pub(crate) enum QueueAuth {
    /// Not required (or not yet: before the Connect).
    Open,
    /// Required and not done: only AUTH_Send and AUTH_Receive are
    /// executed.
    Pending(Box<Transaction>),
    /// Done: the host authenticated.
    Done,
}

impl QueueAuth {
    /// Whether commands other than AUTH_Send / AUTH_Receive may run.
    pub fn is_open(&self) -> bool {
        !matches!(self, QueueAuth::Pending(_))
    }

    /// Whether `cmd` may run: any command once open, else only AUTH_Send
    /// and AUTH_Receive.
    pub fn admits(&self, cmd: &Command) -> bool {
        self.is_open()
            || (cmd.opcode() == admin::FABRICS
                && matches!(cmd.fctype(), fctype::AUTH_SEND | fctype::AUTH_RECEIVE))
    }
}
