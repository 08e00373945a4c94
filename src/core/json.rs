//! A borrowed JSON reader for the request path: one pass over the bytes, the fields the
//! rules read handed out as borrowed strings, everything else skipped and validated
//! without being built.
//!
//! Hand-written rather than serde_json behind serde's derive: per token, serde's visitors
//! and serde_json's byte-at-a-time whitespace cost more than the token, and a review is
//! mostly tokens no rule reads. This reader skips words of indentation and of string bytes
//! at a time and dispatches nothing (the benchmarks in the README say what it saves). It
//! accepts exactly the JSON serde_json accepts (RFC 8259, the
//! text already UTF-8), checked against serde_json by a property test and the `review`
//! fuzz target, with one difference: nesting deeper than [`MAX_DEPTH`] is refused
//! everywhere, where serde_json let it through in values it kept raw.

use std::borrow::Cow;
use std::fmt;

use super::lenient::{Field, Kind};

/// Containers nested deeper than this are refused (serde_json's own limit), so that a
/// hostile body cannot make a reader recurse without bound.
pub const MAX_DEPTH: u32 = 128;

/// Whether the bytes are not JSON, or JSON of a shape the caller cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Syntax,
    Data,
}

/// Where and why a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at line {line} column {column}")]
pub struct Error {
    pub category: Category,
    what: String,
    line: usize,
    column: usize,
}

pub type Result<T> = std::result::Result<T, Error>;

/// A reader over one JSON text.
pub struct Reader<'a> {
    text: &'a str,
    pos: usize,
    depth: u32,
    /// The key whose value is being read, as written (for "duplicate field" errors).
    key: (usize, usize),
}

const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
const ONES: u64 = u64::from_ne_bytes([1; 8]);
const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);

/// The 8 bytes at `pos`, which the caller has checked are there.
#[inline]
fn word(b: &[u8], pos: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[pos..pos + 8]);
    u64::from_le_bytes(w)
}

/// The bytes of `word` that end a run of plain string bytes: `"`, `\` or a control
/// character, as the high bit of each such byte (Mycroft's zero-byte test).
#[inline]
fn string_stops(word: u64) -> u64 {
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let has_zero = |w: u64| w.wrapping_sub(ONES) & !w;
    (has_zero(quote) | has_zero(backslash) | (word.wrapping_sub(ONES * 0x20) & !word)) & HIGH
}

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Self {
        Reader {
            text,
            pos: 0,
            depth: 0,
            key: (0, 0),
        }
    }

    /// Read a whole text: one value, then nothing but whitespace.
    pub fn document<T>(text: &'a str, read: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let mut r = Reader::new(text);
        let value = read(&mut r)?;
        r.whitespace();
        if r.pos < r.text.len() {
            return Err(r.syntax("trailing characters"));
        }
        Ok(value)
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    #[cold]
    #[inline(never)]
    fn error(&self, category: Category, what: impl Into<String>) -> Error {
        // Counted only on the error path.
        let before = &self.bytes()[..self.pos.min(self.text.len())];
        let line = 1 + memchr::memchr_iter(b'\n', before).count();
        let column = before.len() - memchr::memrchr(b'\n', before).map_or(0, |i| i + 1) + 1;
        Error {
            category,
            what: what.into(),
            line,
            column,
        }
    }

    #[cold]
    fn syntax(&self, what: &str) -> Error {
        self.error(Category::Syntax, what)
    }

    /// A value of a shape the caller cannot use.
    pub fn data(&self, what: impl fmt::Display) -> Error {
        self.error(Category::Data, what.to_string())
    }

    /// Skip whitespace, a word of spaces at a time (pretty-printed bodies are mostly
    /// indentation).
    #[inline(always)]
    fn whitespace(&mut self) {
        let b = self.bytes();
        let mut pos = self.pos;
        loop {
            match b.get(pos) {
                // Indentation: as many spaces as a word holds, counted at once.
                Some(b' ') if pos + 8 <= b.len() => match word(b, pos) ^ SPACES {
                    0 => pos += 8,
                    other => pos += other.trailing_zeros() as usize / 8,
                },
                Some(b' ') => pos += 1,
                Some(b'\n' | b'\r' | b'\t') => pos += 1,
                _ => break,
            }
        }
        self.pos = pos;
    }

    /// The next byte after whitespace, not consumed.
    #[inline(always)]
    fn peek(&mut self) -> Result<u8> {
        self.whitespace();
        match self.bytes().get(self.pos) {
            Some(&c) => Ok(c),
            None => Err(self.syntax("EOF while parsing a value")),
        }
    }

    #[inline(always)]
    fn expect(&mut self, c: u8, what: &str) -> Result<()> {
        if self.peek()? == c {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax(what))
        }
    }

    /// The kind of the next value; `None` for null.
    pub fn kind(&mut self) -> Result<Option<Kind>> {
        Ok(Some(match self.peek()? {
            b'{' => Kind::Object,
            b'[' => Kind::Array,
            b'"' => Kind::String,
            b't' | b'f' => Kind::Bool,
            b'-' | b'0'..=b'9' => Kind::Number,
            b'n' => return Ok(None),
            _ => return Err(self.syntax("expected value")),
        }))
    }

    /// A string, borrowed unless it has escapes.
    pub fn string(&mut self) -> Result<Cow<'a, str>> {
        self.expect(b'"', "expected a string")?;
        let start = self.pos;
        self.skip_plain();
        match self.bytes().get(self.pos) {
            Some(b'"') => {
                self.pos += 1;
                Ok(Cow::Borrowed(&self.text[start..self.pos - 1]))
            }
            _ => self.unescape(start).map(Cow::Owned),
        }
    }

    pub fn bool(&mut self) -> Result<bool> {
        match self.peek()? {
            b't' => self.literal("true").map(|()| true),
            _ => self.literal("false").map(|()| false),
        }
    }

    /// Any value, validated and skipped; its text is returned.
    pub fn skip(&mut self) -> Result<&'a str> {
        self.peek()?;
        let start = self.pos;
        // One bit per open container, 1 for an object: the depth limit keeps it in a u128.
        let mut stack: u128 = 0;
        let mut open: u32 = 0;
        let room = MAX_DEPTH.saturating_sub(self.depth);
        loop {
            // At a value.
            match self.peek()? {
                b'"' => self.skip_string()?,
                c @ (b'{' | b'[') => {
                    if open >= room {
                        return Err(self.syntax("recursion limit exceeded"));
                    }
                    self.pos += 1;
                    let object = c == b'{';
                    stack = stack << 1 | u128::from(object);
                    open += 1;
                    let close = if object { b'}' } else { b']' };
                    if self.peek()? == close {
                        self.pos += 1;
                        stack >>= 1;
                        open -= 1;
                    } else {
                        if object {
                            self.skip_key()?;
                        }
                        continue;
                    }
                }
                _ => self.skip_scalar()?,
            }
            // After a value: close what ends here, or go on to the next value.
            loop {
                if open == 0 {
                    return Ok(&self.text[start..self.pos]);
                }
                let object = stack & 1 == 1;
                match self.peek()? {
                    b',' => {
                        self.pos += 1;
                        if object {
                            self.skip_key()?;
                        }
                        break;
                    }
                    b'}' if object => {}
                    b']' if !object => {}
                    _ if object => return Err(self.syntax("expected `,` or `}`")),
                    _ => return Err(self.syntax("expected `,` or `]`")),
                }
                self.pos += 1;
                stack >>= 1;
                open -= 1;
            }
        }
    }

    /// An object's members, in order: `member` reads the value of each key it wants
    /// (through [`Reader::field`] and the like) and skips the others.
    pub fn object(&mut self, mut member: impl FnMut(&mut Self, &str) -> Result<()>) -> Result<()> {
        self.entries(|r, key| member(r, &key))
    }

    /// [`Reader::object`] with each key handed over as read (borrowed unless escaped).
    pub fn entries(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        self.expect(b'{', "expected an object")?;
        self.enter()?;
        if self.peek()? == b'}' {
            return self.leave();
        }
        loop {
            let start = self.pos;
            let key = self.string()?;
            self.key = (start, self.pos);
            self.expect(b':', "expected `:`")?;
            member(self, key)?;
            match self.peek()? {
                b',' => {
                    self.pos += 1;
                    if self.peek()? != b'"' {
                        return Err(self.syntax("expected a key"));
                    }
                }
                b'}' => return self.leave(),
                _ => return Err(self.syntax("expected `,` or `}`")),
            }
        }
    }

    /// An array's items, in order; `item` reads (or skips) each.
    pub fn array(&mut self, mut item: impl FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.expect(b'[', "expected an array")?;
        self.enter()?;
        if self.peek()? == b']' {
            return self.leave();
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => return self.leave(),
                _ => return Err(self.syntax("expected `,` or `]`")),
            }
        }
    }

    /// The next value as a [`Field`]: null, of the `want`ed kind (read by `read`), or of
    /// another kind (skipped).
    pub fn field<T>(
        &mut self,
        want: Kind,
        read: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<Field<T>> {
        match self.kind()? {
            None => self.literal("null").map(|()| Field::Null),
            Some(kind) if kind == want => read(self).map(Field::Is),
            Some(kind) => self.skip().map(|_| Field::Wrong(kind)),
        }
    }

    /// [`Reader::field`] into the field of a struct being read; a key read twice is an
    /// error, as serde's derive has it.
    pub fn field_into<T>(
        &mut self,
        slot: &mut Field<T>,
        want: Kind,
        read: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<()> {
        if !matches!(slot, Field::Absent) {
            let (start, end) = self.key;
            let key = &self.text[start..end];
            return Err(self.data(format!("duplicate field {key}")));
        }
        *slot = self.field(want, read)?;
        Ok(())
    }

    /// A string field of a struct being read.
    pub fn string_into(&mut self, slot: &mut Field<Cow<'a, str>>) -> Result<()> {
        self.field_into(slot, Kind::String, Self::string)
    }

    /// Past the closing bracket of the container [`Reader::enter`] opened.
    fn leave(&mut self) -> Result<()> {
        self.pos += 1;
        self.depth -= 1;
        Ok(())
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.syntax("recursion limit exceeded"));
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<()> {
        if self.bytes()[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.syntax("expected ident"))
        }
    }

    fn skip_scalar(&mut self) -> Result<()> {
        match self.bytes().get(self.pos) {
            Some(b't') => self.literal("true"),
            Some(b'f') => self.literal("false"),
            Some(b'n') => self.literal("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.syntax("expected value")),
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Result<()> {
        let b = self.bytes();
        let digits = |pos: &mut usize| {
            let start = *pos;
            while b.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos > start
        };
        let mut pos = self.pos;
        if b.get(pos) == Some(&b'-') {
            pos += 1;
        }
        let leading_zero = b.get(pos) == Some(&b'0');
        if !digits(&mut pos) {
            self.pos = pos;
            return Err(self.syntax("invalid number"));
        }
        if leading_zero && pos - self.pos > 1 + usize::from(b[self.pos] == b'-') {
            self.pos = pos;
            return Err(self.syntax("invalid number"));
        }
        if b.get(pos) == Some(&b'.') {
            pos += 1;
            if !digits(&mut pos) {
                self.pos = pos;
                return Err(self.syntax("invalid number"));
            }
        }
        if matches!(b.get(pos), Some(b'e' | b'E')) {
            pos += 1;
            if matches!(b.get(pos), Some(b'+' | b'-')) {
                pos += 1;
            }
            if !digits(&mut pos) {
                self.pos = pos;
                return Err(self.syntax("invalid number"));
            }
        }
        self.pos = pos;
        Ok(())
    }

    /// Advance to the next `"`, `\` or control character (or the end), a word at a time.
    #[inline(always)]
    fn skip_plain(&mut self) {
        let b = self.bytes();
        let mut pos = self.pos;
        while pos + 8 <= b.len() {
            let stops = string_stops(word(b, pos));
            if stops != 0 {
                self.pos = pos + stops.trailing_zeros() as usize / 8;
                return;
            }
            pos += 8;
        }
        while b
            .get(pos)
            .is_some_and(|&c| c != b'"' && c != b'\\' && c >= 0x20)
        {
            pos += 1;
        }
        self.pos = pos;
    }

    #[inline(always)]
    fn skip_key(&mut self) -> Result<()> {
        if self.peek()? != b'"' {
            return Err(self.syntax("expected a key"));
        }
        self.skip_string()?;
        self.expect(b':', "expected `:`")
    }

    /// A string, validated and skipped.
    #[inline(always)]
    fn skip_string(&mut self) -> Result<()> {
        self.pos += 1; // the opening quote
        loop {
            self.skip_plain();
            match self.bytes().get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape()?;
                }
                Some(_) => return Err(self.control_character()),
                None => return Err(self.syntax("EOF while parsing a string")),
            }
        }
    }

    fn control_character(&self) -> Error {
        self.syntax("control character (\\u0000-\\u001F) found while parsing a string")
    }

    /// The character an escape stands for (after its `\`); a `\u` surrogate half is
    /// returned as is, for the caller to pair.
    fn escape(&mut self) -> Result<u32> {
        let Some(&c) = self.bytes().get(self.pos) else {
            return Err(self.syntax("EOF while parsing a string"));
        };
        self.pos += 1;
        Ok(match c {
            b'"' => u32::from(b'"'),
            b'\\' => u32::from(b'\\'),
            b'/' => u32::from(b'/'),
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => u32::from(b'\n'),
            b'r' => u32::from(b'\r'),
            b't' => u32::from(b'\t'),
            b'u' => self.hex4()?,
            _ => return Err(self.syntax("invalid escape")),
        })
    }

    fn hex4(&mut self) -> Result<u32> {
        let Some(digits) = self.bytes().get(self.pos..self.pos + 4) else {
            self.pos = self.text.len();
            return Err(self.syntax("EOF while parsing a string"));
        };
        let mut n = 0;
        for &d in digits {
            let Some(v) = char::from(d).to_digit(16) else {
                return Err(self.syntax("invalid escape"));
            };
            n = n * 16 + v;
            self.pos += 1;
        }
        Ok(n)
    }

    /// The rest of a string that has escapes, from its first byte at `start`.
    fn unescape(&mut self, start: usize) -> Result<String> {
        let mut out = String::with_capacity(self.pos - start + 16);
        let mut from = start;
        loop {
            self.skip_plain();
            out.push_str(&self.text[from..self.pos.min(self.text.len())]);
            match self.bytes().get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let c = self.escape()?;
                    out.push(self.code_point(c)?);
                }
                Some(_) => return Err(self.control_character()),
                None => return Err(self.syntax("EOF while parsing a string")),
            }
            from = self.pos;
        }
    }

    /// A code point from an escape, pairing a surrogate half with the `\u` after it.
    fn code_point(&mut self, c: u32) -> Result<char> {
        match c {
            0xD800..=0xDBFF => {
                if !self.bytes()[self.pos..].starts_with(b"\\u") {
                    return Err(self.syntax("lone leading surrogate in hex escape"));
                }
                self.pos += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return Err(self.syntax("lone leading surrogate in hex escape"));
                }
                let c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
                char::from_u32(c).ok_or_else(|| self.syntax("invalid unicode code point"))
            }
            0xDC00..=0xDFFF => Err(self.syntax("lone trailing surrogate in hex escape")),
            _ => char::from_u32(c).ok_or_else(|| self.syntax("invalid unicode code point")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skipped(text: &str) -> Result<&str> {
        Reader::document(text, Reader::skip)
    }

    #[test]
    fn skips_what_serde_json_accepts_and_refuses_what_it_refuses() {
        let good = [
            "0",
            "-0.5e+10",
            "1E5",
            " \n\t\r true ",
            r#"{"a": [1, 2, {"b": null}], "c": "d\"e\\u00e9\n"}"#,
            "[]",
            "{}",
            r#"[[[]], {"": {}}]"#,
            r#""        long string with more than eight bytes        ""#,
        ];
        for text in good {
            assert!(
                serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok(),
                "{text}"
            );
            assert_eq!(skipped(text).map(str::trim), Ok(text.trim()), "{text}");
        }
        let bad = [
            "",
            " ",
            "01",
            "-",
            "1.",
            "1e",
            "+1",
            "tru",
            "nul",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{1: 2}",
            "[1 2]",
            "\"abc",
            "\"a\u{1}b\"",
            "\"\\x\"",
            "\"\\u12g4\"",
            "[1]]",
            "{}x",
            "[",
            "{\"a\":",
        ];
        for text in bad {
            assert!(
                serde_json::from_str::<serde::de::IgnoredAny>(text).is_err(),
                "{text}"
            );
            assert!(skipped(text).is_err(), "{text:?} should be refused");
        }
    }

    #[test]
    fn nesting_is_limited_in_skipped_and_read_values() {
        let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(skipped(&deep(128)).is_ok());
        let err = skipped(&deep(129)).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
        let inside = format!(r#"{{"a": {}}}"#, deep(128));
        let err = Reader::document(&inside, |r| r.object(|r, _| r.skip().map(drop))).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn strings_are_borrowed_unless_escaped() {
        let read = |text| Reader::document(text, Reader::string);
        assert!(matches!(read(r#""plain""#), Ok(Cow::Borrowed("plain"))));
        assert_eq!(
            read(r#""tab\there \u00e9 \ud83d\ude00""#).unwrap(),
            "tab\there é 😀"
        );
        assert!(read(r#""\ud83d""#).is_err());
        assert!(read(r#""\ude00""#).is_err());
    }

    #[test]
    fn fields_say_what_they_found_and_refuse_repeats() {
        let text = r#"{"s": "x", "n": 1, "o": {"k": []}, "z": null, "s2": "y", "s2": "z"}"#;
        let mut fields: Vec<(String, Field<Cow<'_, str>>)> = Vec::new();
        Reader::document(text, |r| {
            r.entries(|r, key| {
                let f = r.field(Kind::String, Reader::string)?;
                fields.push((key.into_owned(), f));
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(fields[0].1, Field::Is(Cow::Borrowed("x")));
        assert_eq!(fields[1].1, Field::Wrong(Kind::Number));
        assert_eq!(fields[2].1, Field::Wrong(Kind::Object));
        assert_eq!(fields[3].1, Field::Null);
        let mut slot = Field::Absent;
        let err = Reader::document(text, |r| {
            r.object(|r, key| match key {
                "s2" => r.string_into(&mut slot),
                _ => r.skip().map(drop),
            })
        })
        .unwrap_err();
        assert_eq!(err.category, Category::Data);
        assert!(
            err.to_string().starts_with("duplicate field \"s2\""),
            "{err}"
        );
    }

    #[test]
    fn errors_say_where() {
        let err = skipped("{\n  \"a\": tru\n}").unwrap_err();
        assert_eq!(err.to_string(), "expected ident at line 2 column 8");
        assert_eq!(err.category, Category::Syntax);
    }
}
