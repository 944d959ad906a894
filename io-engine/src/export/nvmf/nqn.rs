//! NVMe Qualified Names: the discovery subsystem's, and the one each
//! shared device's subsystem gets under this project's prefix (as
//! Mayastor's `nqn.2019-05.io.openebs:<name>`).
//!
//! Thread: any (plain functions).

/// The well-known discovery subsystem.
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

/// The prefix of the subsystems this engine makes: `<prefix>:<device>`.
pub const NQN_PREFIX: &str = "nqn.2024-12.io.io-engine";

/// The NQN of the subsystem that exports device `name`.
pub fn nqn_of(name: &str) -> String {
    format!("{NQN_PREFIX}:{name}")
}

/// The device a subsystem NQN of this engine names.
pub fn export_of(nqn: &str) -> Option<&str> {
    nqn.strip_prefix(NQN_PREFIX)?
        .strip_prefix(':')
        .filter(|n| !n.is_empty())
}

/// The NUL-terminated string in `b` (an NQN field of a Connect).
pub fn field(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nqns_round_trip() {
        assert_eq!(nqn_of("m0"), "nqn.2024-12.io.io-engine:m0");
        assert_eq!(export_of(&nqn_of("m0")), Some("m0"));
        assert_eq!(export_of("nqn.2024-12.io.io-engine:"), None);
        assert_eq!(export_of("nqn.2014-08.org.nvmexpress.discovery"), None);
        assert_eq!(field(b"abc\0\0junk"), "abc");
    }
}
