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

    /// The URI a client opens export `name` with, the server listening at
    /// `addr` (`host:port`): NBD names the export, NVMe-oF its subsystem's
    /// NQN (as Mayastor's URIs do): `nqn`, or by default the project's NQN
    /// of the name. With `tls` (the server requires it) an NBD URI is
    /// `nbds://`, the scheme of the NBD URI specification (libnbd, qemu).
    pub fn uri(self, addr: &str, name: &str, nqn: Option<&str>, tls: bool) -> String {
        match (self, nqn) {
            (Protocol::Nbd, _) if tls => format!("nbds://{addr}/{name}"),
            (Protocol::Nbd, _) => format!("nbd://{addr}/{name}"),
            (Protocol::Nvmf, Some(nqn)) => format!("nvmf://{addr}/{nqn}"),
            (Protocol::Nvmf, None) => {
                format!("nvmf://{addr}/{}", super::nvmf::nqn::nqn_of(name))
            }
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
            Protocol::Nvmf.uri("127.0.0.1:4420", "m0", None, false),
            "nvmf://127.0.0.1:4420/nqn.2024-12.io.io-engine:m0"
        );
        assert_eq!(
            Protocol::Nvmf.uri(
                "127.0.0.1:4420",
                "m0",
                Some("nqn.2019-05.io.example:v"),
                false
            ),
            "nvmf://127.0.0.1:4420/nqn.2019-05.io.example:v"
        );
        assert_eq!(
            Protocol::Nbd.uri("127.0.0.1:10809", "m0", None, false),
            "nbd://127.0.0.1:10809/m0"
        );
        assert_eq!(
            Protocol::Nbd.uri("127.0.0.1:10809", "m0", None, true),
            "nbds://127.0.0.1:10809/m0"
        );
    }
}
