//! [`SocketPath`]: a Unix socket path one process owns, like a TCP port.
//!
//! Thread: any (the daemon's `main` binds at start and drops at shutdown).
//!
//! Binding a Unix socket needs its path free, so a daemon that simply
//! removed whatever was there would take the socket of a live process
//! (whose clients would then reach the newcomer) and, when it stopped,
//! delete a socket that by then belonged to someone else. Here:
//!
//! - a socket some process still accepts on is refused
//!   ([`SocketPathError::InUse`]), as a TCP port in use is;
//! - a stale socket file (nothing listens: connecting is refused) is
//!   replaced;
//! - anything else at the path (a file, a directory) is refused, never
//!   removed;
//! - on drop the file is removed only if it is still the one bound here
//!   (same device and inode), not one another process put there since.
//!
//! Two daemons starting at the same instant on the same stale path can
//! still race between the check and the bind; the check is for the common
//! mistakes (a second daemon, a leftover file), not an arbiter.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Why a socket path could not be bound.
#[derive(Debug, Error)]
pub enum SocketPathError {
    /// A live process accepts connections on the socket.
    #[error("{}: another process is listening on this socket (stop it, or choose another path)", .0.display())]
    InUse(PathBuf),
    /// Something other than a socket is at the path.
    #[error("{}: exists and is not a socket (not removed)", .0.display())]
    NotASocket(PathBuf),
    /// Checking, removing or binding failed.
    #[error("{}: {what}: {source}", .path.display())]
    Io {
        /// The socket path.
        path: PathBuf,
        /// The step that failed.
        what: &'static str,
        /// The system's error.
        source: io::Error,
    },
}

/// A bound socket's path, removed on drop if it is still this socket.
#[derive(Debug)]
pub struct SocketPath {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketPath {
    /// Binds `path`, replacing a stale socket file; refuses a socket a live
    /// process listens on, and anything that is not a socket.
    pub fn bind(path: &Path) -> Result<(UnixListener, SocketPath), SocketPathError> {
        let io = |what: &'static str| {
            move |source| SocketPathError::Io {
                path: path.to_owned(),
                what,
                source,
            }
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_socket() => {
                return Err(SocketPathError::NotASocket(path.to_owned()));
            }
            Ok(_) => match UnixStream::connect(path) {
                Ok(_) => return Err(SocketPathError::InUse(path.to_owned())),
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    tracing::info!(path = %path.display(), "replacing a stale socket file (nothing listens on it)");
                    std::fs::remove_file(path).map_err(io("cannot remove the stale socket"))?;
                }
                Err(e) => return Err(io("cannot check whether a process listens")(e)),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("cannot inspect the path")(e)),
        }
        let listener = UnixListener::bind(path).map_err(io("cannot bind"))?;
        let m = std::fs::symlink_metadata(path).map_err(io("cannot inspect the bound socket"))?;
        Ok((
            listener,
            SocketPath {
                path: path.to_owned(),
                dev: m.dev(),
                ino: m.ino(),
            },
        ))
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        match std::fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino => {
                if let Err(e) = std::fs::remove_file(&self.path) {
                    tracing::warn!(path = %self.path.display(), "cannot remove the socket: {e}");
                }
            }
            Ok(_) => tracing::info!(
                path = %self.path.display(),
                "the socket path now holds another file: left in place"
            ),
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "io-engine-socket-path-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_live_socket_is_refused_and_kept() {
        let d = dir("live");
        let p = d.join("s");
        let (_live, owner) = SocketPath::bind(&p).unwrap();
        let err = SocketPath::bind(&p).unwrap_err();
        assert!(matches!(err, SocketPathError::InUse(_)), "{err}");
        assert!(
            err.to_string().contains("another process is listening"),
            "{err}"
        );
        UnixStream::connect(&p).expect("the first socket still answers");
        drop(owner);
        assert!(!p.exists(), "removed by its owner");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_stale_socket_is_replaced() {
        let d = dir("stale");
        let p = d.join("s");
        // Bound and closed without removing: what a killed process leaves.
        drop(UnixListener::bind(&p).unwrap());
        assert!(p.exists());
        let (listener, owner) = SocketPath::bind(&p).unwrap();
        UnixStream::connect(&p).expect("the new socket answers");
        drop(listener);
        drop(owner);
        assert!(!p.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_socket_replaced_since_is_left_to_its_new_owner() {
        let d = dir("replaced");
        let p = d.join("s");
        let (_first, owner) = SocketPath::bind(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        let _second = UnixListener::bind(&p).unwrap();
        drop(owner);
        assert!(p.exists(), "another process's socket is not removed");
        UnixStream::connect(&p).expect("and still answers");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn anything_but_a_socket_is_refused_not_removed() {
        let d = dir("file");
        let p = d.join("s");
        std::fs::write(&p, b"data").unwrap();
        let err = SocketPath::bind(&p).unwrap_err();
        assert!(matches!(err, SocketPathError::NotASocket(_)), "{err}");
        assert_eq!(std::fs::read(&p).unwrap(), b"data");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
