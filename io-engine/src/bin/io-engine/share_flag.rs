//! The value of a `--share` flag (and of the config file's `share` key):
//! NAME[:nbd|:nvmf][:ro][:nqn=NQN][:host=NQN]..., parsed into what
//! `Engine::share` takes.
//!
//! Thread: `main`, before the engine serves anything (pure parsing).
//!
//! NQNs hold colons, so `nqn=` and `host=` come last and each value runs to
//! the next `:nqn=` or `:host=` (or the end). `io-engine-ctl config dump`
//! writes shares in this form.

use io_engine::export::Protocol;

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
}

/// Options that take the rest of the value up to the next one of them.
const TAIL_KEYS: [&str; 2] = [":nqn=", ":host="];

impl<'a> ShareFlag<'a> {
    /// Parses `share`; the error names the value and what is wrong with it.
    pub fn parse(share: &'a str) -> Result<Self, String> {
        // Where each `:nqn=` / `:host=` starts, in order.
        let mut starts: Vec<(usize, &str)> = TAIL_KEYS
            .iter()
            .flat_map(|k| share.match_indices(k).map(|(i, _)| (i, *k)))
            .collect();
        starts.sort_unstable();
        let head = &share[..starts.first().map_or(share.len(), |(i, _)| *i)];
        let mut nqn = None;
        let mut hosts = Vec::new();
        for (n, (at, key)) in starts.iter().enumerate() {
            let end = starts.get(n + 1).map_or(share.len(), |(i, _)| *i);
            let value = &share[at + key.len()..end];
            let what = &key[1..key.len() - 1];
            if value.is_empty() {
                return Err(format!("--share {share}: {what}= gives no NQN"));
            }
            match *key {
                ":nqn=" if nqn.is_some() => {
                    return Err(format!("--share {share}: nqn= given twice"));
                }
                ":nqn=" => nqn = Some(value),
                _ => hosts.push(value),
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
                        "--share {share}: unknown protocol {p:?} (nbd or nvmf)"
                    ));
                }
            },
            None => (rest, Protocol::Nbd),
        };
        if name.is_empty() {
            return Err(format!("--share {share}: no device name"));
        }
        Ok(Self {
            name,
            protocol,
            read_only,
            nqn,
            hosts,
        })
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
