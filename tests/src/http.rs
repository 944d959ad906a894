//! A tiny HTTP/1.1 client for the tests: `GET` over a plain `TcpStream`,
//! enough to read the daemon's `/metrics` and Prometheus's query API.
//!
//! Thread: the calling test thread (blocking IO, every step bounded by a
//! timeout).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Longest a [`get`] may take, connecting included.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// An HTTP response: status code, headers (names lowercase) and body.
#[derive(Debug, Clone)]
pub struct Response {
    /// The status code, e.g. 200.
    pub status: u16,
    /// Header names (lowercase) and values, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as UTF-8 text (panics if it is not).
    pub fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("the HTTP body is UTF-8")
    }
}

/// `GET url` (`http://HOST:PORT/PATH?QUERY`), with `Connection: close`.
/// Errors (refused, timed out, malformed answer) are returned as text, so
/// callers polling a server that is still starting can retry.
pub fn get(url: &str) -> Result<Response, String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url:?} is not an http:// URL"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr: SocketAddr = authority
        .to_socket_addrs()
        .map_err(|e| format!("{authority:?}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority:?} resolves to nothing"))?;
    let deadline = Instant::now() + TIMEOUT;
    let mut stream =
        TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("connect {addr}: {e}"))?;
    let left = || {
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1))
    };
    stream
        .set_write_timeout(Some(left()))
        .and_then(|()| stream.set_read_timeout(Some(left())))
        .map_err(|e| format!("{addr}: {e}"))?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: io-engine-tests\r\n\
         Accept: */*\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send to {addr}: {e}"))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        if Instant::now() >= deadline {
            return Err(format!("GET {url}: no complete answer within {TIMEOUT:?}"));
        }
        stream
            .set_read_timeout(Some(left()))
            .map_err(|e| format!("{addr}: {e}"))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("GET {url}: read: {e}")),
        }
    }
    parse(&raw).map_err(|e| format!("GET {url}: {e}"))
}

/// Parses a whole HTTP/1.1 response, read until the server closed.
fn parse(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty answer")?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else if let Some((_, len)) = headers.iter().find(|(n, _)| n == "content-length") {
        let len: usize = len
            .parse()
            .map_err(|_| format!("bad content-length {len:?}"))?;
        if rest.len() < len {
            return Err(format!("body cut short: {} of {len} bytes", rest.len()));
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// Decodes a chunked body.
fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line not terminated")?;
        let size_text = std::str::from_utf8(&rest[..eol]).map_err(|_| "chunk size not UTF-8")?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(body);
        }
        if rest.len() < size + 2 {
            return Err("chunk cut short".into());
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// The value of the sample `series` (`name{labels}`, exactly as printed) in
/// a Prometheus text body; panics when there is none.
pub fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in /metrics:\n{body}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{series}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_delimited_and_chunked_bodies() {
        let plain = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello").unwrap();
        assert_eq!(plain.status, 200);
        assert_eq!(plain.body, b"hello");
        assert_eq!(plain.header("x-a"), Some("b"));
        let chunked = parse(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(chunked.status, 404);
        assert_eq!(chunked.body, b"abcde");
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
    }

    #[test]
    fn a_closed_port_is_an_error_not_a_hang() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let started = Instant::now();
        assert!(get(&format!("http://{addr}/metrics")).is_err());
        assert!(started.elapsed() < TIMEOUT);
    }
}
