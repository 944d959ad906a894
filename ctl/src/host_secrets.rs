//! `bdev share --dhchap-secret NQN=FILE [--dhchap-ctrl-secret NQN=FILE]`:
//! the hosts' DH-HMAC-CHAP secrets, read from files into the share
//! request. The engine checks them; nothing here prints one.
//!
//! Thread: the CLI's (before the request goes out).

use io_engine_api::v1::HostSecret;

use crate::error::CtlError;

/// `NQN=FILE` split, and the file's content (trimmed).
fn read_one(flag: &str, value: &str) -> Result<(String, String), CtlError> {
    let (nqn, file) = value
        .split_once('=')
        .filter(|(n, f)| !n.is_empty() && !f.is_empty())
        .ok_or_else(|| CtlError::Secret(format!("{flag} {value}: NQN=FILE")))?;
    let secret = std::fs::read_to_string(file)
        .map_err(|e| CtlError::Secret(format!("{flag} {nqn}: cannot read {file}: {e}")))?;
    Ok((nqn.to_string(), secret.trim().to_string()))
}

/// The secrets of `--dhchap-secret` values, with the controller secrets
/// of `--dhchap-ctrl-secret` values for the same hosts.
pub(crate) fn read(hosts: &[String], ctrls: &[String]) -> Result<Vec<HostSecret>, CtlError> {
    let mut out: Vec<HostSecret> = Vec::with_capacity(hosts.len());
    for v in hosts {
        let (host_nqn, dhchap_secret) = read_one("--dhchap-secret", v)?;
        out.push(HostSecret {
            host_nqn,
            dhchap_secret,
            dhchap_ctrl_secret: String::new(),
        });
    }
    for v in ctrls {
        let (nqn, secret) = read_one("--dhchap-ctrl-secret", v)?;
        let host = out.iter_mut().find(|h| h.host_nqn == nqn).ok_or_else(|| {
            CtlError::Secret(format!(
                "--dhchap-ctrl-secret {nqn}: no --dhchap-secret for that host"
            ))
        })?;
        host.dhchap_ctrl_secret = secret;
    }
    Ok(out)
}
