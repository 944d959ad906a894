//! One ring slot's descriptor, reduced to what the protocol needs.
//!
//! Thread: written by the driver thread, read by the device thread, in a
//! loom `UnsafeCell` of [`System`](super::system::System).

/// A copy of one buffer to another (buffer numbers are the IOVAs).
#[derive(Debug, Clone, Copy)]
pub(super) struct Descriptor {
    /// Source IOVA.
    pub src: usize,
    /// Destination IOVA.
    pub dst: usize,
    /// The device writes the completion word when it is done.
    pub completion_update: bool,
    /// Moves no data (the ring's initial and re-initialised contents).
    pub null: bool,
}

impl Descriptor {
    /// A null descriptor.
    pub const NULL: Descriptor = Descriptor {
        src: 0,
        dst: 0,
        completion_update: false,
        null: true,
    };
}
