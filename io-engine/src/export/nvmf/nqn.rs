//! NVMe Qualified Names: the discovery subsystem's, the one each shared
//! device's subsystem gets by default under this project's prefix (as
//! Mayastor's `nqn.2019-05.io.openebs:<name>`), and the rules an NQN given
//! for a share instead keeps (NVMe Base 2.0, 4.5 "NVMe Qualified Names").
//!
//! Thread: any (plain functions).

/// The well-known discovery subsystem.
pub const DISCOVERY_NQN: &str = "nqn.2014-08.org.nvmexpress.discovery";

/// The prefix of the subsystems this engine makes: `<prefix>:<device>`.
pub const NQN_PREFIX: &str = "nqn.2024-12.io.io-engine";

/// The prefix of an NQN made of a UUID: `<prefix><uuid>`.
const UUID_PREFIX: &str = "nqn.2014-08.org.nvmexpress:uuid:";

/// Longest NQN, in bytes of UTF-8, without the NUL.
pub const MAX_NQN: usize = 223;

/// The NQN of the subsystem that exports device `name` when its share
/// gives none.
pub fn nqn_of(name: &str) -> String {
    format!("{NQN_PREFIX}:{name}")
}

/// Checks an NQN given for a share: at most [`MAX_NQN`] bytes, no control
/// characters or spaces, `nqn.YYYY-MM.<reverse domain>[:<string>]` with a
/// plausible date, or `nqn.2014-08.org.nvmexpress:uuid:<uuid>`; not the
/// discovery subsystem's. The error names the rule broken.
pub fn check(nqn: &str) -> Result<(), &'static str> {
    if nqn.len() > MAX_NQN {
        return Err("is longer than 223 bytes");
    }
    if nqn.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("contains a space or a control character");
    }
    if nqn == DISCOVERY_NQN {
        return Err("is the discovery subsystem's NQN");
    }
    if let Some(uuid) = nqn.strip_prefix(UUID_PREFIX) {
        let hyphenated = uuid.len() == 36 && uuid::Uuid::try_parse(uuid).is_ok();
        return match hyphenated {
            true => Ok(()),
            false => {
                Err("is not nqn.2014-08.org.nvmexpress:uuid: and a UUID (8-4-4-4-12 hex digits)")
            }
        };
    }
    let Some(rest) = nqn.strip_prefix("nqn.") else {
        return Err("does not start with nqn.");
    };
    let (date, rest) = rest.split_at_checked(7).unwrap_or((rest, ""));
    if !plausible_date(date) {
        return Err("does not start with nqn.YYYY-MM. (a year from 1985 and a month 01 to 12)");
    }
    let Some(rest) = rest.strip_prefix('.') else {
        return Err("does not start with nqn.YYYY-MM. (a year from 1985 and a month 01 to 12)");
    };
    let (domain, string) = match rest.split_once(':') {
        Some((d, s)) => (d, Some(s)),
        None => (rest, None),
    };
    if !reverse_domain(domain) {
        return Err("has no reverse domain name after its date (as io.example.storage)");
    }
    if string == Some("") {
        return Err("ends with ':' (a string must follow it)");
    }
    Ok(())
}

/// `YYYY-MM`, a year from 1985 (the first domain names) to 2999.
fn plausible_date(date: &str) -> bool {
    let Some((year, month)) = date.split_once('-') else {
        return false;
    };
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|c| c.is_ascii_digit());
    if !digits(year, 4) || !digits(month, 2) {
        return false;
    }
    let year: u32 = year.parse().unwrap_or(0);
    let month: u32 = month.parse().unwrap_or(0);
    (1985..3000).contains(&year) && (1..=12).contains(&month)
}

/// Two or more labels of letters, digits and inner hyphens, dot-separated.
fn reverse_domain(d: &str) -> bool {
    let label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    d.split('.').count() >= 2 && d.split('.').all(label)
}

/// The NUL-terminated string in `b` (an NQN field of a Connect).
pub fn field(b: &[u8]) -> String {
    let s = b.split(|&c| c == 0).next().unwrap_or_default();
    String::from_utf8_lossy(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_fields() {
        assert_eq!(nqn_of("m0"), "nqn.2024-12.io.io-engine:m0");
        assert_eq!(check(&nqn_of("m0")), Ok(()));
        assert_eq!(field(b"abc\0\0junk"), "abc");
    }

    #[test]
    fn nqns_given_for_a_share_keep_the_rules() {
        for ok in [
            "nqn.2019-05.io.openebs:pvc-1234",
            "nqn.2014-08.com.example:nvme.host.sys.xyz",
            "nqn.2014-08.org.nvmexpress:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
            "nqn.1985-01.io.example",
            "nqn.2024-12.io.io-engine:a:b:c",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        let long = format!("nqn.2024-12.io.example:{}", "x".repeat(201));
        for (bad, why) in [
            (long.as_str(), "longer than 223"),
            ("nqn.2024-12.io.example:a b", "space"),
            ("nqn.2024-12.io.example:a\u{0}", "control"),
            (DISCOVERY_NQN, "discovery"),
            ("nqn.2014-08.org.nvmexpress:uuid:1234", "UUID"),
            (
                "nqn.2014-08.org.nvmexpress:uuid:f81d4fae7dec11d0a76500a0c91e6bf6",
                "UUID",
            ),
            ("iqn.2024-12.io.example:x", "does not start with nqn."),
            ("nqn.2024-13.io.example:x", "nqn.YYYY-MM."),
            ("nqn.1970-01.io.example:x", "nqn.YYYY-MM."),
            ("nqn.24-12.io.example:x", "nqn.YYYY-MM."),
            ("nqn.2024-12", "nqn.YYYY-MM."),
            ("nqn.2024-12:io.example", "nqn.YYYY-MM."),
            ("nqn.2024-12.example:x", "reverse domain"),
            ("nqn.2024-12.io..example:x", "reverse domain"),
            ("nqn.2024-12.io.-ex:x", "reverse domain"),
            ("nqn.2024-12.io.ex_ample:x", "reverse domain"),
            ("nqn.2024-12.io.example:", "ends with ':'"),
        ] {
            let e = check(bad).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
