//! The kernel calls of file devices that may wait on the disk and have no
//! asynchronous form in the device's kernel interface: `copy_file_range`
//! (io_uring and AIO have none) and, for AIO devices, `fallocate` (zeroing
//! and deallocating ranges). They run on two engine-wide threads, started
//! on first use, never on a reactor; each result goes back to the channel
//! that asked ([`Results`]), which polls for it, and the reactor is woken
//! through the channel's eventfd if it sleeps.
//!
//! The threads run where the process's main thread may (the daemon confines
//! it to the CPUs its reactors leave free), not on the reactor that
//! happened to start them.
//!
//! Thread: [`submit`] is called on a reactor; the jobs run on the blocking
//! threads; [`Results`] is shared by both.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crossbeam_queue::SegQueue;

/// Threads running blocking jobs: two, so that one long copy does not hold
/// every other device's zeroing behind it.
const THREADS: usize = 2;

/// A kernel call to make off the reactor.
pub(super) enum Job {
    /// Copies `len` bytes at `src` to `dst` inside the file.
    Copy {
        /// Source offset.
        src: u64,
        /// Destination offset.
        dst: u64,
        /// Bytes.
        len: u64,
    },
    /// `fallocate(mode)` over a range.
    Fallocate {
        /// `FALLOC_FL_*`.
        mode: rustix::fs::FallocateFlags,
        /// Offset.
        offset: u64,
        /// Bytes.
        len: u64,
    },
}

/// Where a channel's finished jobs land: (slot, bytes or negated errno).
pub(super) struct Results {
    done: SegQueue<(u32, i64)>,
    /// Jobs queued for the channel and not yet popped: the channel's poll
    /// looks at the queue only when some are out (a relaxed load, not a
    /// pop, every round).
    out: AtomicUsize,
    /// Written once per result, to wake the channel's reactor if it sleeps.
    wake: Option<Arc<OwnedFd>>,
}

impl Results {
    pub(super) fn new(wake: Option<Arc<OwnedFd>>) -> Arc<Results> {
        Arc::new(Results {
            done: SegQueue::new(),
            out: AtomicUsize::new(0),
            wake,
        })
    }

    /// Records a result without a job (one that could not be queued).
    pub(super) fn push(&self, slot: u32, res: i64) {
        self.out.fetch_add(1, Ordering::Relaxed);
        self.done.push((slot, res));
    }

    /// The next finished job.
    #[inline]
    pub(super) fn pop(&self) -> Option<(u32, i64)> {
        if self.out.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let r = self.done.pop();
        if r.is_some() {
            self.out.fetch_sub(1, Ordering::Relaxed);
        }
        r
    }
}

struct Task {
    file: Arc<File>,
    job: Job,
    slot: u32,
    results: Arc<Results>,
}

/// The queue of the blocking threads (`None`: none could be started).
/// `Sender` is `Sync`: every reactor sends through it without a lock.
fn sender() -> Option<&'static Sender<Task>> {
    static SENDER: OnceLock<Option<Sender<Task>>> = OnceLock::new();
    SENDER
        .get_or_init(|| {
            let (tx, rx) = channel::<Task>();
            let rx = Arc::new(Mutex::new(rx));
            let mut started = 0;
            for i in 0..THREADS {
                let rx = rx.clone();
                if std::thread::Builder::new()
                    .name(format!("bdev-blocking-{i}"))
                    .spawn(move || serve(&rx))
                    .is_ok()
                {
                    started += 1;
                }
            }
            (started > 0).then_some(tx)
        })
        .as_ref()
}

fn serve(rx: &Mutex<Receiver<Task>>) {
    if let Ok(cpus) = crate::env::cores::allowed_cpus() {
        let cpus: Vec<u32> = cpus.iter().collect();
        if let Err(e) = crate::env::affinity::confine_current_thread(&cpus) {
            tracing::warn!("bdev blocking thread keeps the reactor's affinity: {e}");
        }
    }
    loop {
        let task = match rx.lock().unwrap_or_else(PoisonError::into_inner).recv() {
            Ok(task) => task,
            Err(_) => return,
        };
        let res = run(&task.file, &task.job);
        task.results.done.push((task.slot, res));
        if let Some(fd) = &task.results.wake {
            let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
        }
    }
}

/// Queues `job` on `file`; its result goes to `results` under `slot`.
/// Returns false if no blocking thread could be started (the caller fails
/// the IO).
pub(super) fn submit(file: Arc<File>, job: Job, slot: u32, results: Arc<Results>) -> bool {
    results.out.fetch_add(1, Ordering::Relaxed);
    let sent = match sender() {
        Some(tx) => tx
            .send(Task {
                file,
                job,
                slot,
                results: results.clone(),
            })
            .is_ok(),
        None => false,
    };
    if !sent {
        results.out.fetch_sub(1, Ordering::Relaxed);
    }
    sent
}

/// Runs one job: bytes done, or a negated errno.
fn run(file: &File, job: &Job) -> i64 {
    match *job {
        Job::Fallocate { mode, offset, len } => {
            match rustix::fs::fallocate(file, mode, offset, len) {
                Ok(()) => len as i64,
                Err(e) => -i64::from(e.raw_os_error()),
            }
        }
        Job::Copy { src, dst, len } => {
            let (mut src, mut dst, mut left) = (src, dst, len);
            while left > 0 {
                let chunk = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
                match rustix::fs::copy_file_range(file, Some(&mut src), file, Some(&mut dst), chunk)
                {
                    // The source ends (a file that shrank): the copy failed.
                    Ok(0) => return -i64::from(libc::EIO),
                    Ok(n) => left -= n as u64,
                    Err(e) if e == rustix::io::Errno::INTR => {}
                    Err(e) => return -i64::from(e.raw_os_error()),
                }
            }
            len as i64
        }
    }
}
