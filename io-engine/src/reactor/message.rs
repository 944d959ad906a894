//! [`Message`]: what other threads send a reactor through its queue.
//!
//! Thread: built on any thread ([`Shared::post`](super::shared::Shared::post)),
//! run on the receiving reactor.

use std::panic::AssertUnwindSafe;

use super::panic::panic_message;

/// A closure to run on a reactor.
pub(super) type Job = Box<dyn FnOnce() + Send>;

/// A message to a reactor.
pub(super) enum Message {
    /// Run a closure ([`Reactors::run_on`](super::Reactors::run_on),
    /// [`Reactors::spawn_on`](super::Reactors::spawn_on), a stop).
    Run(Job),
    /// Run a task of this reactor that another thread woke.
    Wake(async_task::Runnable),
}

impl Message {
    /// Runs the message on reactor `index`. A panic inside a job does not
    /// kill the reactor: it is logged, the job's reply is dropped (the
    /// sender sees [`ReactorError::Canceled`](super::ReactorError::Canceled)),
    /// and the loop goes on.
    pub(super) fn run(self, index: usize) {
        match self {
            Message::Run(job) => {
                if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(job)) {
                    tracing::error!(
                        reactor = index,
                        "work sent to the reactor panicked: {}",
                        panic_message(&*panic)
                    );
                }
            }
            Message::Wake(r) => {
                r.run();
            }
        }
    }
}
