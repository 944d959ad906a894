//! `config dump`: the running engine's devices and shares as the TOML file
//! the daemon's `--config` loads (keys `bdev` and `share`, the values of
//! its `--bdev URI` and `--share NAME[:nvmf][:ro][:nqn=NQN][:host=NQN]...`
//! flags), so a
//! node's state can be saved and restored, as SPDK's save_config and
//! load_config do.
//!
//! Thread: the CLI's main thread (pure functions).

use io_engine_api::v1::{Bdev, Export};
use serde::Serialize;

/// What the file holds: one entry per device and per share, in the
/// engine's order (devices by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ConfigDump {
    /// `--bdev` values: each device's canonical URI, with its uuid.
    pub(crate) bdev: Vec<String>,
    /// `--share` values, allowed hosts included.
    pub(crate) share: Vec<String>,
}

impl ConfigDump {
    /// The dump of these devices and shares.
    pub(crate) fn new(bdevs: &[Bdev], exports: &[Export]) -> Self {
        Self {
            bdev: bdevs.iter().map(bdev_value).collect(),
            share: exports.iter().map(share_value).collect(),
        }
    }

    /// The TOML file: a comment saying what it is, then the two keys.
    pub(crate) fn to_toml(&self, endpoint: &str) -> String {
        let mut out = format!(
            "# The devices and shares of the io-engine at {endpoint}, as written by\n\
             # `io-engine-ctl config dump`; load with `io-engine --config FILE`.\n"
        );
        out.push_str(&toml_array("bdev", &self.bdev));
        out.push_str(&toml_array("share", &self.share));
        out
    }
}

/// A device's `--bdev` value: its canonical URI, with `uuid=` added when
/// the URI lacks it, so the restored device keeps its identity.
fn bdev_value(b: &Bdev) -> String {
    let has_uuid = b
        .uri
        .split_once('?')
        .is_some_and(|(_, query)| query.split('&').any(|p| p.starts_with("uuid=")));
    if has_uuid || b.uuid.is_empty() {
        return b.uri.clone();
    }
    let separator = if b.uri.contains('?') { '&' } else { '?' };
    format!("{}{separator}uuid={}", b.uri, b.uuid)
}

/// A share's `--share` value: NAME[:nvmf][:ro][:nqn=NQN][:host=NQN]... (NBD
/// is the default protocol; the NQNs last, as the flag wants them). A host
/// that must authenticate gets `:dhchap=REDACTED`: the API never returns
/// secrets, and the daemon refuses that value, so a dump cannot start the
/// share without authentication (put the secret back, or share it with
/// `bdev share --dhchap-secret`).
fn share_value(e: &Export) -> String {
    let mut value = e.bdev.clone();
    if e.protocol != "nbd" && !e.protocol.is_empty() {
        value.push(':');
        value.push_str(&e.protocol);
    }
    if e.read_only {
        value.push_str(":ro");
    }
    if !e.nqn.is_empty() {
        value.push_str(":nqn=");
        value.push_str(&e.nqn);
    }
    for host in &e.allowed_hosts {
        value.push_str(":host=");
        value.push_str(host);
        if e.dhchap_hosts.contains(host) {
            value.push_str(":dhchap=REDACTED");
        }
    }
    value
}

/// `key = [ ... ]`, one quoted value per line.
fn toml_array(key: &str, values: &[String]) -> String {
    if values.is_empty() {
        return format!("{key} = []\n");
    }
    let mut out = format!("{key} = [\n");
    for v in values {
        out.push_str(&format!("  {},\n", toml_string(v)));
    }
    out.push_str("]\n");
    out
}

/// A TOML basic string: quotes, backslashes and control characters
/// escaped.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bdev(uri: &str, uuid: &str) -> Bdev {
        Bdev {
            name: uri
                .split("///")
                .nth(1)
                .unwrap()
                .split('?')
                .next()
                .unwrap()
                .into(),
            uuid: uuid.into(),
            uri: uri.into(),
            ..Default::default()
        }
    }

    fn export(name: &str, protocol: &str, read_only: bool, nqn: &str) -> Export {
        Export {
            bdev: name.into(),
            protocol: protocol.into(),
            read_only,
            nqn: nqn.into(),
            ..Default::default()
        }
    }

    #[test]
    fn devices_keep_their_uuid_and_shares_use_the_flag_syntax() {
        let uuid = "0f8c3d2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f";
        let dump = ConfigDump::new(
            &[
                bdev("malloc:///m0?size_mb=64&blk_size=4096", uuid),
                bdev(
                    &format!("null:///n0?num_blocks=8&blk_size=512&uuid={uuid}"),
                    uuid,
                ),
            ],
            &[
                export("m0", "nbd", false, ""),
                export("n0", "nvmf", true, "nqn.2019-05.io.example:vol:1"),
            ],
        );
        assert_eq!(
            dump.bdev,
            [
                format!("malloc:///m0?size_mb=64&blk_size=4096&uuid={uuid}"),
                format!("null:///n0?num_blocks=8&blk_size=512&uuid={uuid}"),
            ]
        );
        assert_eq!(
            dump.share,
            ["m0", "n0:nvmf:ro:nqn=nqn.2019-05.io.example:vol:1"]
        );
    }

    #[test]
    fn hosts_that_authenticate_have_their_secrets_redacted() {
        let mut e = export("m0", "nvmf", false, "");
        e.allowed_hosts = vec![
            "nqn.2024-12.io.example:a".into(),
            "nqn.2024-12.io.example:b".into(),
        ];
        e.dhchap_hosts = vec!["nqn.2024-12.io.example:b".into()];
        let dump = ConfigDump::new(&[], &[e]);
        assert_eq!(
            dump.share,
            ["m0:nvmf:host=nqn.2024-12.io.example:a:host=nqn.2024-12.io.example:b:dhchap=REDACTED"]
        );
    }

    #[test]
    fn the_toml_parses_back_to_the_same_values() {
        let mut hosts = export("m0", "nvmf", false, "nqn.2024-12.io.io-engine:m0");
        hosts.allowed_hosts = vec!["nqn.2014-08.org.nvmexpress:uuid:1".into()];
        let dump = ConfigDump::new(
            &[bdev("malloc:///m0?size_mb=1&blk_size=512", "u\"\\\n")],
            &[hosts],
        );
        let text = dump.to_toml("http://127.0.0.1:10124");
        let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(table.len(), 2, "only bdev and share: {text}");
        let strings = |key: &str| -> Vec<String> {
            table[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(strings("bdev"), dump.bdev);
        assert_eq!(strings("share"), dump.share);
        assert_eq!(
            dump.share,
            ["m0:nvmf:nqn=nqn.2024-12.io.io-engine:m0:host=nqn.2014-08.org.nvmexpress:uuid:1"],
            "the allowed hosts kept: not shared to every host instead"
        );
    }

    #[test]
    fn an_empty_engine_is_two_empty_lists() {
        let text = ConfigDump::new(&[], &[]).to_toml("http://h:1");
        assert!(text.ends_with("bdev = []\nshare = []\n"), "{text}");
        let table: toml::Table = text.parse().unwrap();
        assert_eq!(table["bdev"].as_array().map(Vec::len), Some(0));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(toml_string("a\u{7f}b\u{1}"), "\"a\\u007Fb\\u0001\"");
    }
}
