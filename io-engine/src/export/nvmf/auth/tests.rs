//! DH-HMAC-CHAP against an independent implementation: every expected
//! value (the DHHC-1 encoding, the key transform, the HMAC responses, the
//! ffdhe2048 prime and exchange) is computed at test time by a Python
//! script with hashlib, hmac, base64 and zlib, never by this code.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};

use super::message as m;
use super::*;

/// The independent side: reads one JSON request, prints one JSON answer.
const PY: &str = r#"
import sys, json, hmac, hashlib, base64, zlib
from decimal import Decimal, getcontext

def ffdhe2048():
    # RFC 7919: p = 2^2048 - 2^1984 + (floor(2^1918 * e) + 560316) * 2^64 - 1
    getcontext().prec = 800
    e, term = Decimal(0), Decimal(1)
    for k in range(1, 400):
        e += term
        term /= k
    return 2**2048 - 2**1984 + (int(Decimal(2**1918) * e) + 560316) * 2**64 - 1

H = {1: hashlib.sha256, 2: hashlib.sha384, 3: hashlib.sha512}

def transform(secret, nqn):
    _, hh, b64 = secret.split(':')[:3]
    key = base64.b64decode(b64)[:-4]
    hh = int(hh)
    return key if hh == 0 else hmac.new(key, nqn.encode() + b"NVMe-over-Fabrics", H[hh]).digest()

def response(h, key, c, seq, tid, who, a, b, skey):
    if skey is not None:
        c = hmac.new(h(skey).digest(), c, h).digest()
    msg = c + seq.to_bytes(4, 'little') + tid.to_bytes(2, 'little') + b'\0' + who \
        + a.encode() + b'\0' + b.encode()
    return hmac.new(key, msg, h).hexdigest()

r = json.load(sys.stdin)
out = {}
if r['op'] == 'secret':
    key = bytes.fromhex(r['key'])
    raw = key + zlib.crc32(key).to_bytes(4, 'little')
    out['secret'] = 'DHHC-1:%02d:%s:' % (r['hash'], base64.b64encode(raw).decode())
    out['transformed'] = transform(out['secret'], r['nqn']).hex()
elif r['op'] == 'dh':
    p = ffdhe2048()
    out['p'] = '%0512x' % p
    x = int(r['x'], 16)
    out['public'] = '%0512x' % pow(2, x, p)
    if 'peer' in r:
        out['shared'] = '%0512x' % pow(int(r['peer'], 16), x, p)
elif r['op'] == 'host':
    h = H[r['hash']]
    skey = None
    if 'ctrl_public' in r:
        p = ffdhe2048()
        x = int(r['x'], 16)
        out['public'] = '%0512x' % pow(2, x, p)
        skey = pow(int(r['ctrl_public'], 16), x, p).to_bytes(256, 'big')
    hk = transform(r['secret'], r['hostnqn'])
    out['response'] = response(h, hk, bytes.fromhex(r['c1']), r['s1'], r['tid'], b'HostHost',
                               r['hostnqn'], r['subnqn'], skey)
    if 'ctrl_secret' in r:
        ck = transform(r['ctrl_secret'], r['subnqn'])
        out['ctrl_response'] = response(h, ck, bytes.fromhex(r['c2']), r['s2'], r['tid'],
                                        b'Controller', r['subnqn'], r['hostnqn'], skey)
print(json.dumps(out))
"#;

fn python(req: Value) -> Value {
    let mut child = Command::new("python3")
        .args(["-c", PY])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(req.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3 ends");
    assert!(out.status.success(), "python3 failed");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v.as_str().expect("a hex string");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const HOST: &str = "nqn.2014-08.org.nvmexpress:uuid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
const SUB: &str = "nqn.2024-12.io.io-engine:m0";

/// A secret of `len` key bytes with transform hash `hash` (Python's
/// encoding), and its transform for `nqn`.
fn secret(hash: u8, len: usize, seed: u8, nqn: &str) -> (String, Vec<u8>) {
    let key: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(37) ^ seed)
        .collect();
    let r = python(json!({"op": "secret", "key": to_hex(&key), "hash": hash, "nqn": nqn}));
    (
        r["secret"].as_str().unwrap().to_string(),
        hex(&r["transformed"]),
    )
}

#[test]
fn dhhc1_secrets_parse_and_transform_as_python_computes() {
    for (hash, len) in [(0, 32), (0, 48), (0, 64), (1, 32), (2, 48), (3, 64)] {
        let (text, transformed) = secret(hash, len, 0x5A, HOST);
        let s = Secret::parse(&text).expect("a good secret");
        assert_eq!(
            *s.transformed(HOST),
            transformed,
            "hash {hash}, {len} bytes"
        );
        // The final colon may be left out.
        assert_eq!(
            Secret::parse(text.strip_suffix(':').unwrap()),
            Ok(s.clone())
        );
        assert_eq!(format!("{s:?}"), "Secret(REDACTED)");
    }
}

#[test]
fn malformed_secrets_are_refused_without_quoting_them() {
    let (good, _) = secret(1, 32, 7, HOST);
    let b64 = good.split(':').nth(2).unwrap().to_string();
    // One character of the key changed: the CRC no longer matches.
    let mut bad = b64.clone().into_bytes();
    bad[3] = if bad[3] == b'A' { b'B' } else { b'A' };
    let bad = String::from_utf8(bad).unwrap();
    assert_eq!(
        Secret::parse(&format!("DHHC-1:01:{bad}:")),
        Err(SecretError::Crc)
    );
    assert_eq!(
        Secret::parse(&format!("DHHC-1:04:{b64}:")),
        Err(SecretError::HashId("04".into()))
    );
    // 16 key bytes: too short.
    let (short, _) = secret(0, 16, 1, HOST);
    assert_eq!(Secret::parse(&short), Err(SecretError::Length(20)));
    // A 48-byte key with the SHA-256 transform.
    let (odd, _) = secret(1, 48, 1, HOST);
    assert!(matches!(
        Secret::parse(&odd),
        Err(SecretError::KeyLength {
            want: 32,
            len: 48,
            ..
        })
    ));
    assert_eq!(Secret::parse("DHHC-1:01:!!!!:"), Err(SecretError::Base64));
    assert_eq!(Secret::parse("DHHC-2:01:abcd:"), Err(SecretError::Form));
    assert_eq!(
        Secret::parse(&format!("DHHC-1:01:{b64}:x:")),
        Err(SecretError::Form)
    );
    for e in [
        SecretError::Crc,
        SecretError::Base64,
        SecretError::Length(20),
    ] {
        assert!(!e.to_string().contains(&b64[..8]));
    }
}

#[test]
fn the_ffdhe2048_exchange_matches_python() {
    let x = [0x11u8; 32];
    let y = [0x7Fu8; 32];
    let (a, b) = (Ffdhe2048::from_private(&x), Ffdhe2048::from_private(&y));
    let r = python(json!({"op": "dh", "x": to_hex(&x), "peer": to_hex(b.public())}));
    assert_eq!(to_hex(a.public()), r["public"].as_str().unwrap());
    let shared = a.shared(b.public()).expect("a valid peer");
    assert_eq!(to_hex(&*shared), r["shared"].as_str().unwrap());
    assert_eq!(b.shared(a.public()), Some(shared));
    // Values that would force the shared value are refused.
    let p = hex(&r["p"]);
    let mut p_minus_1 = p.clone();
    p_minus_1[255] -= 1;
    let one = {
        let mut v = [0u8; 256];
        v[255] = 1;
        v
    };
    for bad in [
        &[0u8; 256][..],
        &one[..],
        &p_minus_1[..],
        &p[..],
        &[2u8; 255][..],
    ] {
        assert_eq!(a.shared(bad), None);
    }
}

/// A hand-written host: negotiate, challenge, reply (answered by Python),
/// success1 (checked against Python), success2.
fn run(hash_offer: &[u8], groups: &[u8], bidirectional: bool, host_secret_ok: bool) -> Outcome {
    let (host_secret, _) = secret(1, 32, 0x21, HOST);
    let (ctrl_secret, _) = secret(3, 64, 0x42, SUB);
    let keys = DhchapKeys::parse(&host_secret, Some(&ctrl_secret)).unwrap();
    let mut t = Transaction::new(Arc::new(keys), HOST, SUB);
    let tid = 0x1234;
    t.send(&m::negotiate(tid, hash_offer, groups));
    let c = msg(t.receive(4096));
    assert_eq!(c.len(), 4096, "padded to the host's buffer");
    if c[1] == m::FAILURE1 {
        return t.outcome();
    }
    assert_eq!(
        (c[0], c[1], m::tid(&c)),
        (m::TYPE_DHCHAP, m::CHALLENGE, tid)
    );
    let (hl, hash_id, dhgid) = (c[6] as usize, c[8], c[9]);
    let dhvlen = u16::from_le_bytes([c[10], c[11]]) as usize;
    let s1 = u32::from_le_bytes(c[12..16].try_into().unwrap());
    let c1 = &c[16..16 + hl];
    let mut req = json!({
        "op": "host", "hash": hash_id, "hostnqn": HOST, "subnqn": SUB, "tid": tid,
        "c1": to_hex(c1), "s1": s1,
        "secret": if host_secret_ok { host_secret.clone() } else { secret(1, 32, 0x22, HOST).0 },
    });
    if dhgid == m::DHGROUP_2048 {
        assert_eq!(dhvlen, 256);
        req["ctrl_public"] = json!(to_hex(&c[16 + hl..16 + hl + 256]));
        req["x"] = json!("0123456789abcdef0123456789abcdef");
    } else {
        assert_eq!(dhvlen, 0);
    }
    let (c2, s2) = ([0xC2u8; 64], 77u32);
    if bidirectional {
        req["ctrl_secret"] = json!(ctrl_secret);
        req["c2"] = json!(to_hex(&c2[..hl]));
        req["s2"] = json!(s2);
    }
    let py = python(req);
    let dh = py.get("public").map(hex).unwrap_or_default();
    let challenge = bidirectional.then(|| (&c2[..hl], s2));
    t.send(&m::reply(tid, &hex(&py["response"]), challenge, &dh));
    let s = msg(t.receive(4096));
    if s[1] == m::FAILURE1 {
        assert_eq!(
            (s[0], s[6], m::tid(&s)),
            (m::TYPE_COMMON, m::REASON_FAILED, tid)
        );
        return t.outcome();
    }
    assert_eq!((s[1], s[6] as usize), (m::SUCCESS1, hl));
    if bidirectional {
        assert_eq!(s[8], 1, "RVALID");
        assert_eq!(
            to_hex(&s[16..16 + hl]),
            py["ctrl_response"].as_str().unwrap()
        );
        assert_eq!(t.outcome(), Outcome::Pending, "until Success2");
        t.send(&m::success2(tid));
    } else {
        assert_eq!(s[8], 0);
    }
    t.outcome()
}

#[test]
fn a_host_with_the_right_secret_authenticates_with_either_group() {
    assert_eq!(run(&[1, 2, 3], &[0], false, true), Outcome::Authenticated);
    assert_eq!(
        run(&[1, 2, 3], &[0, 1, 2], false, true),
        Outcome::Authenticated
    );
    assert_eq!(run(&[3], &[0], false, true), Outcome::Authenticated);
}

#[test]
fn bidirectional_authentication_proves_the_controller() {
    assert_eq!(run(&[1], &[0], true, true), Outcome::Authenticated);
    assert_eq!(run(&[1, 2], &[0, 1], true, true), Outcome::Authenticated);
    assert_eq!(run(&[2], &[1], true, true), Outcome::Authenticated);
}

#[test]
fn a_wrong_secret_gets_failure1_and_the_transaction_ends() {
    assert_eq!(run(&[1], &[0], false, false), Outcome::Failed(m::FAILED));
    assert_eq!(run(&[1], &[0, 1], true, false), Outcome::Failed(m::FAILED));
}

#[test]
fn unusable_offers_and_out_of_order_messages_fail() {
    assert_eq!(
        run(&[9], &[0], false, true),
        Outcome::Failed(m::HASH_UNUSABLE)
    );
    assert_eq!(
        run(&[1], &[3, 4], false, true),
        Outcome::Failed(m::DHGROUP_UNUSABLE)
    );
    let (host_secret, _) = secret(0, 32, 1, HOST);
    let keys = Arc::new(DhchapKeys::parse(&host_secret, None).unwrap());
    // A Reply before any Challenge.
    let mut t = Transaction::new(keys.clone(), HOST, SUB);
    t.send(&m::reply(0, &[0; 32], None, &[]));
    let f = msg(t.receive(16));
    assert_eq!(
        (f[0], f[1], f[7]),
        (m::TYPE_COMMON, m::FAILURE1, m::INCORRECT_MESSAGE)
    );
    assert_eq!(t.outcome(), Outcome::Failed(m::INCORRECT_MESSAGE));
    // Nothing moves a failed transaction.
    t.send(&m::negotiate(0, &[1], &[0]));
    assert_eq!(t.outcome(), Outcome::Failed(m::INCORRECT_MESSAGE));
    // A host that gives up with Failure2.
    let mut t = Transaction::new(keys, HOST, SUB);
    t.send(&m::negotiate(5, &[1], &[0]));
    let _ = t.receive(4096);
    t.send(&m::failure(m::FAILURE2, 5, m::FAILED));
    assert_eq!(t.outcome(), Outcome::Failed(m::FAILED));
}

/// The message of an AUTH_Receive that fit its allocation length.
fn msg(r: Received) -> Vec<u8> {
    match r {
        Received::Message(m) => m,
        Received::TooShort { needed } => panic!("a message of {needed} bytes did not fit"),
    }
}

/// One Negotiate per transaction: a second (which would make the target
/// compute a new ffdhe2048 key pair each time) fails it, and only the
/// first asks for a DH computation.
#[test]
fn a_second_negotiate_fails_the_transaction() {
    let (host_secret, _) = secret(1, 32, 0x21, HOST);
    let keys = Arc::new(DhchapKeys::parse(&host_secret, None).unwrap());
    let mut t = Transaction::new(keys, HOST, SUB);
    let negotiate = m::negotiate(7, &[1], &[m::DHGROUP_2048]);
    assert!(t.needs_dh(&negotiate));
    t.send(&negotiate);
    assert_eq!(t.outcome(), Outcome::Pending);
    assert!(!t.needs_dh(&negotiate), "no second key pair");
    t.send(&negotiate);
    let f = msg(t.receive(4096));
    assert_eq!(
        (f[0], f[1], f[7]),
        (m::TYPE_COMMON, m::FAILURE1, m::INCORRECT_MESSAGE)
    );
    assert_eq!(t.outcome(), Outcome::Failed(m::INCORRECT_MESSAGE));
}

/// An AUTH_Receive too short for the message is not given part of it:
/// the transaction fails.
#[test]
fn a_short_auth_receive_fails_the_transaction() {
    let (host_secret, _) = secret(1, 32, 0x21, HOST);
    let keys = Arc::new(DhchapKeys::parse(&host_secret, None).unwrap());
    let mut t = Transaction::new(keys, HOST, SUB);
    t.send(&m::negotiate(7, &[1], &[m::DHGROUP_2048]));
    // The Challenge: 16 bytes, a 32-byte C1, a 256-byte DH value.
    assert_eq!(
        t.receive(16),
        Received::TooShort {
            needed: 16 + 32 + 256
        }
    );
    assert_eq!(t.outcome(), Outcome::Failed(m::INCORRECT_PAYLOAD));
    // A NULL-group Challenge fits in 48 bytes, not 47.
    let (host_secret, _) = secret(1, 32, 0x21, HOST);
    let keys = Arc::new(DhchapKeys::parse(&host_secret, None).unwrap());
    let mut t = Transaction::new(keys.clone(), HOST, SUB);
    t.send(&m::negotiate(7, &[1], &[m::DHGROUP_NULL]));
    assert!(matches!(t.receive(47), Received::TooShort { needed: 48 }));
    let mut t = Transaction::new(keys, HOST, SUB);
    t.send(&m::negotiate(7, &[1], &[m::DHGROUP_NULL]));
    assert_eq!(msg(t.receive(48)).len(), 48);
    assert_eq!(t.outcome(), Outcome::Pending);
}
