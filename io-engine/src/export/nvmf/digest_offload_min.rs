//! `--nvmf-digest-offload BYTES|off`: the smallest data PDU whose digest
//! is offloaded, as the daemon's flag and config key take it.
//!
//! Thread: `main`, while the flags are parsed.

use std::fmt;
use std::str::FromStr;

use super::digest_offload::DIGEST_OFFLOAD_FLOOR;

/// The flag's value: a PDU size of at least [`DIGEST_OFFLOAD_FLOOR`]
/// bytes, or `None` (`off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DigestOffloadMin(pub Option<usize>);

impl FromStr for DigestOffloadMin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("off") {
            return Ok(DigestOffloadMin(None));
        }
        match s.parse::<usize>() {
            Ok(n) if n >= DIGEST_OFFLOAD_FLOOR => Ok(DigestOffloadMin(Some(n))),
            Ok(n) => Err(format!(
                "{n} bytes: at least {DIGEST_OFFLOAD_FLOOR} (smaller PDUs cost less inline), or off"
            )),
            Err(_) => Err(format!(
                "'{s}': a size in bytes (at least {DIGEST_OFFLOAD_FLOOR}), or off"
            )),
        }
    }
}

impl fmt::Display for DigestOffloadMin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("off"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_off_are_taken_and_the_rest_refused() {
        assert_eq!("65536".parse(), Ok(DigestOffloadMin(Some(65536))));
        assert_eq!("4096".parse(), Ok(DigestOffloadMin(Some(4096))));
        assert_eq!("OFF".parse(), Ok(DigestOffloadMin(None)));
        let small = "4095".parse::<DigestOffloadMin>().unwrap_err();
        assert!(small.contains("at least 4096"), "{small}");
        let junk = "64k".parse::<DigestOffloadMin>().unwrap_err();
        assert!(junk.contains("'64k'"), "{junk}");
        assert!("-1".parse::<DigestOffloadMin>().is_err());
        assert_eq!(DigestOffloadMin(None).to_string(), "off");
    }
}
