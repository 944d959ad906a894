//! The value of a `--share` flag (and of the config file's `share` key):
//! NAME[:nbd|:nvmf][:ro][:nqn=NQN][:host=NQN[:dhchap=SECRET[:dhchap-ctrl=SECRET]]]...,
//! parsed into what `Engine::share` takes (its NVMe-oF part one
//! `nvmf::ShareOptions`).
//!
//! Thread: `main`, before the engine serves anything (pure parsing).
//!
//! NQNs and DH-HMAC-CHAP secrets (`DHHC-1:01:BASE64:`) hold colons, so
//! `nqn=`, `host=`, `dhchap=` and `dhchap-ctrl=` come last and each value
//! runs to the next `:nqn=`, `:host=`, `:dhchap=` or `:dhchap-ctrl=` (or
//! the end): a secret's base64 has no colon and its `DHHC-1:HH:` prefix no
//! `=`, so neither can look like one of them. `dhchap=` is the secret of
//! the `host=` before it (which must then authenticate), `dhchap-ctrl=`
//! the controller's secret for that host (bidirectional authentication).
//! Error messages show the value with its secrets replaced by `REDACTED`.
//! `io-engine-ctl config dump` writes shares in this form, secrets
//! redacted (the API never returns them).

use io_engine::export::Protocol;
use io_engine::export::nvmf::ShareOptions;
use io_engine::export::nvmf::auth::{DhchapKeys, HostSecrets};

/// One `--share` value, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareFlag<'a> {
    /// The device to share.
    pub name: &'a str,
    /// NBD unless `:nvmf` is given.
    pub protocol: Protocol,
    /// `:ro`.
    pub read_only: bool,
    /// NVMe/TCP: the subsystem NQN (`:nqn=`); `None` for the default.
    pub nqn: Option<&'a str>,
    /// NVMe/TCP: the hosts allowed to connect (`:host=`, repeated); empty
    /// for any host.
    pub hosts: Vec<&'a str>,
    /// NVMe/TCP: the DH-HMAC-CHAP secrets of the hosts that must
    /// authenticate: (host NQN, host secret, controller secret).
    pub dhchap: Vec<(&'a str, &'a str, Option<&'a str>)>,
}

/// Options that take the rest of the value up to the next one of them.
const TAIL_KEYS: [&str; 4] = [":nqn=", ":host=", ":dhchap=", ":dhchap-ctrl="];
/// The ones whose values are secrets.
const SECRET_KEYS: [&str; 2] = [":dhchap=", ":dhchap-ctrl="];

/// Where each tail option of `share` starts, in order, with its key.
fn tail_starts(share: &str) -> Vec<(usize, &'static str)> {
    let mut starts: Vec<(usize, &str)> = TAIL_KEYS
        .iter()
        .flat_map(|k| share.match_indices(k).map(|(i, _)| (i, *k)))
        .collect();
    starts.sort_unstable();
    starts
}

/// `share` with the values of its secret options replaced by `REDACTED`,
/// for messages.
pub fn redacted(share: &str) -> String {
    let starts = tail_starts(share);
    let mut out = String::from(&share[..starts.first().map_or(share.len(), |(i, _)| *i)]);
    for (n, (at, key)) in starts.iter().enumerate() {
        let end = starts.get(n + 1).map_or(share.len(), |(i, _)| *i);
        out.push_str(key);
        if SECRET_KEYS.contains(key) {
            out.push_str("REDACTED");
        } else {
            out.push_str(&share[at + key.len()..end]);
        }
    }
    out
}

impl<'a> ShareFlag<'a> {
    /// Parses `share`; the error names the value (its secrets redacted)
    /// and what is wrong with it.
    pub fn parse(share: &'a str) -> Result<Self, String> {
        let starts = tail_starts(share);
        let shown = redacted(share);
        let head = &share[..starts.first().map_or(share.len(), |(i, _)| *i)];
        let mut nqn = None;
        let mut hosts = Vec::new();
        let mut dhchap: Vec<(&str, &str, Option<&str>)> = Vec::new();
        for (n, (at, key)) in starts.iter().enumerate() {
            let end = starts.get(n + 1).map_or(share.len(), |(i, _)| *i);
            let value = &share[at + key.len()..end];
            let what = &key[1..key.len() - 1];
            if value.is_empty() {
                let gives = if SECRET_KEYS.contains(key) {
                    "secret"
                } else {
                    "NQN"
                };
                return Err(format!("--share {shown}: {what}= gives no {gives}"));
            }
            let last_host = hosts.last().copied();
            let keys = dhchap.last_mut().filter(|k| Some(k.0) == last_host);
            match (*key, last_host, keys) {
                (":nqn=", ..) if nqn.is_some() => {
                    return Err(format!("--share {shown}: nqn= given twice"));
                }
                (":nqn=", ..) => nqn = Some(value),
                (":host=", ..) => hosts.push(value),
                (_, None, _) => {
                    return Err(format!(
                        "--share {shown}: {what}= follows no host= (it is that host's secret)"
                    ));
                }
                (":dhchap=", Some(h), None) => dhchap.push((h, value, None)),
                (":dhchap=", Some(h), Some(_)) => {
                    return Err(format!("--share {shown}: dhchap= given twice for host {h}"));
                }
                (_, Some(_), Some(k)) if k.2.is_none() => k.2 = Some(value),
                (_, Some(h), _) => {
                    return Err(format!(
                        "--share {shown}: dhchap-ctrl= for host {h} must follow its one dhchap="
                    ));
                }
            }
        }
        for (h, host, ctrl) in &dhchap {
            if let Err(e) = DhchapKeys::parse(host, *ctrl) {
                return Err(format!("--share {shown}: host {h}'s secret: {e}"));
            }
        }
        let (rest, read_only) = match head.strip_suffix(":ro") {
            Some(n) => (n, true),
            None => (head, false),
        };
        let (name, protocol) = match rest.rsplit_once(':') {
            Some((name, p)) => match Protocol::from_name(p) {
                Some(protocol) => (name, protocol),
                None => {
                    return Err(format!(
                        "--share {shown}: unknown protocol {p:?} (nbd or nvmf)"
                    ));
                }
            },
            None => (rest, Protocol::Nbd),
        };
        if !dhchap.is_empty() && protocol != Protocol::Nvmf {
            return Err(format!("--share {shown}: dhchap= is NVMe/TCP's (:nvmf)"));
        }
        if name.is_empty() {
            return Err(format!("--share {shown}: no device name"));
        }
        Ok(Self {
            name,
            protocol,
            read_only,
            nqn,
            hosts,
            dhchap,
        })
    }
}

impl ShareFlag<'_> {
    /// The hosts' secrets, parsed (checked by [`ShareFlag::parse`]).
    pub fn host_secrets(&self) -> HostSecrets {
        HostSecrets::new(self.dhchap.iter().map(|(h, host, ctrl)| {
            let keys = DhchapKeys::parse(host, *ctrl).expect("checked when parsed");
            (h.to_string(), keys)
        }))
    }

    /// The NVMe-oF options it gives (none set for a plain NBD share; the
    /// engine refuses any for NBD).
    pub fn nvmf_options(&self) -> ShareOptions {
        ShareOptions {
            nqn: self.nqn.map(String::from),
            allowed_hosts: self.hosts.iter().map(|h| h.to_string()).collect(),
            dhchap: self.host_secrets(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag<'a>(
        name: &'a str,
        protocol: Protocol,
        read_only: bool,
        nqn: Option<&'a str>,
        hosts: &[&'a str],
    ) -> ShareFlag<'a> {
        ShareFlag {
            name,
            protocol,
            read_only,
            nqn,
            hosts: hosts.to_vec(),
            dhchap: Vec::new(),
        }
    }

    #[test]
    fn share_values_parse_with_the_nqns_last() {
        assert_eq!(
            ShareFlag::parse("m0"),
            Ok(flag("m0", Protocol::Nbd, false, None, &[]))
        );
        assert_eq!(
            ShareFlag::parse("m0:nvmf:ro"),
            Ok(flag("m0", Protocol::Nvmf, true, None, &[]))
        );
        assert_eq!(
            ShareFlag::parse("m0:nvmf:nqn=nqn.2019-05.io.example:vol:1"),
            Ok(flag(
                "m0",
                Protocol::Nvmf,
                false,
                Some("nqn.2019-05.io.example:vol:1"),
                &[]
            ))
        );
        assert_eq!(
            ShareFlag::parse("m0:nvmf:ro:nqn=nqn.2019-05.io.example:ro"),
            Ok(flag(
                "m0",
                Protocol::Nvmf,
                true,
                Some("nqn.2019-05.io.example:ro"),
                &[]
            ))
        );
    }

    #[test]
    fn allowed_hosts_repeat_in_any_order_with_the_nqn() {
        let a = "nqn.2014-08.org.nvmexpress:uuid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
        let b = "nqn.2019-05.io.example:host:b";
        let value = format!("m1:nvmf:host={a}:nqn=nqn.2019-05.io.example:m1:host={b}");
        assert_eq!(
            ShareFlag::parse(&value),
            Ok(flag(
                "m1",
                Protocol::Nvmf,
                false,
                Some("nqn.2019-05.io.example:m1"),
                &[a, b]
            ))
        );
        let value = format!("m1:nvmf:ro:host={a}");
        assert_eq!(
            ShareFlag::parse(&value),
            Ok(flag("m1", Protocol::Nvmf, true, None, &[a]))
        );
    }

    /// Secrets from `nvme gen-dhchap-key` (SHA-256 transform; none, 48 bytes).
    const K1: &str = "DHHC-1:01:hEnUUvkYQmpKZg79k5wrpLop1kvsXAj3NXVWY8r5vg1Cyk0d:";
    const K2: &str =
        "DHHC-1:00:qd2l4KAQXODXXYyi7DVmpe4nSpy2uT4Dq31jDSWDUTE/cgxLjXXzhA95Lr5ofacR7UiyTQ==:";

    #[test]
    fn secrets_follow_their_host_and_keep_their_colons() {
        let a = "nqn.2024-12.io.example:host:a";
        let b = "nqn.2024-12.io.example:b";
        let value = format!(
            "m1:nvmf:host={a}:dhchap={K1}:dhchap-ctrl={K2}:host={b}:nqn=nqn.2024-12.io.example:m1"
        );
        let f = ShareFlag::parse(&value).unwrap();
        assert_eq!(f.hosts, [a, b]);
        assert_eq!(f.nqn, Some("nqn.2024-12.io.example:m1"));
        assert_eq!(f.dhchap, [(a, K1, Some(K2))]);
        let secrets = f.host_secrets();
        assert!(secrets.get(a).is_some_and(|k| k.ctrl.is_some()));
        assert!(secrets.get(b).is_none());
        // Without the final colons too.
        let value = format!("m1:nvmf:host={a}:dhchap={}", K1.strip_suffix(':').unwrap());
        assert_eq!(
            ShareFlag::parse(&value).unwrap().dhchap,
            [(a, &K1[..K1.len() - 1], None)]
        );
        assert_eq!(
            redacted(&format!(
                "m1:nvmf:host={a}:dhchap={K1}:dhchap-ctrl={K2}:host={b}"
            )),
            format!("m1:nvmf:host={a}:dhchap=REDACTED:dhchap-ctrl=REDACTED:host={b}")
        );
    }

    #[test]
    fn misplaced_or_wrong_secrets_are_refused_and_never_shown() {
        let err = |v: &str| ShareFlag::parse(v).unwrap_err();
        let h = "nqn.2024-12.io.example:h";
        let b64 = K1.split(':').nth(2).unwrap();
        for (value, why) in [
            (format!("m0:nvmf:dhchap={K1}"), "dhchap= follows no host="),
            (
                format!("m0:nvmf:host={h}:dhchap-ctrl={K1}"),
                "must follow its one dhchap=",
            ),
            (
                format!("m0:nvmf:host={h}:dhchap={K1}:dhchap={K2}"),
                "dhchap= given twice",
            ),
            (
                format!("m0:nvmf:host={h}:dhchap={K1}:dhchap-ctrl={K2}:dhchap-ctrl={K2}"),
                "must follow its one dhchap=",
            ),
            (
                format!("m0:nvmf:host={h}:dhchap="),
                "dhchap= gives no secret",
            ),
            (format!("m0:host={h}:dhchap={K1}"), "NVMe/TCP's"),
            (
                format!("m0:nvmf:host={h}:dhchap=REDACTED"),
                "not a DH-HMAC-CHAP secret",
            ),
            (
                format!("m0:nvmf:host={h}:dhchap=DHHC-1:01:{}x:", &b64[1..]),
                "CRC-32",
            ),
        ] {
            let e = err(&value);
            assert!(e.contains(why), "{value}: {e}");
            assert!(!e.contains(&b64[4..]), "the secret in {e}");
        }
    }

    #[test]
    fn malformed_values_say_what_is_wrong() {
        let err = |v: &str| ShareFlag::parse(v).unwrap_err();
        assert!(err("m0:nvmf:nqn=").contains("nqn= gives no NQN"));
        assert!(err("m0:nvmf:host=:nqn=nqn.x:y").contains("host= gives no NQN"));
        assert!(err("m0:nvmf:nqn=nqn.x:a:nqn=nqn.x:b").contains("nqn= given twice"));
        assert!(err(":nvmf:nqn=nqn.2019-05.io.example:x").contains("no device name"));
        assert!(err("m0:iscsi").contains("unknown protocol \"iscsi\""));
    }
}
