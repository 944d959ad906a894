//! One NVMe/TCP connection on its reactor: the transport around its queue
//! pair's sans-IO core ([`QueuePair`]). It reads the socket into the
//! places the core names (its input, or a Write's IO buffer), lets the
//! core handle what came, submits the device IOs the core hands out on an
//! [`IoChannel`] of this reactor and hands their completions back, and
//! writes the core's output with vectored writes (READ data from the IO
//! buffers themselves). Everything the protocol decides is the core's.
//!
//! Large data PDUs' digests go to the reactor's offload engine when the
//! target offloads them ([`DigestOffload`](super::digest_offload)) and
//! crc32c runs on one here ([`DigestQueue`]); the poller reaps them.
//!
//! Thread: the connection's reactor, from accept to close. Its socket is
//! non-blocking and registered with the reactor's epoll set; a poller runs
//! the core's timers once a round.

use std::cell::RefCell;
use std::io;
use std::rc::{Rc, Weak};
use std::sync::Arc;

use super::digest_queue::DigestQueue;
use super::io_outcome::IoOutcome;
use super::listener::Listener;
use super::queue_pair::QueuePair;
use super::recv_buf::RecvBuf;
use super::target::Target;
use crate::bdev::{IoChannel, IoCompletion, IoDone, IoError};
use crate::env::tsc;
use crate::export::{HandshakeSlot, Stream};
use crate::reactor::{self, FdHandler, FdRegistration, Interest, Poll, PollerHandle, Readiness};

/// Flush the output from a completion once this much waits, even with
/// IOs in flight (else the last completion of a burst flushes).
const FLUSH_BYTES: usize = 64 << 10;
/// errno of an IO failed because the device channel could not be opened.
const EIO: i32 = 5;

/// A connection.
pub struct Connection {
    /// Data digests computed off the core (`None`: all inline). Declared
    /// first: dropped (its queue drained) before the core lets their
    /// buffers go, however the connection ends.
    digests: RefCell<Option<DigestQueue>>,
    sock: Rc<Stream>,
    core: RefCell<QueuePair>,
    /// The device channel of an established I/O queue, opened when its
    /// first IO is submitted. Dropped before the core lets the device go.
    channel: RefCell<Option<IoChannel>>,
    reg: RefCell<Option<FdRegistration>>,
    poller: RefCell<Option<PollerHandle>>,
    listener: Arc<Listener>,
    peer: String,
    me: Weak<Connection>,
}

impl Connection {
    /// Starts serving `sock` on the calling reactor.
    pub fn start(
        sock: Stream,
        peer: String,
        target: Arc<Target>,
        listener: Arc<Listener>,
        slot: HandshakeSlot,
    ) {
        if let Err(e) = sock.set_nonblocking() {
            tracing::warn!(%peer, "NVMe/TCP connection dropped: {e}");
            listener.closed();
            return;
        }
        let offload = target.digest_offload().and_then(|o| o.here());
        let mut core = QueuePair::new(target, peer.clone(), Some(slot), tsc::now());
        let digests = offload.map(|(ch, min, max)| {
            core.offload_digests(min, max);
            DigestQueue::new(ch)
        });
        let conn = Rc::new_cyclic(|me| Connection {
            me: me.clone(),
            sock: Rc::new(sock),
            core: RefCell::new(core),
            channel: RefCell::new(None),
            digests: RefCell::new(digests),
            reg: RefCell::new(None),
            poller: RefCell::new(None),
            listener,
            peer,
        });
        let weak: Weak<dyn FdHandler> = Rc::downgrade(&conn) as Weak<dyn FdHandler>;
        match reactor::register_fd(conn.sock.clone(), Interest::READ, weak) {
            Ok(r) => *conn.reg.borrow_mut() = Some(r),
            Err(e) => {
                tracing::warn!(peer = %conn.peer, "NVMe/TCP connection dropped: {e}");
                conn.core.borrow_mut().close();
                conn.listener.closed();
                return;
            }
        }
        tracing::debug!(peer = %conn.peer, "NVMe/TCP connection");
        let c = conn.clone();
        *conn.poller.borrow_mut() = Some(reactor::register_poller("nvmf-conn", move || c.tick()));
    }

    /// Once a round: the digests computed off the core, the core's
    /// timers, input it can handle now (after a wait), pending output;
    /// close when done.
    fn tick(self: &Rc<Self>) -> Poll {
        let now = tsc::now();
        let digests = self.reap_digests(now);
        let wake = self.core.borrow_mut().tick(now);
        if let Some(at) = wake {
            reactor::wake_by(at);
        }
        if self.core.borrow().has_work(now) {
            self.process(now);
        }
        let busy = self.core.borrow().has_output() && self.flush();
        self.maybe_close();
        if busy || digests {
            Poll::Busy
        } else {
            Poll::Idle
        }
    }

    /// Hands the core the digests computed off the core, and goes on with
    /// what they let go on; returns whether any are still out.
    fn reap_digests(self: &Rc<Self>, now: u64) -> bool {
        let reaped = match self.digests.borrow_mut().as_mut() {
            Some(d) => d.reap(&mut self.core.borrow_mut()),
            None => return false,
        };
        if reaped > 0 {
            if self.core.borrow().waits_for_buffer() {
                self.process(now);
            } else {
                self.submit();
            }
        }
        self.core.borrow().digests_out() > 0
    }

    /// Lets the core handle its input, then submits what it handed out.
    fn process(self: &Rc<Self>, now: u64) {
        self.core.borrow_mut().process(now);
        self.submit();
    }

    /// Submits the core's digests to compute off the core, then its device
    /// IOs on this reactor's channel; one it refuses goes back to the core
    /// as ended.
    fn submit(self: &Rc<Self>) {
        if let Some(d) = self.digests.borrow_mut().as_mut() {
            d.submit(&mut self.core.borrow_mut());
        }
        loop {
            let mut core = self.core.borrow_mut();
            let Some(io) = core.next_io() else { break };
            let mut channel = self.channel.borrow_mut();
            if channel.is_none() {
                match core.device().map(|d| d.open_channel()) {
                    Some(Ok(ch)) => *channel = Some(ch),
                    Some(Err(e)) => {
                        tracing::warn!(peer = %self.peer, "NVMe/TCP: {e}");
                    }
                    None => {}
                }
            }
            let Some(ch) = channel.as_ref() else {
                core.complete(IoOutcome::failed(io, IoError::Device(EIO)));
                continue;
            };
            drop(core);
            let cb: Rc<dyn IoCompletion> = self.clone();
            if let Err(e) = ch.submit(io, cb) {
                drop(channel);
                self.core.borrow_mut().complete(IoOutcome::refused(e));
            }
        }
    }

    /// Writes what it can; returns whether anything was written. Buffers
    /// that went out may let a command waiting for one go on.
    fn flush(self: &Rc<Self>) -> bool {
        let flushed = {
            let mut core = self.core.borrow_mut();
            let reg = self.reg.borrow();
            let f = core.output().flush(&self.sock, reg.as_ref());
            core.flushed(&f);
            f
        };
        self.update_interest();
        if flushed.released && self.core.borrow().waits_for_buffer() {
            self.process(tsc::now());
        }
        flushed.wrote
    }

    /// Turns the socket's read interest off while the core takes no input
    /// (a host that does not read its answers, a full input), on again
    /// when it does, so a level-triggered readable socket does not keep
    /// an adaptive reactor awake meanwhile.
    fn update_interest(&self) {
        let mut core = self.core.borrow_mut();
        let reading = core.takes_input();
        core.output()
            .set_reading(reading, self.reg.borrow().as_ref());
    }

    /// Reads what the socket has into the places the core names.
    fn read(&self) {
        let mut core = self.core.borrow_mut();
        let got = match core.recv_buf() {
            None => return,
            Some(RecvBuf::Input(room)) => {
                rustix::io::read(&*self.sock, room).map_err(io::Error::from)
            }
            Some(RecvBuf::Direct { data, after }) => {
                let mut iov = [io::IoSliceMut::new(data), io::IoSliceMut::new(after)];
                rustix::io::readv(&*self.sock, &mut iov).map_err(io::Error::from)
            }
        };
        match got {
            Ok(0) => core.host_gone(),
            Ok(n) => core.received(n),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => core.host_gone(),
        }
    }

    /// Closes once the core says so: the channel goes first, then the
    /// core lets everything else go.
    fn maybe_close(&self) {
        if !self.core.borrow().should_close() {
            return;
        }
        let Some(poller) = self.poller.borrow_mut().take() else {
            return;
        };
        drop(self.channel.borrow_mut().take());
        drop(self.digests.borrow_mut().take());
        self.core.borrow_mut().close();
        self.listener.closed();
        drop(self.reg.borrow_mut().take());
        drop(poller);
    }
}

impl Drop for Connection {
    /// A connection dropped with digests out (its reactor stopping): their
    /// tasks are drained first; the buffers of any the engine still holds
    /// past the deadline are leaked, not given back to be reused under it.
    fn drop(&mut self) {
        if let Some(d) = self.digests.get_mut().take()
            && d.drain() > 0
        {
            self.core.get_mut().leak_digest_buffers();
        }
    }
}

impl IoCompletion for Connection {
    fn complete(self: Rc<Self>, mut io: IoDone) {
        let flush = {
            let mut core = self.core.borrow_mut();
            core.complete(IoOutcome::done(&mut io));
            drop(io);
            core.in_flight() == 0 || core.output().len() > FLUSH_BYTES
        };
        if self.core.borrow().waits_for_buffer() {
            self.process(tsc::now());
        } else if self.core.borrow().digests_out() > 0 {
            // A read's digest to compute off the core.
            self.submit();
        }
        if flush {
            self.flush();
        }
    }
}

impl FdHandler for Connection {
    fn on_ready(&self, ready: Readiness) {
        let Some(this) = self.me.upgrade() else {
            return;
        };
        if ready.writable {
            this.flush();
        }
        if ready.readable || ready.hangup {
            if ready.hangup && !this.core.borrow().takes_input() {
                // A host that closed its side while the queue takes no
                // input (it does not read its answers): nothing more will
                // come, and a level-triggered hangup would keep the
                // reactor awake.
                this.core.borrow_mut().host_gone();
            }
            this.read();
            this.process(tsc::now());
        }
        if this.core.borrow().has_output() {
            this.flush();
        }
        this.update_interest();
        this.maybe_close();
    }
}
