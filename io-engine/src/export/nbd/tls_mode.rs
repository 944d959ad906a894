//! Whether NBD clients may, or must, upgrade to TLS (`NBD_OPT_STARTTLS`).
//!
//! Thread: any (plain data).

use std::fmt;
use std::str::FromStr;

/// The server's TLS policy, as the NBD spec names its modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS: `STARTTLS` gets `ERR_POLICY`.
    #[default]
    Off,
    /// TLS offered, plaintext accepted too.
    Allow,
    /// The spec's TLSREQUIRED mode: before `STARTTLS`, every option but
    /// `ABORT` gets `ERR_TLS_REQD` and `EXPORT_NAME` a disconnect.
    Require,
}

impl TlsMode {
    /// The mode's name, as the `--nbd-tls` flag takes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            TlsMode::Off => "off",
            TlsMode::Allow => "allow",
            TlsMode::Require => "require",
        }
    }
}

impl FromStr for TlsMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(TlsMode::Off),
            "allow" => Ok(TlsMode::Allow),
            "require" => Ok(TlsMode::Require),
            _ => Err(format!("{s:?}: expected off, allow or require")),
        }
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
