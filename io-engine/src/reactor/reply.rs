//! [`Reply`]: the result of work sent to a reactor, on its way back.
//!
//! Thread: the sender's; await it in async code, or [`Reply::wait`] on a
//! thread outside any runtime (never on a reactor).

use std::future::Future;
use std::pin::Pin;
use std::task::Context;

use super::error::ReactorError;

/// The result of work sent to a reactor: await it, or [`Reply::wait`] for it.
pub struct Reply<R> {
    state: Result<tokio::sync::oneshot::Receiver<R>, Option<ReactorError>>,
    index: usize,
}

impl<R> Reply<R> {
    /// A reply that reactor `index` will send on `rx`.
    pub(super) fn pending(rx: tokio::sync::oneshot::Receiver<R>, index: usize) -> Self {
        Reply {
            state: Ok(rx),
            index,
        }
    }

    /// A reply that is already the error `e`.
    pub(super) fn failed(e: ReactorError) -> Self {
        Reply {
            state: Err(Some(e)),
            index: usize::MAX,
        }
    }

    /// Blocks the calling thread until the result arrives. Not for use on a
    /// reactor thread (it would stall that reactor).
    pub fn wait(self) -> Result<R, ReactorError> {
        let index = self.index;
        match self.state {
            Ok(rx) => rx
                .blocking_recv()
                .map_err(|_| ReactorError::Canceled(index)),
            Err(e) => Err(e.unwrap_or(ReactorError::Canceled(index))),
        }
    }
}

impl<R> Future for Reply<R> {
    type Output = Result<R, ReactorError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> std::task::Poll<Self::Output> {
        let index = self.index;
        match &mut self.state {
            Ok(rx) => Pin::new(rx)
                .poll(cx)
                .map(|r| r.map_err(|_| ReactorError::Canceled(index))),
            Err(e) => {
                std::task::Poll::Ready(Err(e.take().unwrap_or(ReactorError::Canceled(index))))
            }
        }
    }
}
