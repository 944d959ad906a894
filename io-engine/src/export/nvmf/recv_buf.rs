//! Where a queue pair's next bytes from the host go, as its core
//! ([`QueuePair::recv_buf`](super::QueuePair::recv_buf)) asks: into its
//! input, or a command's data straight into the command's IO buffer (with
//! what follows it into the input), so that write data is never copied.
//!
//! Thread: the queue pair's reactor (it borrows the core).

/// Where to read the next bytes: fill the slices in order, as one
/// `readv` does, then report the count to
/// [`QueuePair::received`](super::QueuePair::received).
#[derive(Debug)]
pub enum RecvBuf<'a> {
    /// Into the input: up to this many bytes.
    Input(&'a mut [u8]),
    /// A command's data into its buffer (`data`, all of it still to come),
    /// then what follows it (its digest and the next PDU header) into
    /// `after`.
    Direct {
        /// The rest of the data, in the command's IO buffer.
        data: &'a mut [u8],
        /// Room in the input for what follows.
        after: &'a mut [u8],
    },
}
