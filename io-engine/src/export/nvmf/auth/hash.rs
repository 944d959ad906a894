//! The hash functions of DH-HMAC-CHAP (NVMe Base 2.0 figure 183: 01h
//! SHA-256, 02h SHA-384, 03h SHA-512) and the HMAC and digest computed
//! with them.
//!
//! Thread: any (a plain value).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha384, Sha512};

/// A hash function of DH-HMAC-CHAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hash {
    /// SHA-256 (identifier 01h).
    Sha256,
    /// SHA-384 (identifier 02h).
    Sha384,
    /// SHA-512 (identifier 03h).
    Sha512,
}

/// HMAC with `key` over `parts`. HMAC takes keys of any length, so the
/// key is never refused; were it, the empty result would match no
/// response.
fn hmac_of<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let Ok(mut m) = <M as hmac::digest::KeyInit>::new_from_slice(key) else {
        return Vec::new();
    };
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

impl Hash {
    /// The function with identifier `id`.
    pub fn from_id(id: u8) -> Option<Hash> {
        match id {
            1 => Some(Hash::Sha256),
            2 => Some(Hash::Sha384),
            3 => Some(Hash::Sha512),
            _ => None,
        }
    }

    /// Its identifier.
    pub fn id(self) -> u8 {
        match self {
            Hash::Sha256 => 1,
            Hash::Sha384 => 2,
            Hash::Sha512 => 3,
        }
    }

    /// Its output length in bytes.
    pub fn size(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha384 => 48,
            Hash::Sha512 => 64,
        }
    }

    /// Its name, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Hash::Sha256 => "sha256",
            Hash::Sha384 => "sha384",
            Hash::Sha512 => "sha512",
        }
    }

    /// HMAC with `key` over the concatenation of `parts`.
    pub fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
        match self {
            Hash::Sha256 => hmac_of::<Hmac<Sha256>>(key, parts),
            Hash::Sha384 => hmac_of::<Hmac<Sha384>>(key, parts),
            Hash::Sha512 => hmac_of::<Hmac<Sha512>>(key, parts),
        }
    }

    /// The digest of `data`.
    pub fn digest(self, data: &[u8]) -> Vec<u8> {
        match self {
            Hash::Sha256 => Sha256::digest(data).to_vec(),
            Hash::Sha384 => Sha384::digest(data).to_vec(),
            Hash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }
}
