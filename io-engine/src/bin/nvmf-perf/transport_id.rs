//! The `-r` argument: an SPDK transport ID string
//! (`trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4420 subnqn:NQN`),
//! parsed as `spdk_nvme_transport_id_parse` reads it: whitespace-separated
//! `key:value` pairs (the value runs to the next blank and may itself hold
//! colons), keys in any case. Only TCP is driven.
//!
//! Thread: `main`, while the arguments are parsed.

use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// NVMe/TCP's registered port, when `trsvcid` is not given.
const DEFAULT_PORT: u16 = 4420;

/// Where to connect and to which subsystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportId {
    /// `traddr`: the target's address (an IP address or a host name).
    pub traddr: String,
    /// `trsvcid`: the TCP port.
    pub trsvcid: u16,
    /// `subnqn`: the subsystem to connect to.
    pub subnqn: String,
    /// `ns`: the namespace to drive (1 unless given).
    pub nsid: u32,
    /// `hostnqn`, when given.
    pub hostnqn: Option<String>,
}

impl TransportId {
    /// The socket address of `traddr:trsvcid` (the first one a name
    /// resolves to).
    pub fn socket_addr(&self) -> Result<SocketAddr, String> {
        let host = self.traddr.trim_start_matches('[').trim_end_matches(']');
        (host, self.trsvcid)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve traddr {}: {e}", self.traddr))?
            .next()
            .ok_or_else(|| format!("traddr {} has no address", self.traddr))
    }

    /// How the report names the target, as spdk_nvme_perf does.
    pub fn describe(&self) -> String {
        format!("TCP (addr:{} subnqn:{})", self.traddr, self.subnqn)
    }
}

impl FromStr for TransportId {
    type Err = String;

    fn from_str(s: &str) -> Result<TransportId, String> {
        let mut trtype = None;
        let mut traddr = None;
        let mut trsvcid = DEFAULT_PORT;
        let mut subnqn = None;
        let mut nsid = 1;
        let mut hostnqn = None;
        for pair in s.split_whitespace() {
            let Some((key, value)) = pair.split_once([':', '=']) else {
                return Err(format!("{pair:?} is not a key:value pair"));
            };
            if value.is_empty() {
                return Err(format!("{key} has no value"));
            }
            match key.to_ascii_lowercase().as_str() {
                "trtype" => trtype = Some(value.to_string()),
                "adrfam" => {
                    if !["ipv4", "ipv6"].contains(&value.to_ascii_lowercase().as_str()) {
                        return Err(format!("adrfam {value}: only IPv4 and IPv6 are driven"));
                    }
                }
                "traddr" => traddr = Some(value.to_string()),
                "trsvcid" => {
                    trsvcid = value
                        .parse()
                        .map_err(|_| format!("trsvcid {value} is not a TCP port"))?;
                }
                "subnqn" => subnqn = Some(value.to_string()),
                "ns" => {
                    nsid = value
                        .parse()
                        .ok()
                        .filter(|&n: &u32| n != 0 && n != u32::MAX)
                        .ok_or_else(|| format!("ns {value} is not a namespace ID"))?;
                }
                "hostnqn" => hostnqn = Some(value.to_string()),
                other => return Err(format!("unknown transport ID key {other:?}")),
            }
        }
        match trtype.as_deref() {
            Some(t) if t.eq_ignore_ascii_case("tcp") => {}
            Some(t) => return Err(format!("trtype {t}: only TCP is supported")),
            None => return Err("trtype is missing (trtype:TCP)".into()),
        }
        let traddr = traddr.ok_or("traddr is missing")?;
        let subnqn = subnqn.ok_or("subnqn is missing")?;
        if subnqn.len() > 223 {
            return Err("subnqn is longer than 223 bytes".into());
        }
        Ok(TransportId {
            traddr,
            trsvcid,
            subnqn,
            nsid,
            hostnqn,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spdk_strings_parse_and_other_transports_are_refused() {
        let t: TransportId =
            "trtype:TCP adrfam:IPv4 traddr:127.0.0.1 trsvcid:4421 subnqn:nqn.2024-12.io.io-engine:m0"
                .parse()
                .unwrap();
        assert_eq!(t.traddr, "127.0.0.1");
        assert_eq!(t.trsvcid, 4421);
        assert_eq!(t.subnqn, "nqn.2024-12.io.io-engine:m0");
        assert_eq!(t.nsid, 1);
        let t: TransportId = "trtype:tcp traddr:localhost subnqn:x ns:2".parse().unwrap();
        assert_eq!((t.trsvcid, t.nsid), (4420, 2));
        let e = "trtype:RDMA traddr:1.2.3.4 subnqn:x"
            .parse::<TransportId>()
            .unwrap_err();
        assert!(e.contains("only TCP"), "{e}");
        assert!("traddr:1.2.3.4 subnqn:x".parse::<TransportId>().is_err());
        assert!("trtype:TCP subnqn:x".parse::<TransportId>().is_err());
        assert!("trtype:TCP traddr:1.2.3.4".parse::<TransportId>().is_err());
        assert!(
            "trtype:TCP traddr:1.2.3.4 subnqn:x bogus:1"
                .parse::<TransportId>()
                .is_err()
        );
    }
}
