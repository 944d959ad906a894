//! The rules the model's driver and device follow: each field false is
//! the rule as it stands after issue 18, true the old rule (or a bug) the
//! model must catch.
//!
//! Thread: plain data, copied into each model thread.

/// Which rules a run follows; [`Rules::NOW`] is the protocol now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rules {
    /// Old: once the completion word has stood still (the stall check, at
    /// once in the model), the driver retires descriptors through
    /// CHANSTS's address, and accepts any word that names a slot in flight.
    /// Now: the completion word only, naming a flushed batch end at or
    /// after the tail (SPDK `ioat_process_channel_events`, Linux
    /// `__cleanup`; CHANSTS only for halts).
    pub chansts_completions: bool,
    /// A bug: the doorbell is a relaxed store, which publishes DMACOUNT
    /// but not the descriptors written before it. Now (always): release.
    pub relaxed_doorbell: bool,
    /// Old: a restart rewrites the ring and fails the requests in it (their
    /// buffers go back to their owners) after writing RESET, without
    /// waiting for it to be confirmed (a timed-out reset went on). Now:
    /// only once the reset bit has cleared; a reset never confirmed hands
    /// nothing back.
    pub unconfirmed_restart: bool,
    /// Old: the device resolves an IOVA under its map's lock but copies
    /// after releasing it, so an unmap can return while the copy goes on.
    /// Now: the lock is held across the descriptor's execution.
    pub copy_outside_map_lock: bool,
    /// A fault, not a rule: the device ignores RESET (a hung channel), so
    /// no reset is ever confirmed.
    pub reset_ignored: bool,
    /// A fault, not a rule: the device's first completion write is held
    /// back until the next descriptor's CHANSTS update (or until the
    /// device goes idle), so it lands after a CHANSTS read that shows more.
    pub late_word: bool,
    /// The device model before issue 18: CHANSTS names a descriptor only
    /// once it is done. Hardware (and the model now) names it when it
    /// starts, before its data is written.
    pub chansts_when_done: bool,
}

impl Rules {
    /// The protocol as it stands after issue 18, no fault.
    pub const NOW: Rules = Rules {
        chansts_completions: false,
        relaxed_doorbell: false,
        unconfirmed_restart: false,
        copy_outside_map_lock: false,
        reset_ignored: false,
        late_word: false,
        chansts_when_done: false,
    };
}
