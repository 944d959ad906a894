//! The protocols a device can be exported over, and what differs between
//! them as the export layer sees it: the name clients and the API use (the
//! URI scheme) and how a share is spelled as a URI.
//!
//! Thread: any (plain data).

/// A wire protocol that exports devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The Network Block Device protocol ([`super::nbd`]).
    Nbd,
    /// NVMe over Fabrics on TCP ([`super::nvmf`]).
    Nvmf,
}

impl Protocol {
    /// Every protocol this engine serves.
    pub const ALL: [Protocol; 2] = [Protocol::Nbd, Protocol::Nvmf];

    /// The name in the API and the URI scheme (`nbd`, `nvmf`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Protocol::Nbd => "nbd",
            Protocol::Nvmf => "nvmf",
        }
    }

    /// The name in messages (`NBD`).
    pub const fn title(self) -> &'static str {
        match self {
            Protocol::Nbd => "NBD",
            Protocol::Nvmf => "NVMe-oF/TCP",
        }
    }

    /// The protocol an API request names (any case; empty picks NBD).
    pub fn from_name(name: &str) -> Option<Protocol> {
        if name.is_empty() {
            return Some(Protocol::Nbd);
        }
        Protocol::ALL
            .into_iter()
            .find(|p| name.eq_ignore_ascii_case(p.as_str()))
    }

    /// The URI a client opens a share with, the server listening at
    /// `addr` (`host:port`) and `name` being what the client names the
    /// share by (as Mayastor's URIs do): NBD the export name, NVMe-oF the
    /// name of its subsystem (which [`super::nvmf`] keeps). With `tls` (the server requires it)
    /// an NBD URI is `nbds://`, the scheme of the NBD URI specification
    /// (libnbd, qemu).
    pub fn uri(self, addr: &str, name: &str, tls: bool) -> String {
        match self {
            Protocol::Nbd if tls => format!("nbds://{addr}/{name}"),
            Protocol::Nbd => format!("nbd://{addr}/{name}"),
            Protocol::Nvmf => format!("nvmf://{addr}/{name}"),
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_uris() {
        assert_eq!(Protocol::from_name(""), Some(Protocol::Nbd));
        assert_eq!(Protocol::from_name("NBD"), Some(Protocol::Nbd));
        assert_eq!(Protocol::from_name("iscsi"), None);
        assert_eq!(Protocol::from_name("NVMF"), Some(Protocol::Nvmf));
        assert_eq!(
            Protocol::Nvmf.uri("127.0.0.1:4420", "subsystem-name", false),
            "nvmf://127.0.0.1:4420/subsystem-name"
        );
        assert_eq!(
            Protocol::Nbd.uri("127.0.0.1:10809", "m0", false),
            "nbd://127.0.0.1:10809/m0"
        );
        assert_eq!(
            Protocol::Nbd.uri("127.0.0.1:10809", "m0", true),
            "nbds://127.0.0.1:10809/m0"
        );
    }
}
