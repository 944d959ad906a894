//! [`PollMode`]: how a reactor waits when it has nothing to do.
//!
//! Thread: any; chosen when the group starts, read by each reactor's loop.

use std::time::Duration;

/// How a reactor waits when it has nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PollMode {
    /// Spin without pause: the lowest latency, a whole core always busy.
    #[default]
    Busy,
    /// Spin while there is work; after `idle_before_sleep` without any, sleep
    /// up to `sleep` at a time, waking at once when a message arrives.
    Adaptive {
        /// Idle time before the reactor starts sleeping.
        idle_before_sleep: Duration,
        /// Longest single sleep; pollers run at least this often.
        sleep: Duration,
    },
}

impl PollMode {
    /// Adaptive mode with the default intervals: sleep as soon as a round
    /// finds nothing to do, at most 1 ms at a time. Spinning a while before
    /// sleeping buys wake-up latency with CPU; measured on NBD in
    /// docs/performance.md (`adaptive:MICROS` on the command line).
    pub const ADAPTIVE: PollMode = PollMode::Adaptive {
        idle_before_sleep: Duration::ZERO,
        sleep: Duration::from_millis(1),
    };

    /// `busy` or `adaptive`.
    pub fn name(&self) -> &'static str {
        match self {
            PollMode::Busy => "busy",
            PollMode::Adaptive { .. } => "adaptive",
        }
    }
}

impl std::str::FromStr for PollMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "busy" => Ok(PollMode::Busy),
            "adaptive" => Ok(PollMode::ADAPTIVE),
            other => {
                match other.strip_prefix("adaptive:") {
                    Some(us) => {
                        let us: u64 = us.parse().map_err(|_| {
                        format!("bad idle time in poll mode {other:?}: expected adaptive:MICROSECONDS")
                    })?;
                        Ok(PollMode::Adaptive {
                            idle_before_sleep: Duration::from_micros(us),
                            sleep: Duration::from_millis(1),
                        })
                    }
                    None => Err(format!(
                        "unknown poll mode {other:?}: expected busy, adaptive or adaptive:MICROSECONDS"
                    )),
                }
            }
        }
    }
}
