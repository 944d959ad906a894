//! Data digests a queue pair hands its transport to compute off the core
//! (on the accel engine crc32c is assigned to, when that is an offload
//! engine such as DSA): which PDU data of which command, what the CRC-32C
//! is for (a received PDU's digest to check, or a read's C2HData digest to
//! send), and which are waiting to be handed out or being computed.
//!
//! Only data PDUs of at least [`DigestJobs::min`] bytes are handed out: a
//! descriptor round trip to an engine costs about a microsecond, the core's
//! own SIMD CRC-32C about 95 ns per 4 KiB (docs/performance.md), so small
//! PDUs are cheaper inline. A job's data stays where it is, unwritten, in
//! its command's IO buffer until the job is done; the queue pair does not
//! close while one is out.
//!
//! Thread: the queue's reactor.

use std::collections::VecDeque;
use std::ops::Range;

/// What a digest is computed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A received data PDU's digest, to compare with `want`; `flags` are
    /// the PDU's.
    Check { want: u32, flags: u8 },
    /// A successful read's C2HData digest: the data goes out once it is
    /// known.
    Send { len: usize },
}

/// One digest: the CRC-32C from `seed` of bytes `range` of the IO buffer
/// the command in slot `tag` holds.
#[derive(Debug, Clone)]
pub(crate) struct DigestJob {
    pub tag: u16,
    pub range: Range<usize>,
    pub seed: u32,
    pub purpose: Purpose,
}

/// A queue pair's digests handed out or to hand out, by job number.
#[derive(Debug)]
pub(crate) struct DigestJobs {
    /// Data of at least this many bytes (and at most `max`) has its digest
    /// handed out; `usize::MAX`: none is.
    pub min: usize,
    pub max: usize,
    jobs: Vec<Option<DigestJob>>,
    free: Vec<u32>,
    /// Jobs not handed out yet, in order.
    ready: VecDeque<u32>,
    /// Jobs taken and not done (ready or handed out).
    out: u32,
}

impl Default for DigestJobs {
    fn default() -> Self {
        DigestJobs {
            min: usize::MAX,
            max: 0,
            jobs: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            out: 0,
        }
    }
}

impl DigestJobs {
    /// Whether data of `len` bytes has its digest handed out.
    pub fn takes(&self, len: usize) -> bool {
        len >= self.min && len <= self.max
    }

    /// Queues `job` to be handed out.
    pub fn push(&mut self, job: DigestJob) {
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(j) = self.jobs.get_mut(id as usize) {
                    *j = Some(job);
                }
                id
            }
            None => {
                self.jobs.push(Some(job));
                (self.jobs.len() - 1) as u32
            }
        };
        self.ready.push_back(id);
        self.out += 1;
    }

    /// The next job to hand out, with its number.
    pub fn next(&mut self) -> Option<(u32, &DigestJob)> {
        let id = self.ready.pop_front()?;
        self.jobs
            .get(id as usize)
            .and_then(Option::as_ref)
            .map(|j| (id, j))
    }

    /// Job `id`, done: taken out of the table. `None` for a number that
    /// is not a job out.
    pub fn take(&mut self, id: u32) -> Option<DigestJob> {
        let job = self.jobs.get_mut(id as usize)?.take()?;
        self.free.push(id);
        self.out = self.out.saturating_sub(1);
        Some(job)
    }

    /// Jobs taken and not done.
    pub fn out(&self) -> u32 {
        self.out
    }
}
