//! Logs: plain text lines for `oc logs` by default (no colours: pods have no TTY), JSON on
//! request, filtered with RUST_LOG syntax.

use std::fmt::{self, Write};

use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

use crate::config::{LogArgs, LogFormat};

#[derive(Debug, thiserror::Error)]
#[error("invalid log filter {filter:?}: {source}")]
pub struct LogError {
    filter: String,
    source: tracing_subscriber::filter::ParseError,
}

pub fn init(args: &LogArgs) -> Result<(), LogError> {
    let filter = EnvFilter::try_new(&args.log_level).map_err(|source| LogError {
        filter: args.log_level.clone(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .with_ansi(false);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match args.log_format {
        LogFormat::Text => builder.fmt_fields(TextFields).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}

/// The text format's fields as tracing-subscriber's default writes them (the message, then
/// ` name=value` with values as `Debug`), and its ANSI sanitizing of the message (control
/// characters written as `\x1b`, `\u{9b}`, ...), done on runs of plain text rather than
/// character by character through `fmt`: with the plain strings written as they are, the
/// line of a decision costs a quarter of what it did (it was a seventh of a review's cost).
struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = TextVisitor {
            writer: &mut writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct TextVisitor<'a, 'w> {
    writer: &'a mut Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl TextVisitor<'_, '_> {
    fn separate(&mut self) -> fmt::Result {
        if std::mem::take(&mut self.first) {
            Ok(())
        } else {
            self.writer.write_char(' ')
        }
    }

    fn message(&mut self, text: &str) {
        self.result = self.separate().and_then(|()| sanitized(self.writer, text));
    }

    fn field(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        let name = field.name();
        // `log` records' own metadata, shown by the format already (as the default does).
        if name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        self.result = self
            .separate()
            .and_then(|()| self.writer.write_str(name))
            .and_then(|()| self.writer.write_char('='))
            .and_then(|()| value(self.writer));
    }
}

impl Visit for TextVisitor<'_, '_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        if field.name() == "message" {
            self.message(value);
        } else {
            self.field(field, |w| quoted(w, value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        if field.name() == "message" {
            let mut text = String::with_capacity(256);
            let _ = write!(text, "{value:?}");
            self.message(&text);
        } else {
            self.field(field, |w| write!(w, "{value:?}"));
        }
    }
}

/// `text` with the characters a terminal acts on written as escapes, as tracing-subscriber
/// sanitizes a message: ESC, BEL, BS, FF, DEL, and the C1 controls U+0080..U+009F.
fn sanitized(w: &mut impl Write, text: &str) -> fmt::Result {
    let mut plain = 0;
    for (i, c) in text.char_indices() {
        let escape = matches!(c, '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f')
            || ('\u{80}'..='\u{9f}').contains(&c);
        if escape {
            w.write_str(&text[plain..i])?;
            match c {
                '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' => write!(w, "\\x{:02x}", c as u32)?,
                c => write!(w, "\\u{{{:x}}}", c as u32)?,
            }
            plain = i + c.len_utf8();
        }
    }
    w.write_str(&text[plain..])
}

/// A string as `Debug` writes it, quoted; as it is when nothing in it needs escaping.
fn quoted(w: &mut impl Write, s: &str) -> fmt::Result {
    if s.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
    {
        w.write_char('"')?;
        w.write_str(s)?;
        w.write_char('"')
    } else {
        write!(w, "{s:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_sanitized_as_tracing_subscriber_does() {
        let mut out = String::new();
        sanitized(&mut out, "a\x1b[31mred\u{9b}b\x07\x7f é \n").unwrap();
        assert_eq!(out, "a\\x1b[31mred\\u{9b}b\\x07\\x7f é \n");
    }

    #[test]
    fn strings_are_quoted_as_debug_writes_them() {
        for s in [
            "plain/path-1.2",
            "",
            "with \"quotes\"",
            "back\\slash",
            "tab\t",
            "é",
            "\x1b",
        ] {
            let mut out = String::new();
            quoted(&mut out, s).unwrap();
            assert_eq!(out, format!("{s:?}"), "{s:?}");
        }
    }
}
