//! [`Quoted`]: client input inside an error message, bounded. Every error
//! that quotes what a client sent (a URI or one of its parameters, a device
//! or export name, an NQN, a protocol name) prints it through this type, so
//! that no message grows with the input: a 1 MiB URI parameter quoted in a
//! gRPC status would exceed a client's metadata limit and hide the real
//! error behind `RESOURCE_EXHAUSTED`.
//!
//! Thread: any (a formatting adapter over a borrowed string).

use std::fmt;

/// Most characters of the quote itself (escapes included, quotes not).
pub const QUOTE_CHARS: usize = 128;

/// `text` quoted as Rust's `{:?}` quotes a string (control characters and
/// quotes escaped), cut to at most [`QUOTE_CHARS`] characters of quote
/// (so at most as many characters of the input, fewer when escapes lengthen
/// them), then `... (N bytes)` with the input's whole length when cut.
#[derive(Debug, Clone, Copy)]
pub struct Quoted<'a>(pub &'a str);

impl Quoted<'_> {
    /// The longest prefix of the input whose escaped form fits
    /// [`QUOTE_CHARS`] (`char::escape_debug` is never shorter than `str`'s
    /// `{:?}`, so the bound holds).
    fn prefix(&self) -> &str {
        let mut room = QUOTE_CHARS;
        for (i, c) in self.0.char_indices() {
            let width = c.escape_debug().count();
            if width > room {
                return &self.0[..i];
            }
            room -= width;
        }
        self.0
    }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let prefix = self.prefix();
        if prefix.len() == self.0.len() {
            write!(f, "{prefix:?}")
        } else {
            write!(f, "{prefix:?}... ({} bytes)", self.0.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_is_quoted_whole() {
        assert_eq!(Quoted("m0").to_string(), "\"m0\"");
        assert_eq!(Quoted("").to_string(), "\"\"");
        assert_eq!(Quoted("a\"b\n").to_string(), "\"a\\\"b\\n\"");
        let exact = "x".repeat(QUOTE_CHARS);
        assert_eq!(Quoted(&exact).to_string(), format!("{exact:?}"));
    }

    #[test]
    fn long_input_is_cut_and_its_length_said() {
        let long = "x".repeat(1 << 20);
        let q = Quoted(&long).to_string();
        assert_eq!(
            q,
            format!("\"{}\"... (1048576 bytes)", "x".repeat(QUOTE_CHARS))
        );
        let one_over = "y".repeat(QUOTE_CHARS + 1);
        assert!(Quoted(&one_over).to_string().ends_with("\"... (129 bytes)"));
    }

    #[test]
    fn escapes_and_wide_characters_count_against_the_bound() {
        // Each control character escapes to 6 characters (\u{1b}).
        let controls = "\u{1b}".repeat(1000);
        let q = Quoted(&controls).to_string();
        let quote = q.split("...").next().unwrap();
        assert!(quote.chars().count() <= QUOTE_CHARS + 2, "{q}");
        assert!(q.ends_with("... (1000 bytes)"), "{q}");
        // Multi-byte characters are cut on a character boundary.
        let wide = "é".repeat(300);
        let q = Quoted(&wide).to_string();
        assert_eq!(q, format!("\"{}\"... (600 bytes)", "é".repeat(QUOTE_CHARS)));
    }
}
