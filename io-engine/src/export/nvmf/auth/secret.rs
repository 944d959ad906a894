//! A DH-HMAC-CHAP secret in its `DHHC-1` representation (NVMe Base 2.0
//! section 8.13.5.8, what `nvme gen-dhchap-key` prints):
//! `DHHC-1:HH:BASE64:` where HH is the key transform's hash (00 none, 01
//! SHA-256, 02 SHA-384, 03 SHA-512) and BASE64 encodes the key (32, 48
//! or 64 bytes) followed by its CRC-32 in little-endian order.
//!
//! Thread: any (a plain value). Never printed: `Debug` shows no key
//! bytes, errors name what is wrong and not the value.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use zeroize::Zeroizing;

use super::hash::Hash;

/// A parsed secret: the key and the hash of its transform.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    transform: Option<Hash>,
    /// Wiped when dropped.
    key: Zeroizing<Vec<u8>>,
}

/// Why a `DHHC-1` secret is refused (none of them quotes the secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// Not of the form `DHHC-1:HH:BASE64:`.
    #[error("not a DH-HMAC-CHAP secret (DHHC-1:HH:BASE64:, as `nvme gen-dhchap-key` prints)")]
    Form,
    /// HH is not 00 to 03.
    #[error(
        "hash identifier {0:?} of a DHHC-1 secret: 00 (none), 01 (SHA-256), 02 (SHA-384) or 03 (SHA-512)"
    )]
    HashId(String),
    /// The key is not base64.
    #[error("the key of a DHHC-1 secret is not base64")]
    Base64,
    /// The key and CRC are not 36, 52 or 68 bytes.
    #[error(
        "a DHHC-1 secret's key is {0} bytes with its CRC: 32, 48 or 64 bytes and a 4-byte CRC-32"
    )]
    Length(usize),
    /// The CRC-32 does not match the key.
    #[error("the CRC-32 of a DHHC-1 secret does not match its key (mistyped or truncated)")]
    Crc,
    /// The transform's hash gives another length than the key's (the
    /// Linux host then keys its HMAC with bytes that are not there).
    #[error("a DHHC-1 secret with hash {hash} must have a {want}-byte key, not {len} bytes")]
    KeyLength {
        /// The transform's hash.
        hash: &'static str,
        /// The hash's length.
        want: usize,
        /// The key's length.
        len: usize,
    },
}

fn crc32(b: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32IsoHdlc, b) as u32
}

impl Secret {
    /// Parses `DHHC-1:HH:BASE64:` (the final colon may be left out).
    pub fn parse(s: &str) -> Result<Secret, SecretError> {
        let rest = s.strip_prefix("DHHC-1:").ok_or(SecretError::Form)?;
        let (hh, body) = rest.split_once(':').ok_or(SecretError::Form)?;
        let body = body.strip_suffix(':').unwrap_or(body);
        if body.is_empty() || body.contains(':') {
            return Err(SecretError::Form);
        }
        let transform = match hh {
            "00" => None,
            "01" => Some(Hash::Sha256),
            "02" => Some(Hash::Sha384),
            "03" => Some(Hash::Sha512),
            _ => return Err(SecretError::HashId(hh.chars().take(8).collect())),
        };
        let raw = Zeroizing::new(STANDARD.decode(body).map_err(|_| SecretError::Base64)?);
        if ![36, 52, 68].contains(&raw.len()) {
            return Err(SecretError::Length(raw.len()));
        }
        let (key, crc) = raw
            .split_last_chunk::<4>()
            .ok_or(SecretError::Length(raw.len()))?;
        if crc32(key) != u32::from_le_bytes(*crc) {
            return Err(SecretError::Crc);
        }
        let n = key.len();
        if let Some(h) = transform
            && h.size() != n
        {
            return Err(SecretError::KeyLength {
                hash: h.name(),
                want: h.size(),
                len: n,
            });
        }
        Ok(Secret {
            transform,
            key: Zeroizing::new(key.to_vec()),
        })
    }

    /// The key the HMAC of a response is keyed with (section 8.13.5.7):
    /// the key itself (hash 00), or HMAC(key, NQN || "NVMe-over-Fabrics")
    /// with the secret's hash, `nqn` being the host's NQN for the host's
    /// secret and the subsystem's for the controller's.
    pub fn transformed(&self, nqn: &str) -> Zeroizing<Vec<u8>> {
        match self.transform {
            None => self.key.clone(),
            Some(h) => Zeroizing::new(h.hmac(&self.key, &[nqn.as_bytes(), b"NVMe-over-Fabrics"])),
        }
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(REDACTED)")
    }
}
