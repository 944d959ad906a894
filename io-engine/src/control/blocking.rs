//! Registry and perf work that blocks (mapping or unmapping a device's
//! memory, a run's buffers) runs on the runtime's blocking pool, so it never
//! stalls an async worker.
//!
//! Thread: the control-plane runtime; `f` on its blocking pool.

use tonic::{Code, Status};

use super::status::status;

/// Runs `f` on the blocking pool; a panic there is `INTERNAL`.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| status(Code::Internal, format!("control task failed: {e}")))
}
