//! What a host did that the target logs: each kind of event gets its own
//! rate limit ([`PeerLogs`](super::PeerLogs)), so that a host repeating it
//! (thousands of malformed PDUs, connects, failed authentications) cannot
//! flood the log or spend the reactor's time writing it. (A queue that
//! authenticated is logged every time: only a host holding its secret can
//! cause that line.)
//!
//! Thread: any (plain data).

/// A kind of event a host's behaviour causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerEvent {
    /// A malformed PDU: the connection was terminated (C2HTermReq).
    Terminated,
    /// The host sent H2CTermReq.
    HostTerminated,
    /// A Connect refused (unknown subsystem, host not allowed, busy, a QID
    /// taken, the host's queue limit).
    ConnectRefused,
    /// An admin queue connected: a controller was made.
    ControllerConnected,
    /// A queue failed to authenticate.
    AuthFailed,
    /// A connection closed at its connect (or authentication) deadline.
    ConnectDeadline,
    /// A controller's keep-alive timer expired.
    KeepAliveExpired,
    /// An authenticated queue could not be established (the export, the
    /// QID or the host's queue limit was taken meanwhile).
    NotEstablished,
}

impl PeerEvent {
    /// Every event, in [`index`](Self::index) order.
    pub const ALL: [PeerEvent; 8] = [
        PeerEvent::Terminated,
        PeerEvent::HostTerminated,
        PeerEvent::ConnectRefused,
        PeerEvent::ControllerConnected,
        PeerEvent::AuthFailed,
        PeerEvent::ConnectDeadline,
        PeerEvent::KeepAliveExpired,
        PeerEvent::NotEstablished,
    ];

    /// Its place in [`ALL`](Self::ALL).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// What the summary line says of events of this kind left unlogged.
    pub const fn summary(self) -> &'static str {
        match self {
            PeerEvent::Terminated => "connections terminated for a malformed PDU",
            PeerEvent::HostTerminated => "connections terminated by their host",
            PeerEvent::ConnectRefused => "Connects refused",
            PeerEvent::ControllerConnected => "controllers connected",
            PeerEvent::AuthFailed => "authentications failed",
            PeerEvent::ConnectDeadline => "connections closed at their connect deadline",
            PeerEvent::KeepAliveExpired => "controllers torn down at keep-alive expiry",
            PeerEvent::NotEstablished => "authenticated queues closed for want of room",
        }
    }
}
