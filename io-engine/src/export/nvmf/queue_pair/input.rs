//! A queue pair's input: where the host's bytes go (the input buffer, or
//! a command's IO buffer for its data), and its framing: each PDU's common
//! header checked against its type, the digests and the queue's limits,
//! then handled where it lies in the input (no PDU is copied), by type:
//! ICReq, H2CTermReq, command capsules (to the fabrics, admin and I/O
//! command handlers), H2CData.
//!
//! Thread: the queue pair's reactor.

use super::super::command::{Command, admin, io as nvm};
use super::super::completion::{Completion, Status};
use super::super::pdu::{self, DataAlignment, Digests, Fes, Header, PduError, kind};
use super::super::recv_buf::RecvBuf;
use super::digest::Digest;
use super::{AFTER_DATA, Answer, PduData, Phase, QueuePair, READ_CHUNK, Wait};
use crate::export::nvmf::peer_event::PeerEvent;

/// What handling a PDU gave.
pub(super) enum Handled {
    /// Taken (its data, if it is still arriving, goes where `inbound` or
    /// `skip` say).
    Done,
    /// Not taken yet: handled again later (it waits).
    Wait,
}

impl QueuePair {
    /// Where the next bytes from the host go, or `None` while the queue
    /// takes none: the host is gone or the queue terminated, too much
    /// output waits, or the input is full.
    pub fn recv_buf(&mut self) -> Option<RecvBuf<'_>> {
        if !self.takes_input() {
            return None;
        }
        if let Some(inb) = self.inbound {
            // The rest of a command's data straight into its buffer, what
            // follows it into the input.
            self.make_room(AFTER_DATA);
            let slot = self.slots.get_mut(inb.tag as usize)?.as_mut()?;
            let data = slot.buf.as_mut()?.as_mut_slice().get_mut(inb.at..inb.end)?;
            let after = self.input.get_mut(self.end..)?;
            let n = after.len().min(AFTER_DATA);
            let after = after.split_at_mut_checked(n)?.0;
            return Some(RecvBuf::Direct { data, after });
        }
        let want = self.read_size();
        self.make_room(want);
        let room = self.input.get_mut(self.end..)?;
        let n = room.len().min(want);
        let room = room.split_at_mut_checked(n)?.0;
        if room.is_empty() {
            return None;
        }
        Some(RecvBuf::Input(room))
    }

    /// Whether the queue takes input now: the host is there, the queue
    /// was not terminated, not too much output waits, and the input has
    /// room.
    pub fn takes_input(&self) -> bool {
        !self.eof
            && !self.terminated
            && self.output.len() <= super::OUTPUT_CAP
            && (self.inbound.is_some() || self.end - self.start < super::INPUT_BYTES)
    }

    /// `n` bytes came into the place [`recv_buf`](Self::recv_buf) gave.
    /// A read that filled the input to its end doubles it (up to
    /// [`INPUT_BYTES`](super::INPUT_BYTES)): the host sends faster than
    /// one read of that size takes, and fewer, larger reads cost less.
    pub fn received(&mut self, n: usize) {
        let mut n = n;
        if let Some(inb) = self.inbound.as_mut() {
            let direct = n.min(inb.end - inb.at);
            inb.at += direct;
            n -= direct;
        }
        let len = self.input.len();
        self.end = (self.end + n).min(len);
        if n > 0 && self.end == len && len < super::INPUT_BYTES {
            self.input.resize((2 * len).min(super::INPUT_BYTES), 0);
        }
    }

    /// Makes room behind the bytes not handled for a read of up to `want`
    /// bytes: they move to the front of the input when fewer than `want`
    /// bytes are left behind them, and the input doubles (up to
    /// [`INPUT_BYTES`](super::INPUT_BYTES)) when it is full (a PDU longer
    /// than it so far), so it grows only as the host fills it.
    fn make_room(&mut self, want: usize) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        if self.input.len() - self.end < want && self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let len = self.input.len();
        if self.end == len && len < super::INPUT_BYTES {
            self.input.resize((2 * len).min(super::INPUT_BYTES), 0);
        }
    }

    /// How much to read into the input: a large chunk, unless Writes'
    /// data is awaited after R2Ts; then up to the end of the next PDU's
    /// header (an H2CData header when its common header is not here yet),
    /// so that its data is read straight into its buffer.
    fn read_size(&self) -> usize {
        let b = self.input.get(self.start..self.end).unwrap_or_default();
        if self.awaiting == 0 || self.skip > 0 {
            return READ_CHUNK;
        }
        let Some(hdr) = Header::parse(b) else {
            let hdgst = if self.digests.header { 4 } else { 0 };
            return pdu::DATA_HLEN + hdgst - b.len();
        };
        let upto = if hdr.pdo != 0 {
            hdr.pdo as usize
        } else {
            hdr.plen as usize
        };
        if upto > b.len() {
            (upto - b.len()).min(READ_CHUNK)
        } else {
            // The header is here and its data was not taken into a buffer
            // (none free): the data comes into the input.
            READ_CHUNK
        }
    }

    /// The most data a PDU may carry on this queue.
    fn pdu_limits(&self) -> pdu::PduLimits {
        self.target.limits.pdu_limits(self.phase.is_io())
    }

    /// Handles every whole PDU received, and the header of a Write's data
    /// PDU whose data is still on its way (the data then goes straight to
    /// the command's IO buffer), at `now` (TSC).
    pub fn process(&mut self, now: u64) {
        self.now = now;
        if let Wait::Dh(at) = self.wait
            && now >= at
        {
            self.wait = Wait::Nothing;
        }
        // The input is taken out while its PDUs are handled where they lie
        // (handling never reads the input otherwise), so no PDU is copied.
        let input = std::mem::take(&mut self.input);
        self.process_in(&input);
        self.input = input;
    }

    fn process_in(&mut self, input: &[u8]) {
        loop {
            if self.stopped(self.now) {
                break;
            }
            if self.skip > 0 {
                let n = self.skip.min(self.end - self.start);
                self.start += n;
                self.skip -= n;
                if self.skip > 0 {
                    break;
                }
            }
            if self.inbound.is_some() {
                let after = input.get(self.start..self.end).unwrap_or_default();
                if !self.inbound_done(after) {
                    break;
                }
                continue;
            }
            let b = input.get(self.start..self.end).unwrap_or_default();
            let Some(hdr) = Header::parse(b) else { break };
            let data_len = match hdr.check(self.digests, self.pdu_limits()) {
                Ok(n) => n,
                Err(e) => {
                    self.terminate(e, b.get(..hdr.hlen as usize).unwrap_or(b));
                    break;
                }
            };
            let plen = hdr.plen as usize;
            if b.len() < plen && !self.takes_data_directly(&hdr, b) {
                break;
            }
            let pdu_bytes = b.get(..plen).unwrap_or(b);
            let header = pdu_bytes.get(..hdr.hlen as usize).unwrap_or(pdu_bytes);
            if let Err(e) = check_header_digest(self.digests, &hdr, pdu_bytes) {
                self.terminate(e, header);
                break;
            }
            let data = PduData::of(self.digests, &hdr, pdu_bytes, data_len);
            match self.handle(&hdr, pdu_bytes, data) {
                Ok(Handled::Done) => {
                    // Data taken straight into a buffer: the input goes on
                    // after the part of it that was here (its digest, when
                    // it is not all here yet, is read there).
                    let used = match self.inbound {
                        Some(_) => (hdr.pdo as usize + data.here.len()).min(pdu_bytes.len()),
                        None => pdu_bytes.len(),
                    };
                    self.start += used;
                    // Handled without its data (refused): the rest of the
                    // PDU is dropped as it comes.
                    if used < plen && self.inbound.is_none() {
                        self.skip = plen - used;
                    }
                }
                // Waits: the same PDU is handled again.
                Ok(Handled::Wait) => break,
                Err(e) => {
                    self.terminate(e, header);
                    break;
                }
            }
        }
        if self.start == self.end && self.inbound.is_none() {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Whether the PDU at the front of the input (`b`, not all of it here)
    /// is handled now, its data going straight to an IO buffer: an
    /// H2CData, or a Write's or Compare's capsule on an established I/O
    /// queue, whose header (and header digest) is here.
    fn takes_data_directly(&self, hdr: &Header, b: &[u8]) -> bool {
        if hdr.pdo == 0 || b.len() < hdr.pdo as usize || !matches!(self.phase, Phase::Io(_)) {
            return false;
        }
        match hdr.kind {
            kind::H2C_DATA => true,
            kind::CAPSULE_CMD => matches!(
                b.get(pdu::COMMON_HEADER),
                Some(&(nvm::WRITE | nvm::COMPARE))
            ),
            _ => false,
        }
    }

    /// The data being received straight into a buffer: once all of it
    /// and its digest (if any) are in, it counts as received. Returns
    /// whether it was (`b`: the input after it).
    fn inbound_done(&mut self, b: &[u8]) -> bool {
        let Some(inb) = self.inbound else {
            return true;
        };
        if inb.at < inb.end {
            return false;
        }
        let mut digest = Digest::Good;
        if self.digests.data {
            let Some(want) = b.first_chunk::<4>() else {
                return false;
            };
            let want = u32::from_le_bytes(*want);
            digest = if inb.offload {
                Digest::Check(inb.start..inb.end, want)
            } else {
                let direct = self
                    .slots
                    .get(inb.tag as usize)
                    .and_then(Option::as_ref)
                    .and_then(|s| s.buf.as_ref())
                    .and_then(|buf| buf.as_slice().get(inb.direct..inb.end));
                if direct.is_some_and(|d| pdu::crc32c(inb.crc, d) == want) {
                    Digest::Good
                } else {
                    Digest::Bad
                }
            };
            self.start += 4;
        }
        self.inbound = None;
        self.data_received(inb.tag, inb.end - inb.start, digest, inb.flags);
        true
    }

    /// Sends a C2HTermReq for `e` quoting `quoted` (the offending header),
    /// and stops reading: the queue closes once it is sent.
    pub(super) fn terminate(&mut self, e: PduError, quoted: &[u8]) {
        if let Some(n) = self.target.logs.note(PeerEvent::Terminated) {
            tracing::info!(peer = %self.peer, unlogged = n, "NVMe/TCP connection terminated: {e}");
        }
        self.target.counters.pdu_error();
        pdu::put_c2h_term_req(self.output.bytes(), &e, quoted);
        self.terminate_after_answer();
    }

    /// Handles one PDU (whole, or the header of one whose data goes
    /// straight to a buffer).
    fn handle(&mut self, hdr: &Header, b: &[u8], data: PduData) -> Result<Handled, PduError> {
        match (hdr.kind, &self.phase) {
            (kind::IC_REQ, Phase::Init) => {
                self.ic_req(b)?;
                Ok(Handled::Done)
            }
            (kind::IC_REQ, _) => Err(PduError::new(Fes::PduSequence, "a second ICReq")),
            (_, Phase::Init) => Err(PduError::new(Fes::PduSequence, "a PDU before ICReq")),
            (kind::H2C_TERM_REQ, _) => {
                let fes = b
                    .first_chunk::<10>()
                    .map_or(0, |h| u16::from_le_bytes([h[8], h[9]]));
                if let Some(n) = self.target.logs.note(PeerEvent::HostTerminated) {
                    tracing::info!(peer = %self.peer, fes, unlogged = n, "NVMe/TCP host terminated the connection");
                }
                self.eof = true;
                Ok(Handled::Done)
            }
            (kind::CAPSULE_CMD, _) => self.capsule_pdu(b, data),
            (kind::H2C_DATA, Phase::Io(_)) => {
                self.h2c_data(hdr, b, data)?;
                Ok(Handled::Done)
            }
            (k, _) => Err(PduError::new(
                Fes::PduSequence,
                format!("PDU type {k:#x} here"),
            )),
        }
    }

    /// ICReq: the digests, the host's data alignment; answered with the
    /// ICResp.
    fn ic_req(&mut self, b: &[u8]) -> Result<(), PduError> {
        let ic = b
            .first_chunk::<{ pdu::IC_HLEN }>()
            .ok_or_else(|| PduError::field(4, "ICReq shorter than 128 bytes"))?;
        let pfv = u16::from_le_bytes([ic[8], ic[9]]);
        if pfv != 0 {
            return Err(PduError {
                fes: Fes::InvalidHeaderField,
                fei: 8,
                why: format!("ICReq PFV {pfv}"),
            });
        }
        self.align = DataAlignment::from_hpda(ic[10])
            .ok_or_else(|| PduError::field(10, format!("ICReq HPDA {} (at most 31)", ic[10])))?;
        self.digests = Digests {
            header: ic[11] & 1 != 0,
            data: ic[11] & 2 != 0,
        };
        pdu::put_ic_resp(
            self.output.bytes(),
            self.digests,
            self.target.limits.max_h2c_data(),
        );
        self.phase = Phase::Connecting;
        if let Some(s) = &self.connecting {
            s.progressed();
        }
        Ok(())
    }

    /// A command capsule: checked (its data digest, the queue's
    /// authentication), then handled by its queue and command type.
    fn capsule_pdu(&mut self, b: &[u8], data: PduData) -> Result<Handled, PduError> {
        let cmd = b
            .get(pdu::COMMON_HEADER..)
            .and_then(Command::from_slice)
            .ok_or_else(|| PduError::field(2, "a capsule shorter than its command"))?;
        let admin_queue = !self.phase.is_io();
        let opcode = cmd.opcode();
        // A Write's or Compare's data digest is checked as the data is
        // copied to its buffer; other data is here whole.
        let to_buffer =
            matches!(self.phase, Phase::Io(_)) && matches!(opcode, nvm::WRITE | nvm::COMPARE);
        if !to_buffer && !data.digest_ok() {
            self.target.counters.command(admin_queue, opcode);
            self.advance_sqhd();
            self.respond(
                Completion::new(cmd.cid(), Status::TRANSIENT_TRANSPORT_ERROR),
                None,
            );
            return Ok(Handled::Done);
        }
        if !self.auth.admits(&cmd) {
            // Not executed, not counted as a command: the host has not
            // authenticated.
            self.advance_sqhd();
            self.respond(Completion::new(cmd.cid(), Status::AUTH_REQUIRED), None);
            return Ok(Handled::Done);
        }
        let answer = if matches!(self.phase, Phase::Io(_)) && opcode != admin::FABRICS {
            self.io_command(&cmd, data)?
        } else if opcode == admin::FABRICS {
            self.fabrics(&cmd, data.here)
        } else {
            let now = self.now;
            match &mut self.phase {
                Phase::Admin(a) => {
                    a.last = now;
                    self.admin_command(&cmd)
                }
                _ => Answer::status(cmd.cid(), Status::COMMAND_SEQUENCE_ERROR),
            }
        };
        // A command taken moves the submission queue head, whether it is
        // answered now or later.
        let handled = match answer {
            Answer::Wait => return Ok(Handled::Wait),
            Answer::Later => {
                self.advance_sqhd();
                Handled::Done
            }
            Answer::Now(c, data) => {
                self.advance_sqhd();
                let max = cmd.sgl().1 as usize;
                self.respond(c, data.map(|d| (d, max)));
                Handled::Done
            }
        };
        // Counted once taken (not each time it waits).
        self.target.counters.command(admin_queue, opcode);
        Ok(handled)
    }
}

/// Checks the header digest of a PDU whose bytes so far are `b`.
fn check_header_digest(d: Digests, hdr: &Header, b: &[u8]) -> Result<(), PduError> {
    if !d.header || hdr.kind == kind::IC_REQ || hdr.kind == kind::H2C_TERM_REQ {
        return Ok(());
    }
    let hlen = hdr.hlen as usize;
    let (Some(header), Some(want)) = (
        b.get(..hlen),
        b.get(hlen..).and_then(|t| t.first_chunk::<4>()),
    ) else {
        return Err(PduError::field(4, "a PDU shorter than its header digest"));
    };
    if pdu::crc32c(0, header) != u32::from_le_bytes(*want) {
        return Err(PduError::new(Fes::HeaderDigest, "header digest mismatch"));
    }
    Ok(())
}
