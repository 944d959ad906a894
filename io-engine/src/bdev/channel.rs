//! The per-core IO channel: validation, IO objects, the exhaustion queue,
//! per-core statistics and completion dispatch, in front of a device's own
//! [`DeviceChannel`].
//!
//! Thread: one reactor. A channel is opened on a reactor
//! ([`BdevDesc::open_channel`], defined here so that the descriptor does not
//! depend on the channel), registers a poller there, and is `!Send`; every
//! IO it submits completes on that reactor.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_utils::CachePadded;

use super::copy_emulation::CopyEmulation;
use super::desc::BdevDesc;
use super::device_channel::DeviceChannel;
use super::draining_channel::DrainingChannel;
use super::error::BdevError;
use super::io::{BdevIo, IoCompletion, IoDone, IoError, IoRequest, IoSlot, IoType, SubmitError};
use super::retired_channel::RetiredChannel;
use super::stats::CoreCounters;
use crate::accel::OFFLOAD_DRAIN_TIMEOUT;
use crate::env::core_slot;
use crate::env::tsc;
use crate::pool::{ObjectPool, Pooled};
use crate::reactor::{self, Poll, PollerHandle};

/// Completions the scratch queue holds before it grows.
const INITIAL_QUEUE: usize = 256;

struct Waiting {
    req: IoRequest,
    cb: Rc<dyn IoCompletion>,
}

#[derive(Default)]
struct Waiter {
    done: Cell<Option<IoDone>>,
    waker: RefCell<Option<std::task::Waker>>,
}

impl IoCompletion for Waiter {
    fn complete(self: Rc<Self>, io: IoDone) {
        self.done.set(Some(io));
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

/// The channel's state, shared by its handle and its poller. When both are
/// gone, `Drop` deals with the device channel first (see there), so that
/// nothing the device may still write goes before it.
struct Inner {
    /// Taken out (once) by `Drop`.
    dev: ManuallyDrop<RefCell<Box<dyn DeviceChannel>>>,
    io_pool: Arc<ObjectPool<IoSlot>>,
    block_mask: u64,
    block_size: u32,
    size: u64,
    supported: [bool; IoType::COUNT],
    /// The device wakes the reactor when its IO completes
    /// ([`DeviceChannel::wakes_reactor`]).
    wakes_reactor: bool,
    /// This core's entry of the device's counters.
    counters: Arc<CachePadded<CoreCounters>>,
    /// Scratch for the device's completions; keeps its capacity.
    done: RefCell<Vec<BdevIo>>,
    /// Requests that found the IO pool exhausted, in arrival order.
    waiting: RefCell<VecDeque<Waiting>>,
    in_flight: Cell<u64>,
    closed: Cell<bool>,
    poller: RefCell<Option<PollerHandle>>,
    /// Holds the device open; let go as soon as a closed channel drains, so
    /// a destroy right after the last IO finds the device closed.
    desc: RefCell<Option<BdevDesc>>,
}

/// A device opened on one core.
///
/// Dropping the channel closes it: IOs already submitted (or queued for IO
/// objects) still run and complete through their handlers, then the
/// channel's poller unregisters itself. Should the poller go first (a
/// completion handler panicked, which removes it, or the reactor stopped),
/// the IOs in the device are finished without their handlers
/// (`DrainingChannel`) before any of their memory is let go.
pub struct IoChannel {
    inner: Rc<Inner>,
}

impl IoChannel {
    /// Opens `desc`'s device on the calling reactor.
    pub(super) fn open(desc: BdevDesc) -> Result<IoChannel, BdevError> {
        if reactor::current_core().is_none() {
            return Err(BdevError::NotOnReactor);
        }
        let bdev = desc.bdev().clone();
        let block_size = bdev.block_size();
        let mut supported = IoType::ALL.map(|op| bdev.supports(op));
        let mut dev = bdev.create_channel();
        if CopyEmulation::wanted(&supported) {
            match CopyEmulation::new(dev, block_size) {
                Ok(emulated) => {
                    dev = Box::new(emulated);
                    supported[IoType::Copy.index()] = true;
                }
                Err((plain, e)) => {
                    tracing::warn!(device = bdev.name(), "copy not emulated: {e}");
                    dev = plain;
                }
            }
        }
        let wakes_reactor = dev.wakes_reactor();
        let inner = Rc::new(Inner {
            wakes_reactor,
            block_mask: block_size as u64 - 1,
            block_size,
            size: bdev.size_bytes(),
            supported,
            counters: desc.stats().core(core_slot::current()),
            io_pool: desc.io_pool_arc(),
            dev: ManuallyDrop::new(RefCell::new(dev)),
            done: RefCell::new(Vec::with_capacity(INITIAL_QUEUE)),
            waiting: RefCell::new(VecDeque::new()),
            in_flight: Cell::new(0),
            closed: Cell::new(false),
            poller: RefCell::new(None),
            desc: RefCell::new(Some(desc)),
        });
        let polled = inner.clone();
        let handle = reactor::register_poller("bdev-channel", move || polled.poll());
        *inner.poller.borrow_mut() = Some(handle);
        Ok(IoChannel { inner })
    }

    /// Submits `req`; `cb` receives it when it completes, on this core.
    ///
    /// A request the device cannot take (unaligned, out of range, length 0,
    /// unsupported, missing buffer) is refused here, handed back with its
    /// buffer. A request that finds the IO pool exhausted is queued and
    /// started when IO objects return: it is never dropped.
    #[inline]
    pub fn submit(&self, req: IoRequest, cb: Rc<dyn IoCompletion>) -> Result<(), SubmitError> {
        let inner = &*self.inner;
        if let Err(error) = inner.validate(&req) {
            return Err(SubmitError {
                error,
                request: req,
            });
        }
        inner.submit_valid(req, cb);
        Ok(())
    }

    /// Submits `req` and waits for its completion. For control-path users
    /// and tests; the data path passes its own handler to [`Self::submit`].
    pub async fn io(&self, req: IoRequest) -> Result<IoDone, SubmitError> {
        let waiter = Rc::new(Waiter::default());
        self.submit(req, waiter.clone())?;
        Ok(std::future::poll_fn(|cx| match waiter.done.take() {
            Some(done) => std::task::Poll::Ready(done),
            None => {
                *waiter.waker.borrow_mut() = Some(cx.waker().clone());
                std::task::Poll::Pending
            }
        })
        .await)
    }

    /// IOs handed to the device and not yet completed.
    pub fn in_flight(&self) -> u64 {
        self.inner.in_flight.get()
    }

    /// Requests waiting for IO objects.
    pub fn waiting(&self) -> usize {
        self.inner.waiting.borrow().len()
    }
}

impl BdevDesc {
    /// Opens a channel on the calling reactor.
    pub fn open_channel(&self) -> Result<IoChannel, BdevError> {
        IoChannel::open(self.clone())
    }
}

impl Drop for IoChannel {
    fn drop(&mut self) {
        self.inner.closed.set(true);
        self.inner.retire_if_drained();
    }
}

impl Drop for Inner {
    /// Runs once the handle and the poller are both gone. After a normal
    /// close the poller retires only with nothing in flight; but it is also
    /// dropped with IO still in the device when a completion handler
    /// panics (the reactor removes a panicking poller) or the reactor
    /// stops. The device channel then goes to a [`DrainingChannel`], which
    /// keeps it, and the device open, until the device has finished every
    /// IO, dropping them without calling their handlers: a handler that
    /// just panicked may panic again, this may run while the reactor tears
    /// down, and whoever dropped the channel gave up its completions.
    /// Requests still waiting for IO objects never reached the device and
    /// are dropped with their buffers.
    fn drop(&mut self) {
        // SAFETY: `dev` is taken only here, in `drop`, which runs once;
        // nothing uses it afterwards.
        let dev = unsafe { ManuallyDrop::take(&mut self.dev) }.into_inner();
        let in_flight = self.in_flight.get();
        if in_flight == 0 {
            drop(dev);
            return;
        }
        DrainingChannel::start(
            dev,
            in_flight,
            self.counters.clone(),
            self.desc.get_mut().take(),
            Instant::now() + OFFLOAD_DRAIN_TIMEOUT,
        );
    }
}

impl Inner {
    #[inline]
    fn validate(&self, req: &IoRequest) -> Result<(), IoError> {
        let (op, offset, len) = (req.op, req.offset, req.len);
        if !self.supported[op.index()] {
            return Err(IoError::Unsupported(op));
        }
        if (offset | len) & self.block_mask != 0 {
            return Err(IoError::Unaligned {
                offset,
                len,
                block_size: self.block_size,
            });
        }
        if len == 0 && op != IoType::Flush {
            return Err(IoError::Empty(op));
        }
        if offset.checked_add(len).is_none_or(|end| end > self.size) {
            return Err(IoError::OutOfRange {
                offset,
                len,
                size: self.size,
            });
        }
        if op == IoType::Copy {
            let src = req.src;
            if src & self.block_mask != 0 {
                return Err(IoError::Unaligned {
                    offset: src,
                    len,
                    block_size: self.block_size,
                });
            }
            if src.checked_add(len).is_none_or(|end| end > self.size) {
                return Err(IoError::OutOfRange {
                    offset: src,
                    len,
                    size: self.size,
                });
            }
            if src < offset + len && offset < src + len {
                // The two ranges overlap: a copy has no defined result.
                return Err(IoError::Unsupported(op));
            }
        }
        if op.has_data() {
            let have = req.buf.as_ref().map_or(0, |b| b.len() as u64);
            if have < len {
                return Err(IoError::Buffer { op, len, have });
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn submit_valid(&self, req: IoRequest, cb: Rc<dyn IoCompletion>) {
        if self.waiting.borrow().is_empty()
            && let Some(slot) = self.io_pool.get()
        {
            self.start(slot, req, cb);
        } else {
            self.waiting.borrow_mut().push_back(Waiting { req, cb });
        }
    }

    #[inline(always)]
    fn start(&self, mut slot: Pooled<IoSlot>, req: IoRequest, cb: Rc<dyn IoCompletion>) {
        let s = &mut *slot;
        s.op = req.op;
        s.offset = req.offset;
        s.len = req.len;
        s.buf = req.buf;
        s.src = req.src;
        s.tag = req.tag;
        s.fua = req.fua;
        s.status = Ok(());
        s.submit_tsc = tsc::now();
        self.in_flight.set(self.in_flight.get() + 1);
        self.counters.submitted();
        self.dev.borrow_mut().submit(BdevIo { slot, cb });
    }

    fn poll(&self) -> Poll {
        let mut done = std::mem::take(&mut *self.done.borrow_mut());
        let n = self.dev.borrow_mut().poll(&mut done);
        if n > 0 {
            let now = tsc::now();
            self.in_flight.set(self.in_flight.get() - done.len() as u64);
            for BdevIo { mut slot, cb } in done.drain(..) {
                slot.complete_tsc = now;
                self.counters.completed(
                    slot.op,
                    slot.len,
                    slot.status.is_ok(),
                    now.wrapping_sub(slot.submit_tsc),
                );
                cb.complete(IoDone { slot });
            }
        }
        *self.done.borrow_mut() = done;
        let retried = self.retry_waiting();
        if self.closed.get() {
            self.retire_if_drained();
        }
        // IO still in the device (an offload engine working on it) keeps
        // the reactor polling rather than sleeping, unless the device wakes
        // it when the IO completes.
        if n > 0 || retried || (self.in_flight.get() > 0 && !self.wakes_reactor) {
            Poll::Busy
        } else {
            Poll::Idle
        }
    }

    /// Starts queued requests while IO objects are to be had.
    fn retry_waiting(&self) -> bool {
        let mut started = false;
        loop {
            if self.waiting.borrow().is_empty() {
                return started;
            }
            let Some(slot) = self.io_pool.retry_get() else {
                return started;
            };
            let Some(w) = self.waiting.borrow_mut().pop_front() else {
                return started;
            };
            self.start(slot, w.req, w.cb);
            started = true;
        }
    }

    /// A closed channel with nothing left in flight unregisters its poller,
    /// which releases the channel. The device channel goes first, at once:
    /// what it holds (a backing's file) is closed before the device can be
    /// destroyed.
    fn retire_if_drained(&self) {
        if self.in_flight.get() == 0 && self.waiting.borrow().is_empty() {
            let dev = std::mem::replace(&mut *self.dev.borrow_mut(), Box::new(RetiredChannel));
            drop(dev);
            drop(self.desc.borrow_mut().take());
            drop(self.poller.borrow_mut().take());
        }
    }
}
