//! The `process_*` metrics of the daemon: the `prometheus` crate's process
//! collector, but for `process_cpu_seconds_total`, which this module reads
//! itself at clock-tick precision.
//!
//! Thread: whichever thread scrapes (a blocking-pool thread of the daemon's
//! runtime); never a reactor.
//!
//! The crate's collector divides the ticks by `CLK_TCK` in integers, so its
//! counter moves in whole seconds: an idle engine at 3 % of a core reads 0
//! for half a minute and `rate()` over a minute says 0 or 1/60 core. Its
//! other metrics (memory, fds, threads, start time) are right, so this
//! collector keeps them and replaces only the CPU family, rather than
//! rewriting all seven: `/proc/self/stat`'s utime + stime, divided by
//! `sysconf(_SC_CLK_TCK)` in floating point (1/100 s on Linux).

use prometheus::core::{Collector, Desc};
use prometheus::process_collector::ProcessCollector;
use prometheus::proto::{self, MetricFamily, MetricType};

/// The name of the family this module replaces.
pub(super) const CPU_SECONDS: &str = "process_cpu_seconds_total";

/// Its help text, the crate's.
const CPU_HELP: &str = "Total user and system CPU time spent in seconds.";

/// The crate's process collector with `process_cpu_seconds_total` read at
/// clock-tick precision.
pub(super) struct ProcessMetrics {
    inner: ProcessCollector,
}

impl ProcessMetrics {
    /// The metrics of this process.
    pub(super) fn for_self() -> Self {
        ProcessMetrics {
            inner: ProcessCollector::for_self(),
        }
    }
}

impl Collector for ProcessMetrics {
    /// The crate's descriptors, its `process_cpu_seconds_total` included:
    /// the family keeps its name, help and type.
    fn desc(&self) -> Vec<&Desc> {
        self.inner.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut families: Vec<MetricFamily> = self
            .inner
            .collect()
            .into_iter()
            .filter(|f| f.name() != CPU_SECONDS)
            .collect();
        // Unreadable: no CPU family in this scrape, as the crate does.
        if let Some(seconds) = cpu_seconds() {
            families.insert(0, cpu_family(seconds));
        }
        families
    }
}

/// The `process_cpu_seconds_total` family holding `seconds`.
fn cpu_family(seconds: f64) -> MetricFamily {
    let mut c = proto::Counter::default();
    c.set_value(seconds);
    let mut m = proto::Metric::default();
    m.set_counter(c);
    let mut f = MetricFamily::default();
    f.set_name(CPU_SECONDS.to_string());
    f.set_help(CPU_HELP.to_string());
    f.set_field_type(MetricType::COUNTER);
    f.mut_metric().push(m);
    f
}

/// User and system CPU time of this process (all its threads, reaped
/// children excluded), in seconds, at clock-tick precision; `None` if
/// `/proc/self/stat` or `CLK_TCK` cannot be read.
pub(super) fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let ticks = cpu_ticks(&stat)?;
    // SAFETY: sysconf only reads a system constant; it takes no pointer.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| ticks as f64 / per_second as f64)
}

/// utime + stime (fields 14 and 15, in clock ticks) of a
/// `/proc/PID/stat` line, or `None` if it is not one.
///
/// Field 2, the command name, is in parentheses and may itself hold spaces
/// and parentheses (a thread may name itself `a) 1 2 (`), so the fields are
/// counted from the last `)` of the line: the kernel writes no `)` after
/// the name.
pub(super) fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    // Fields from 3 (state) on: utime is the 12th of those, stime the 13th.
    let mut fields = after_comm.split_ascii_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    utime.checked_add(stime)
}
