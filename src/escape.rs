//! Text from untrusted input, made safe for a terminal: a hostile bundle's member names, an
//! unverified manifest's strings, what a server answered. Control characters (an escape
//! sequence can rewrite what the operator sees) and bytes that are not UTF-8 are written as
//! Rust-style escapes (`\u{1b}`, `\xff`), so the output says exactly what the input held.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Bytes as text: valid UTF-8 kept (control characters escaped), every other byte `\xNN`.
pub fn bytes(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for chunk in raw.utf8_chunks() {
        push_escaped(&mut out, chunk.valid(), false);
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// One value (a name, a path): every control character escaped, line breaks included.
pub fn value(s: &str) -> Cow<'_, str> {
    if s.chars().any(char::is_control) {
        let mut out = String::with_capacity(s.len() + 8);
        push_escaped(&mut out, s, false);
        Cow::Owned(out)
    } else {
        Cow::Borrowed(s)
    }
}

/// Lines of output: control characters escaped except the line breaks and tabs that lay the
/// lines out.
pub fn lines(s: &str) -> Cow<'_, str> {
    if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        let mut out = String::with_capacity(s.len() + 8);
        push_escaped(&mut out, s, true);
        Cow::Owned(out)
    } else {
        Cow::Borrowed(s)
    }
}

fn push_escaped(out: &mut String, s: &str, keep_layout: bool) {
    for c in s.chars() {
        if !c.is_control() || (keep_layout && (c == '\n' || c == '\t')) {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_a_terminal_would_act_on_and_nothing_else() {
        assert_eq!(bytes(b"files/ok-\xc3\xa9"), "files/ok-é");
        assert_eq!(bytes(b"files/\xff\x1b[31mred"), "files/\\xff\\u{1b}[31mred");
        assert_eq!(value("a\nb\u{9b}c"), "a\\nb\\u{9b}c");
        assert!(matches!(value("plain"), Cow::Borrowed("plain")));
        assert_eq!(lines("line 1\n\tline 2\u{7}\n"), "line 1\n\tline 2\\u{7}\n");
    }
}
