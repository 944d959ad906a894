//! [`RequestLimit`]: the tower service in front of every gRPC service that
//! keeps [`Limits`]' bound on requests in progress and their timeout.
//!
//! Beyond the bound a request is refused at once with RESOURCE_EXHAUSTED,
//! never queued: a queue would hold the flood's memory and delay everyone
//! behind it, and UNAVAILABLE would read as "daemon down" and be retried
//! at once by clients' transparent retries. Health checks are neither
//! counted nor refused (a probe failing under load would restart a busy
//! daemon). A request holds its place until its response starts, so a
//! stream (reflection, health watch) holds none while it streams.
//!
//! At the timeout the client gets DEADLINE_EXCEEDED, but the handler runs
//! to its end in the background, in its place: blocking work cannot be
//! stopped (a device's memory being mapped), and a handler dropped halfway
//! would leave it running outside the bound. So at most the bound's count
//! of handlers, and of blocking tasks, run at any time; a timed-out Create
//! may still create its device. `PerfService/Run` is not timed: its
//! request bounds its own run time.
//!
//! Thread: the control-plane runtime's workers.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;
use tonic::Code;
use tonic::body::Body;
use tonic::codegen::Service;
use tonic::codegen::http::{Request, Response};
use tower_layer::Layer;

use super::limits::Limits;
use super::status::status;

/// Path prefixes of the requests neither counted nor refused.
const UNBOUNDED: &[&str] = &["/grpc.health.v1.Health/"];

/// Methods the timeout does not cover.
const UNTIMED: &[&str] = &["/io_engine.v1.PerfService/Run"];

/// The layer that puts a [`RequestLimit`] in front of the services; its
/// clones share one bound.
#[derive(Debug, Clone)]
pub struct RequestLimitLayer {
    permits: Arc<Semaphore>,
    max: u32,
    timeout: Duration,
}

impl RequestLimitLayer {
    /// The layer keeping `limits`.
    pub fn new(limits: &Limits) -> Self {
        RequestLimitLayer {
            permits: Arc::new(Semaphore::new(limits.max_concurrent_requests as usize)),
            max: limits.max_concurrent_requests,
            timeout: limits.request_timeout(),
        }
    }
}

impl<S> Layer<S> for RequestLimitLayer {
    type Service = RequestLimit<S>;

    fn layer(&self, inner: S) -> RequestLimit<S> {
        RequestLimit {
            inner,
            limit: self.clone(),
        }
    }
}

/// `inner` with the bound on requests in progress and their timeout.
#[derive(Debug, Clone)]
pub struct RequestLimit<S> {
    inner: S,
    limit: RequestLimitLayer,
}

impl<S, B> Service<Request<B>> for RequestLimit<S>
where
    S: Service<Request<B>, Response = Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let path = req.uri().path();
        let permit = if UNBOUNDED.iter().any(|p| path.starts_with(p)) {
            None
        } else {
            match self.limit.permits.clone().try_acquire_owned() {
                Ok(permit) => Some(permit),
                Err(_) => {
                    let refused = status(
                        Code::ResourceExhausted,
                        format!(
                            "{} gRPC requests are in progress, the most this engine serves at \
                             once (--grpc-max-concurrent-requests); retry later",
                            self.limit.max
                        ),
                    );
                    return Box::pin(std::future::ready(Ok(refused.into_http())));
                }
            }
        };
        let timeout = (!UNTIMED.contains(&path)).then_some(self.limit.timeout);
        let mut response = Box::pin(self.inner.call(req));
        Box::pin(async move {
            let Some(timeout) = timeout else {
                let r = response.await;
                drop(permit);
                return r;
            };
            match tokio::time::timeout(timeout, &mut response).await {
                Ok(r) => r,
                Err(_) => {
                    // The handler finishes in the background, in its place.
                    tokio::spawn(async move {
                        let _ = response.await;
                        drop(permit);
                    });
                    Ok(status(
                        Code::DeadlineExceeded,
                        format!(
                            "the request ran longer than {} s (--grpc-request-timeout)",
                            timeout.as_secs()
                        ),
                    )
                    .into_http())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use super::*;

    /// A service that answers OK after the milliseconds its query gives.
    #[derive(Clone)]
    struct Sleepy;

    impl Service<Request<()>> for Sleepy {
        type Response = Response<Body>;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, req: Request<()>) -> Self::Future {
            let ms = req.uri().query().and_then(|q| q.parse().ok()).unwrap_or(0);
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(Response::new(Body::default()))
            })
        }
    }

    fn limited(max: u32, timeout_secs: u32) -> RequestLimit<Sleepy> {
        RequestLimitLayer::new(&Limits {
            max_concurrent_requests: max,
            request_timeout_secs: timeout_secs,
            ..Limits::DEFAULT
        })
        .layer(Sleepy)
    }

    fn req(path: &str, ms: u64) -> Request<()> {
        Request::builder()
            .uri(format!("http://x{path}?{ms}"))
            .body(())
            .unwrap()
    }

    /// The response's gRPC status code (`Ok` when it carries none).
    async fn code(f: <RequestLimit<Sleepy> as Service<Request<()>>>::Future) -> Code {
        let r = f.await.unwrap();
        tonic::Status::from_header_map(r.headers()).map_or(Code::Ok, |s| s.code())
    }

    const CREATE: &str = "/io_engine.v1.BdevService/Create";

    #[tokio::test]
    async fn beyond_the_bound_a_request_is_refused_at_once_but_health_is_not() {
        let mut s = limited(2, 30);
        let a = s.call(req(CREATE, 300));
        let b = s.call(req(CREATE, 300));
        let start = std::time::Instant::now();
        assert_eq!(code(s.call(req(CREATE, 0))).await, Code::ResourceExhausted);
        assert!(start.elapsed() < Duration::from_millis(100));
        let health = s.call(req("/grpc.health.v1.Health/Check", 0));
        assert_eq!(code(health).await, Code::Ok);
        assert_eq!((code(a).await, code(b).await), (Code::Ok, Code::Ok));
        // Their places are free again.
        assert_eq!(code(s.call(req(CREATE, 0))).await, Code::Ok);
    }

    #[tokio::test]
    async fn a_request_past_the_timeout_is_answered_but_a_perf_run_is_not() {
        let mut s = limited(4, 1);
        let slow = s.call(req(CREATE, 1500));
        let perf = s.call(req("/io_engine.v1.PerfService/Run", 1500));
        assert_eq!(code(slow).await, Code::DeadlineExceeded);
        // The timed-out handler still runs, in its place, as does the run.
        assert_eq!(s.limit.permits.available_permits(), 2);
        assert_eq!(code(perf).await, Code::Ok);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(s.limit.permits.available_permits(), 4);
    }
}
