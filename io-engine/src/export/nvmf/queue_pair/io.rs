//! The NVM commands of an established I/O queue (NVMe NVM Command Set
//! 1.0): Read, Write and Compare with their data (in the capsule, by
//! R2T and H2CData, out by C2HData), Flush, Write Zeroes, Dataset
//! Management (deallocate) and Copy, each taking a slot of the queue and
//! the device IOs it needs; and their completions.
//!
//! A command's data is taken only while it is awaited, into the buffer
//! taken for it and within its length: an H2CData for a command that is
//! not waiting for data (it has all of it, or it never asked by R2T),
//! empty, out of order or beyond the R2T ends the connection with a
//! C2HTermReq; in-capsule data that does not match the command's SGL gets
//! an error status.
//!
//! Thread: the queue's reactor.

use super::super::command::Command;
use super::super::command::{io as nvm, sgl};
use super::super::completion::{Completion, Status};
use super::super::pdu::{self, Fes, Header, PduError, flags};
use super::digest::Digest;
use super::digest_jobs::{DigestJob, Purpose};
use super::io_queue::COPY_LIMITS;
use super::slot::SlotState;
use super::{Answer, Inbound, PduData, Phase, QueuePair, Slot, Wait};
use crate::bdev::{IoError, IoRequest, IoType};
use crate::export::nvmf::io_outcome::IoOutcome;
use crate::pool::IoBuf;

/// Force Unit Access, CDW12 bit 30 of a Write: the data is durable when the
/// command completes (the device writes it through its cache).
const FUA: u32 = 1 << 30;

/// The status a device IO's error answers with.
fn status_of(e: &IoError) -> Status {
    match e {
        IoError::OutOfRange { .. } => Status::LBA_OUT_OF_RANGE,
        IoError::Unaligned { .. } | IoError::Empty(_) | IoError::Buffer { .. } => {
            Status::INVALID_FIELD
        }
        IoError::Unsupported(_) => Status::INVALID_OPCODE,
        IoError::Device(_) => Status::INTERNAL_ERROR,
    }
}

impl QueuePair {
    /// The established I/O queue's geometry: block size, blocks, read-only.
    fn geometry(&self) -> Option<(u64, u64, bool)> {
        match &self.phase {
            Phase::Io(q) => Some((q.block_size, q.blocks, q.read_only)),
            _ => None,
        }
    }

    /// An NVM command on an I/O queue. Errors end the connection (data
    /// that cannot be placed); a command refused gets its status.
    pub(super) fn io_command(&mut self, cmd: &Command, data: PduData) -> Result<Answer, PduError> {
        let cid = cmd.cid();
        let fail = |s: Status| Ok(Answer::status(cid, s));
        let Some((bs, blocks, read_only)) = self.geometry() else {
            return fail(Status::COMMAND_SEQUENCE_ERROR);
        };
        if cmd.nsid() != 1 && cmd.opcode() != nvm::FLUSH {
            return fail(Status::INVALID_NAMESPACE);
        }
        let range = |cmd: &Command| {
            let (slba, nlb) = (cmd.slba(), cmd.nlb());
            match slba.checked_add(nlb) {
                Some(end) if end <= blocks => Ok((slba * bs, nlb * bs)),
                _ => Err(Status::LBA_OUT_OF_RANGE),
            }
        };
        let op = cmd.opcode();
        match op {
            nvm::READ | nvm::WRITE | nvm::COMPARE => {
                let (offset, len) = match range(cmd) {
                    Ok(r) => r,
                    Err(s) => return fail(s),
                };
                if len as usize > self.target.limits.max_transfer {
                    return fail(Status::INVALID_FIELD);
                }
                if op == nvm::WRITE && read_only {
                    return fail(Status::WRITE_PROTECTED);
                }
                let (_, sgl_len, sgl_type) = cmd.sgl();
                if sgl_len as u64 != len {
                    return fail(Status::SGL_LENGTH_INVALID);
                }
                // Reads come by C2HData, with no data in their capsule;
                // Writes and Compares bring theirs in the capsule (an
                // in-capsule SGL, all of it) or by R2T (a transport SGL,
                // none in the capsule).
                let in_capsule = sgl_type == sgl::IN_CAPSULE;
                match (op, sgl_type) {
                    (nvm::READ, sgl::TRANSPORT) if data.len == 0 => {}
                    (nvm::READ, _) => return fail(Status::SGL_TYPE_INVALID),
                    (_, sgl::TRANSPORT) if data.len == 0 => {}
                    (_, sgl::IN_CAPSULE) if data.len == len as usize => {}
                    (_, sgl::TRANSPORT | sgl::IN_CAPSULE) => {
                        return fail(Status::SGL_LENGTH_INVALID);
                    }
                    _ => return fail(Status::SGL_TYPE_INVALID),
                }
                self.data_command(cmd, offset, len as usize, in_capsule, data)
            }
            nvm::FLUSH => {
                Ok(self.submit_all(cid, op, vec![IoRequest::no_data(IoType::Flush, 0, 0)]))
            }
            nvm::WRITE_ZEROES => {
                if read_only {
                    return fail(Status::WRITE_PROTECTED);
                }
                match range(cmd) {
                    Ok((o, l)) => Ok(self.submit_all(
                        cid,
                        op,
                        vec![IoRequest::no_data(IoType::WriteZeroes, o, l)],
                    )),
                    Err(s) => fail(s),
                }
            }
            nvm::DSM => {
                let deallocate = cmd.cdw(11) & 4 != 0;
                if !deallocate {
                    return fail(Status::SUCCESS);
                }
                if read_only {
                    return fail(Status::WRITE_PROTECTED);
                }
                Ok(self.deallocate(cmd, data.here, (bs, blocks)))
            }
            nvm::COPY => {
                if read_only {
                    return fail(Status::WRITE_PROTECTED);
                }
                Ok(self.copy(cmd, data.here, (bs, blocks)))
            }
            _ => fail(Status::INVALID_OPCODE),
        }
    }

    /// A Read, Write or Compare of `len` bytes at `offset`: takes a slot
    /// and its buffers (a Compare two: the host's data and the device's),
    /// then reads, or takes the data in the capsule, or asks for it by R2T.
    /// With no buffer free it waits (handled again when one comes back).
    fn data_command(
        &mut self,
        cmd: &Command,
        offset: u64,
        len: usize,
        in_capsule: bool,
        data: PduData,
    ) -> Result<Answer, PduError> {
        let (cid, op) = (cmd.cid(), cmd.opcode());
        let fua = op == nvm::WRITE && cmd.cdw(12) & FUA != 0;
        let Some(&tag) = self.free.last() else {
            // More commands than the queue holds.
            return Ok(Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR));
        };
        let Phase::Io(q) = &self.phase else {
            return Ok(Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR));
        };
        // A Compare takes two (the host's data, the device's); none free
        // means waiting for one to come back, unless none is out to come
        // back (no memory could be mapped): then the command fails.
        let (first, second) = match op {
            nvm::COMPARE => (q.bufs.take(len), q.bufs.take(len)),
            _ => (q.bufs.take(len), Ok(None)),
        };
        let (buf, spare) = match (first, second) {
            (Ok(Some(a)), Ok(b)) if op != nvm::COMPARE || b.is_some() => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(peer = %self.peer, "NVMe/TCP: {e}");
                return Ok(Answer::status(cid, Status::INTERNAL_ERROR));
            }
            _ => {
                self.wait = Wait::Buffer;
                return Ok(Answer::Wait);
            }
        };
        self.wait = Wait::Nothing;
        self.free.pop();
        if op == nvm::READ {
            self.put_slot(tag, Slot::executing(cid, op, len, offset));
            self.submit(tag, IoRequest::read(buf, offset, len as u64));
            return Ok(Answer::Later);
        }
        self.put_slot(
            tag,
            Slot {
                cid,
                op,
                state: SlotState::AwaitingData { r2t: !in_capsule },
                buf: Some(buf),
                spare,
                len,
                got: 0,
                offset,
                pending: 0,
                digesting: 0,
                fua,
                status: Status::SUCCESS,
            },
        );
        if in_capsule {
            self.receive(tag, 0, data, 0)?;
        } else {
            // The data comes in H2CData PDUs: ask for all of it.
            pdu::put_r2t(self.output.bytes(), cid, tag, 0, len as u32, self.digests);
            self.awaiting += 1;
        }
        Ok(Answer::Later)
    }

    fn put_slot(&mut self, tag: u16, slot: Slot) {
        if let Some(s) = self.slots.get_mut(tag as usize) {
            *s = Some(slot);
        }
    }

    fn slot_mut(&mut self, tag: u16) -> Option<&mut Slot> {
        self.slots.get_mut(tag as usize).and_then(Option::as_mut)
    }

    /// Dataset Management with Deallocate: one unmap per range, the
    /// command answered when the last completes.
    fn deallocate(&mut self, cmd: &Command, data: &[u8], (bs, blocks): (u64, u64)) -> Answer {
        let cid = cmd.cid();
        let nr = (cmd.cdw(10) & 0xFF) as usize + 1;
        let Some(list) = data.get(..nr * 16) else {
            return Answer::status(cid, Status::SGL_LENGTH_INVALID);
        };
        let mut ranges = Vec::with_capacity(nr);
        for r in list.chunks_exact(16) {
            let Some(r) = r.first_chunk::<16>() else {
                break;
            };
            let nlb = u32::from_le_bytes([r[4], r[5], r[6], r[7]]) as u64;
            let slba = u64::from_le_bytes([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
            if slba.checked_add(nlb).is_none_or(|e| e > blocks) {
                return Answer::status(cid, Status::LBA_OUT_OF_RANGE);
            }
            if nlb > 0 {
                ranges.push(IoRequest::no_data(IoType::Unmap, slba * bs, nlb * bs));
            }
        }
        if ranges.is_empty() {
            return Answer::status(cid, Status::SUCCESS);
        }
        self.submit_all(cid, nvm::DSM, ranges)
    }

    /// Copy (NVMe 2.0 Simple Copy, source range format 0): one device copy
    /// per source range, to consecutive blocks from SDLBA, the command
    /// answered when the last completes.
    fn copy(&mut self, cmd: &Command, data: &[u8], (bs, blocks): (u64, u64)) -> Answer {
        let cid = cmd.cid();
        let nr = (cmd.cdw(12) & 0xFF) as usize + 1;
        let format = (cmd.cdw(12) >> 8) & 0xF;
        if format != 0 {
            return Answer::status(cid, Status::INVALID_FIELD);
        }
        if nr > COPY_LIMITS.ranges as usize {
            return Answer::status(cid, Status::COMMAND_SIZE_LIMIT_EXCEEDED);
        }
        let Some(list) = data.get(..nr * 32) else {
            return Answer::status(cid, Status::SGL_LENGTH_INVALID);
        };
        let mut dst = cmd.slba();
        let mut total = 0u64;
        let mut copies = Vec::with_capacity(nr);
        for r in list.chunks_exact(32) {
            let Some(r) = r.first_chunk::<32>() else {
                break;
            };
            let slba = u64::from_le_bytes([r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]]);
            let nlb = u16::from_le_bytes([r[16], r[17]]) as u64 + 1;
            total += nlb;
            if nlb > COPY_LIMITS.range_blocks as u64 || total > COPY_LIMITS.command_blocks as u64 {
                return Answer::status(cid, Status::COMMAND_SIZE_LIMIT_EXCEEDED);
            }
            let in_range = |lba: u64| lba.checked_add(nlb).is_some_and(|e| e <= blocks);
            if !in_range(slba) || !in_range(dst) {
                return Answer::status(cid, Status::LBA_OUT_OF_RANGE);
            }
            if slba < dst + nlb && dst < slba + nlb {
                // A range that overlaps its destination has no defined
                // result.
                return Answer::status(cid, Status::INVALID_FIELD);
            }
            copies.push(IoRequest::copy(slba * bs, dst * bs, nlb * bs));
            dst += nlb;
        }
        self.submit_all(cid, nvm::COPY, copies)
    }

    /// Takes a slot for command `cid` (`op`) and submits `ios` for it: the
    /// command is answered when the last completes (Flush and Write
    /// Zeroes: one IO; Dataset Management: an unmap per range; Copy: a
    /// copy per range).
    fn submit_all(&mut self, cid: u16, op: u8, ios: Vec<IoRequest>) -> Answer {
        let Some(tag) = self.free.pop() else {
            return Answer::status(cid, Status::COMMAND_SEQUENCE_ERROR);
        };
        self.put_slot(tag, Slot::executing(cid, op, 0, 0));
        for io in ios {
            self.submit(tag, io);
        }
        Answer::Later
    }

    /// H2CData for a Write or Compare the target sent an R2T for (its data
    /// here whole, or only its header and part of its data).
    pub(super) fn h2c_data(
        &mut self,
        hdr: &Header,
        b: &[u8],
        data: PduData,
    ) -> Result<(), PduError> {
        let h = b
            .first_chunk::<{ pdu::DATA_HLEN }>()
            .ok_or_else(|| PduError::field(2, "H2CData shorter than its header"))?;
        let cccid = u16::from_le_bytes([h[8], h[9]]);
        let ttag = u16::from_le_bytes([h[10], h[11]]);
        let datao = u32::from_le_bytes([h[12], h[13], h[14], h[15]]) as usize;
        let datal = u32::from_le_bytes([h[16], h[17], h[18], h[19]]) as usize;
        let slot = self
            .slots
            .get(ttag as usize)
            .and_then(Option::as_ref)
            .filter(|s| s.cid == cccid && s.state == SlotState::AwaitingData { r2t: true })
            .ok_or_else(|| {
                PduError::field(
                    10,
                    format!("H2CData for transfer tag {ttag}, which awaits no data"),
                )
            })?;
        if datal == 0 || datal != data.len {
            return Err(PduError::field(
                16,
                format!("H2CData DATAL {datal} with {} bytes of data", data.len),
            ));
        }
        if datao != slot.got {
            return Err(PduError {
                fes: Fes::DataTransferOutOfRange,
                fei: datao as u32,
                why: format!("H2CData offset {datao}, expected {}", slot.got),
            });
        }
        if datao.checked_add(datal).is_none_or(|end| end > slot.len) {
            return Err(PduError {
                fes: Fes::DataTransferLimitExceeded,
                fei: datao.saturating_add(datal) as u32,
                why: format!("H2CData beyond the R2T's {} bytes", slot.len),
            });
        }
        self.receive(ttag, datao, data, hdr.flags)
    }

    /// Puts the part of a PDU's data that is here into the buffer of slot
    /// `tag` from offset `at` (with its CRC-32C computed in the same pass
    /// when data digests are on and checked inline); the rest, if any, is
    /// then read straight into the buffer. A PDU whose digest is checked
    /// off the core ([`DigestJobs::takes`](super::digest_jobs::DigestJobs))
    /// is only copied: its digest is computed over all of its data once
    /// that and the digest are in.
    fn receive(&mut self, tag: u16, at: usize, data: PduData, flags: u8) -> Result<(), PduError> {
        let digests = self.digests.data;
        let offload = digests && self.digest_jobs.takes(data.len);
        let out_of_range = || {
            PduError::new(
                Fes::DataTransferOutOfRange,
                format!(
                    "data at {at} of {} bytes beyond its command's buffer",
                    data.len
                ),
            )
        };
        let slot = self.slot_mut(tag).ok_or_else(out_of_range)?;
        let n = data.here.len();
        let end = at
            .checked_add(data.len)
            .filter(|&e| e <= slot.len)
            .ok_or_else(out_of_range)?;
        let buf = slot.buf.as_mut().ok_or_else(out_of_range)?;
        let dst = buf
            .as_mut_slice()
            .get_mut(at..at + n)
            .ok_or_else(out_of_range)?;
        let crc = if digests && !offload {
            pdu::copy_crc32c(dst, data.here, 0).ok_or_else(out_of_range)?
        } else {
            dst.copy_from_slice(data.here);
            0
        };
        // All of the data is here, and its digest when there is one: done.
        // (A digest still on its way is read after the data, as when the
        // data comes straight to the buffer.)
        if data.complete() && (!digests || data.digest.is_some()) {
            let digest = match data.digest {
                Some(want) if offload => Digest::Check(at..end, want),
                Some(want) if want != crc => Digest::Bad,
                _ => Digest::Good,
            };
            self.data_received(tag, n, digest, flags);
        } else {
            self.inbound = Some(Inbound {
                tag,
                start: at,
                direct: at + n,
                at: at + n,
                end,
                crc,
                offload,
                flags,
            });
        }
        Ok(())
    }

    /// `n` more bytes of the data of the command in slot `tag` are in its
    /// buffer, their digest as `digest` says: once all are, and every
    /// digest of them checked, the command goes on (or is answered
    /// Transient Transport Error when one did not match).
    pub(super) fn data_received(&mut self, tag: u16, n: usize, digest: Digest, pdu_flags: u8) {
        let Some(slot) = self.slot_mut(tag) else {
            return;
        };
        if !matches!(slot.state, SlotState::AwaitingData { .. }) {
            return;
        }
        slot.got += n;
        match digest {
            Digest::Good => {}
            Digest::Bad => slot.status = Status::TRANSIENT_TRANSPORT_ERROR,
            Digest::Check(range, want) => {
                slot.digesting += 1;
                self.digest_jobs.push(DigestJob {
                    tag,
                    range,
                    seed: 0,
                    purpose: Purpose::Check {
                        want,
                        flags: pdu_flags,
                    },
                });
            }
        }
        self.data_checked(tag, pdu_flags);
    }

    /// Once all of the data of the command in slot `tag` is in its buffer
    /// and checked: nothing more is taken for it, and it goes on.
    fn data_checked(&mut self, tag: u16, pdu_flags: u8) {
        let Some(slot) = self.slot_mut(tag) else {
            return;
        };
        let SlotState::AwaitingData { r2t } = slot.state else {
            return;
        };
        if slot.got < slot.len || slot.digesting > 0 {
            return;
        }
        slot.state = SlotState::Executing;
        let status = slot.status;
        let last = pdu_flags & flags::LAST_PDU != 0;
        if r2t {
            self.awaiting = self.awaiting.saturating_sub(1);
            if !last {
                tracing::debug!(peer = %self.peer, "NVMe/TCP: last H2CData without LAST_PDU");
            }
        }
        if status.is_success() {
            self.data_in(tag);
        } else {
            self.finish(tag, status);
        }
    }

    /// The next digest to compute off the core: its number, its data (in
    /// its command's IO buffer) and the CRC-32C to continue from. The data
    /// stays where it is, unwritten and unmoved, until
    /// [`digest_done`](Self::digest_done) is called with that number, and
    /// the queue pair does not close before (it holds its slot's buffer);
    /// each number must be done exactly once.
    pub fn next_digest(&mut self) -> Option<(u32, &[u8], u32)> {
        let (id, job) = self.digest_jobs.next()?;
        let (tag, range, seed) = (job.tag, job.range.clone(), job.seed);
        let data = self
            .slots
            .get(tag as usize)
            .and_then(Option::as_ref)
            .and_then(|s| s.buf.as_ref())
            .and_then(|b| b.as_slice().get(range))
            .unwrap_or_default();
        Some((id, data, seed))
    }

    /// Digest `id` handed out by [`next_digest`](Self::next_digest) is
    /// `crc`, or (`None`: the engine failed it) is computed here: a
    /// received PDU's is checked, a read's data goes out with it.
    pub fn digest_done(&mut self, id: u32, crc: Option<u32>) {
        let Some(job) = self.digest_jobs.take(id) else {
            return;
        };
        let tag = job.tag;
        let data = self
            .slots
            .get(tag as usize)
            .and_then(Option::as_ref)
            .and_then(|s| s.buf.as_ref())
            .and_then(|b| b.as_slice().get(job.range.clone()));
        let crc = match (crc, data) {
            (Some(c), _) => Some(c),
            (None, Some(d)) => Some(pdu::crc32c(job.seed, d)),
            (None, None) => None,
        };
        let Some(slot) = self.slot_mut(tag) else {
            return;
        };
        slot.digesting = slot.digesting.saturating_sub(1);
        match job.purpose {
            Purpose::Check { want, flags } => {
                if crc != Some(want) {
                    slot.status = Status::TRANSIENT_TRANSPORT_ERROR;
                }
                self.data_checked(tag, flags);
            }
            Purpose::Send { len } => {
                let (cid, buf) = (slot.cid, slot.buf.take());
                match (buf, crc) {
                    // Nothing more goes out after a C2HTermReq, or to a
                    // host that has gone.
                    _ if self.eof || self.terminated => self.release(tag),
                    (Some(buf), Some(crc)) => self.put_read(tag, cid, buf, len, Some(crc)),
                    _ => self.finish(tag, Status::INTERNAL_ERROR),
                }
            }
        }
    }

    /// Leaks the IO buffers of the commands with digests out (their
    /// engine did not finish them, and may still read them): never given
    /// back to the pool to be reused under it.
    pub fn leak_digest_buffers(&mut self) {
        for slot in self.slots.iter_mut().flatten() {
            if slot.digesting > 0
                && let Some(buf) = slot.buf.take()
            {
                std::mem::forget(buf);
            }
        }
    }

    /// Digests handed out (or to hand out) and not done.
    #[inline]
    pub fn digests_out(&self) -> u32 {
        self.digest_jobs.out()
    }

    /// Hands out the digests of data PDUs of `min` to `max` bytes (the
    /// transport computes them on an offload engine); others are computed
    /// inline.
    pub fn offload_digests(&mut self, min: usize, max: usize) {
        self.digest_jobs.min = min;
        self.digest_jobs.max = max;
    }

    /// The host's data of a Write or Compare in slot `tag` is all in its
    /// buffer: a Write goes to the device; a Compare reads the device's
    /// data into its second buffer, compared when that completes.
    fn data_in(&mut self, tag: u16) {
        let Some(slot) = self.slot_mut(tag) else {
            return;
        };
        let (offset, len, fua) = (slot.offset, slot.len as u64, slot.fua);
        let io = if slot.op == nvm::COMPARE {
            slot.spare.take().map(|b| IoRequest::read(b, offset, len))
        } else {
            slot.buf
                .take()
                .map(|b| IoRequest::write(b, offset, len).fua(fua))
        };
        match io {
            Some(io) => self.submit(tag, io),
            None => self.finish(tag, Status::INTERNAL_ERROR),
        }
    }

    /// Hands `io` out for submission, for the command in slot `tag`.
    fn submit(&mut self, tag: u16, mut io: IoRequest) {
        io.tag = tag as u64;
        if let Some(s) = self.slot_mut(tag) {
            s.pending += 1;
        }
        self.in_flight += 1;
        self.ios.push_back(io);
    }

    /// Answers the command in slot `tag` with `status` and frees the slot.
    fn finish(&mut self, tag: u16, status: Status) {
        let Some(slot) = self.slots.get_mut(tag as usize).and_then(Option::take) else {
            return;
        };
        self.free.push(tag);
        let mut c = Completion::new(slot.cid, status);
        c.sqhd = self.sqhd;
        let cqe = c.to_bytes(self.qid);
        pdu::put_capsule_resp(self.output.bytes(), &cqe, self.digests);
        if !status.is_success() {
            self.target.counters.error(status);
        } else if slot.op == nvm::WRITE {
            self.target.counters.bytes(0, slot.len as u64);
        }
    }

    /// A device IO handed out by [`next_io`](Self::next_io) ended (or was
    /// refused at submission). Once a command's last IO has, it is
    /// answered: a read's data goes out as the IO buffer itself.
    pub fn complete(&mut self, done: IoOutcome) {
        self.in_flight = self.in_flight.saturating_sub(1);
        let tag = done.tag as u16;
        let status = match done.status {
            Ok(()) => Status::SUCCESS,
            Err(e) => status_of(&e),
        };
        let Some(slot) = self.slot_mut(tag) else {
            return;
        };
        slot.pending = slot.pending.saturating_sub(1);
        if !status.is_success() && slot.status.is_success() {
            slot.status = status;
        }
        let len = (done.len as usize).min(slot.len);
        if slot.op == nvm::COMPARE && slot.status.is_success() {
            let device = done.buf.as_ref().and_then(|b| b.as_slice().get(..len));
            let host = slot.buf.as_ref().and_then(|b| b.as_slice().get(..len));
            let same = match (device, host) {
                (_, Some(h)) if done.zeroes => h.iter().all(|&x| x == 0),
                (Some(d), Some(h)) => d == h,
                _ => false,
            };
            if !same {
                slot.status = Status::COMPARE_FAILURE;
            }
        }
        if slot.pending != 0 {
            return;
        }
        let (cid, op, status) = (slot.cid, slot.op, slot.status);
        // Nothing more goes out after a C2HTermReq, or to a host that has
        // gone.
        if self.eof || self.terminated {
            self.release(tag);
            return;
        }
        match (op, status.is_success(), done.buf) {
            (nvm::READ, true, Some(buf)) => self.send_read(tag, cid, buf, len, done.zeroes),
            // A read that brought no buffer back has no data to send.
            (nvm::READ, true, None) => self.finish(tag, Status::INTERNAL_ERROR),
            _ => self.finish(tag, status),
        }
    }

    /// A successful read's data, to the host as its IO buffer after a
    /// C2HData header, with a response capsule unless the host disabled
    /// SQ flow control (the C2HData then says SUCCESS and is the answer).
    /// With data digests on, a large read's digest is computed off the
    /// core first (the buffer waits in its slot meanwhile).
    fn send_read(&mut self, tag: u16, cid: u16, mut buf: IoBuf, len: usize, zeroes: bool) {
        let Some(data) = buf.as_mut_slice().get_mut(..len) else {
            return self.finish(tag, Status::INTERNAL_ERROR);
        };
        if zeroes {
            data.fill(0);
        }
        if self.digests.data && self.digest_jobs.takes(len) {
            if let Some(slot) = self.slot_mut(tag) {
                slot.buf = Some(buf);
                slot.digesting += 1;
                self.digest_jobs.push(DigestJob {
                    tag,
                    range: 0..len,
                    seed: 0,
                    purpose: Purpose::Send { len },
                });
            }
            return;
        }
        let crc = self.digests.data.then(|| pdu::crc32c(0, data));
        self.put_read(tag, cid, buf, len, crc);
    }

    /// Sends a read's data (`len` bytes of `buf`, with its digest `crc`
    /// when data digests are on) and answers the command.
    fn put_read(&mut self, tag: u16, cid: u16, buf: IoBuf, len: usize, crc: Option<u32>) {
        self.target.counters.bytes(len as u64, 0);
        let end = if self.sqhd_off {
            flags::LAST_PDU | flags::SUCCESS
        } else {
            flags::LAST_PDU
        };
        let (digests, align) = (self.digests, self.align);
        pdu::put_c2h_data(self.output.bytes(), cid, 0, len as u32, end, digests, align);
        self.output.push_data(buf, len);
        if let Some(crc) = crc {
            self.output.bytes().extend_from_slice(&crc.to_le_bytes());
        }
        if self.sqhd_off {
            self.release(tag);
        } else {
            self.finish(tag, Status::SUCCESS);
        }
    }

    /// Frees slot `tag` without an answer.
    fn release(&mut self, tag: u16) {
        if let Some(s) = self.slots.get_mut(tag as usize) {
            *s = None;
        }
        self.free.push(tag);
    }
}
