//! A worker: one thread pinned to one core, busy-polling its connections
//! for the run (SPDK perf's model): complete what came in, refill the
//! queues, send the batch; then, with no new commands, wait for the last
//! completions.
//!
//! Thread: its own, pinned with the engine's `env::affinity`.

use std::time::{Duration, Instant};

use io_engine::env::{affinity, tsc};

use super::connection::Connection;

/// Longest wait for the commands in flight when the run ends.
const DRAIN: Duration = Duration::from_secs(10);

/// One core's connections.
pub struct Worker {
    /// The CPU it runs on.
    pub cpu: u32,
    /// Its connections.
    pub conns: Vec<Connection>,
}

/// What a worker gives back: its connections (with their figures) and
/// how long it ran.
pub struct Finished {
    /// The CPU it ran on.
    pub cpu: u32,
    /// Its connections.
    pub conns: Vec<Connection>,
    /// Seconds from the first command to the last completion.
    pub seconds: f64,
}

impl Worker {
    /// Runs for `seconds` on a thread of its own; join it for the figures.
    pub fn spawn(mut self, seconds: f64) -> std::thread::JoinHandle<Result<Finished, String>> {
        std::thread::spawn(move || {
            affinity::pin_current_thread(self.cpu).map_err(|e| e.to_string())?;
            let started = Instant::now();
            let t0 = tsc::now();
            let end = t0 + tsc::ns_to_ticks((seconds * 1e9) as u64);
            while tsc::now() < end {
                let mut working = false;
                for c in self.conns.iter_mut().filter(|c| c.broken.is_none()) {
                    c.receive();
                    c.submit(tsc::now());
                    c.flush();
                    working = true;
                }
                if !working {
                    break;
                }
            }
            let drain_end = Instant::now() + DRAIN;
            while Instant::now() < drain_end {
                let mut busy = false;
                for c in self.conns.iter_mut().filter(|c| c.broken.is_none()) {
                    if c.in_flight() > 0 {
                        busy = true;
                        c.receive();
                        c.flush();
                    }
                }
                if !busy {
                    break;
                }
            }
            for c in &mut self.conns {
                c.abandon();
            }
            Ok(Finished {
                cpu: self.cpu,
                conns: self.conns,
                seconds: started.elapsed().as_secs_f64(),
            })
        })
    }
}
