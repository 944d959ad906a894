//! The ffdhe2048 Diffie-Hellman group (RFC 7919 appendix A.1, DH group
//! identifier 01h of DH-HMAC-CHAP): the target's key pair for one
//! transaction and the shared value it computes with the host's.
//!
//! Thread: the connection's reactor (about a millisecond per exponent,
//! once per queue at its authentication).
//!
//! The exponentiation is crypto-bigint's constant-time Montgomery ladder
//! over a fixed-size 2048-bit integer, with the private exponent bounded
//! to 256 bits (twice the group's 112-bit strength, as SP 800-56A asks):
//! its time does not depend on the exponent's bits, where num-bigint's
//! `modpow` (variable time, variable size) would leak them.

use crypto_bigint::modular::{MontyForm, MontyParams};
use crypto_bigint::{Odd, U256, U2048};
use zeroize::{Zeroize, Zeroizing};

/// The prime, big-endian (2^2048 - 2^1984 + (floor(2^1918 * e) + 560316) * 2^64 - 1).
const P: U2048 = U2048::from_be_hex(concat!(
    "FFFFFFFFFFFFFFFFADF85458A2BB4A9AAFDC5620273D3CF1",
    "D8B9C583CE2D3695A9E13641146433FBCC939DCE249B3EF9",
    "7D2FE363630C75D8F681B202AEC4617AD3DF1ED5D5FD6561",
    "2433F51F5F066ED0856365553DED1AF3B557135E7F57C935",
    "984F0C70E0E68B77E2A689DAF3EFE8721DF158A136ADE735",
    "30ACCA4F483A797ABC0AB182B324FB61D108A94BB2C8E3FB",
    "B96ADAB760D7F4681D4F42A3DE394DF4AE56EDE76372BB19",
    "0B07A7C8EE0A6D709E02FCE1CDF7E2ECC03404CD28342F61",
    "9172FE9CE98583FF8E4F1232EEF28183C3FE3B1B4C6FAD73",
    "3BB5FCBC2EC22005C58EF1837D1683B2C6F34A26C1B2EFFA",
    "886B423861285C97FFFFFFFFFFFFFFFF",
));
/// Bytes of a public or shared value (big-endian, zero-padded).
pub const VALUE_LEN: usize = 256;
/// Bits of the private exponent.
const PRIVATE_BITS: u32 = 256;

/// A key pair: a private exponent x and the public value g^x mod p.
pub struct Ffdhe2048 {
    private: U256,
    public: [u8; VALUE_LEN],
}

/// The Montgomery parameters of P.
fn params() -> MontyParams<{ U2048::LIMBS }> {
    // P is the constant above, odd by construction (its low word is all
    // ones); nothing from the wire reaches this.
    #[allow(clippy::expect_used)]
    let p = Odd::new(P).expect("the prime is odd");
    MontyParams::new_vartime(p)
}

/// base^exp mod p, constant time in `exp`.
fn pow(base: &U2048, exp: &U256) -> U2048 {
    MontyForm::new(base, params())
        .pow_bounded_exp(exp, PRIVATE_BITS)
        .retrieve()
}

impl Ffdhe2048 {
    /// A fresh key pair (the exponent from the OS's random source).
    pub fn generate() -> Result<Ffdhe2048, getrandom::Error> {
        let mut x = Zeroizing::new([0u8; 32]);
        getrandom::fill(&mut *x)?;
        Ok(Ffdhe2048::from_private(&x))
    }

    /// The key pair of private exponent `x` (big-endian; a zero exponent
    /// counts as 1).
    pub fn from_private(x: &[u8; 32]) -> Ffdhe2048 {
        let mut private = U256::from_be_slice(x);
        if private == U256::ZERO {
            private = U256::ONE;
        }
        let public = pow(&U2048::from_u8(2), &private).to_be_bytes();
        Ffdhe2048 { private, public }
    }

    /// The public value, 256 bytes big-endian.
    pub fn public(&self) -> &[u8; VALUE_LEN] {
        &self.public
    }

    /// The shared value with the peer's public value `peer` (256 bytes
    /// big-endian), or `None` when `peer` is not one (outside 2 to p-2:
    /// 0, 1 and p-1 would force the shared value).
    pub fn shared(&self, peer: &[u8]) -> Option<Zeroizing<[u8; VALUE_LEN]>> {
        if peer.len() != VALUE_LEN {
            return None;
        }
        let y = U2048::from_be_slice(peer);
        let top = P.wrapping_sub(&U2048::ONE);
        if y <= U2048::ONE || y >= top {
            return None;
        }
        let mut s = pow(&y, &self.private);
        let bytes = Zeroizing::new(s.to_be_bytes());
        s.zeroize();
        Some(bytes)
    }
}

impl Drop for Ffdhe2048 {
    fn drop(&mut self) {
        self.private.zeroize();
    }
}
