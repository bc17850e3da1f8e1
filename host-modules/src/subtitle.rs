//! `subtitle`: SRT and WebVTT captions to cues and back, read as the `subtitle` npm library
//! (4.2, the reference's) reads them and written as it writes them.
//!
//! Reading is the library's line state machine: CRLF becomes LF, a BOM before the first text is
//! dropped, leading blank lines are skipped, a `WEBVTT` first line starts a header block (up to
//! the first blank line), a line of digits before a timing line is an index (optional), `NOTE`
//! blocks are skipped, and a cue is a timing line `[h+:]mm:ss[,.]fff --> ...` (optional cue
//! settings after a space) followed by its text lines up to the next timing line, the blank
//! lines around the text trimmed. Anything else where a timing line is due is an error naming
//! the row. A fraction is read as milliseconds as written (`,5` is 5 ms), as the library does.
//!
//! Writing numbers the cues from 1, `hh:mm:ss,mmm` (SRT) or `hh:mm:ss.mmm` after a `WEBVTT`
//! line (WebVTT, with each cue's `settings` when given). Hours are not wrapped at 24 (the
//! library wraps them and puts the days into the milliseconds).
//!
//! Caps: the shared 5 MiB text cap on what is read, [`MAX_CUES`] cues either way, and 5 MiB
//! characters of cue text written.

use nodetool_protocol::limits::MAX_HOST_INPUT_CHARS;
use nodetool_protocol::value::Value;

use crate::error::HostError;
use crate::limits::{js_string, js_to_number, js_trim, option, options_of, require_text};

/// Cues one call reads or writes.
pub const MAX_CUES: usize = 100_000;

/// `parse(text)` -> `[{start, end, text}]`, times in milliseconds.
pub fn parse(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "subtitle.parse";
    let text = require_text(AT, args.first(), "captions")?;
    let cues = read(text).map_err(|e| match e {
        ReadError::Row { row, line } => {
            let shown: String = line.chars().take(120).collect();
            HostError::malformed(format!(
                "{AT}: expected timestamp at row {row}, but received: {shown:?}"
            ))
        }
        ReadError::TooMany => {
            HostError::limit(format!("{AT}: the captions hold more than {MAX_CUES} cues"))
        }
    })?;
    Ok(Value::Array(
        cues.into_iter()
            .map(|c| {
                Value::Object(vec![
                    ("start".into(), Value::Number(c.start)),
                    ("end".into(), Value::Number(c.end)),
                    ("text".into(), Value::String(c.text)),
                ])
            })
            .collect(),
    ))
}

/// `stringify(cues, {format: "SRT" | "WebVTT"})` -> caption text.
pub fn stringify(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "subtitle.stringify";
    let Some(Value::Array(cues)) = args.first() else {
        return Err(HostError::invalid(format!("{AT}: cues must be an array")));
    };
    if cues.len() > MAX_CUES {
        return Err(HostError::limit(format!(
            "{AT}: {} cues is more than the {MAX_CUES} cue limit",
            cues.len()
        )));
    }
    let vtt = match option(options_of(args.get(1)), "format") {
        None => false,
        Some(Value::String(f)) if f == "SRT" => false,
        Some(Value::String(f)) if f == "WebVTT" => true,
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{AT}: options.format must be \"SRT\" or \"WebVTT\""
            )));
        }
    };
    let mut budget = MAX_HOST_INPUT_CHARS;
    let mut out = String::new();
    if vtt && !cues.is_empty() {
        out.push_str("WEBVTT\n\n");
    }
    for (i, cue) in cues.iter().enumerate() {
        let members = options_of(Some(cue));
        let time = |key: &str| -> Result<f64, HostError> {
            let n = option(members, key).map_or(0.0, js_to_number);
            if (0.0..1e15).contains(&n) {
                Ok(n)
            } else {
                Err(HostError::invalid(format!(
                    "{AT}: cues[{i}].{key} must be a number of milliseconds from 0"
                )))
            }
        };
        let (start, end) = (time("start")?, time("end")?);
        let text = option(members, "text").map(js_string).unwrap_or_default();
        let settings = match option(members, "settings") {
            Some(Value::String(s)) if vtt && !s.is_empty() => {
                if s.contains(['\n', '\r']) {
                    return Err(HostError::invalid(format!(
                        "{AT}: cues[{i}].settings must be one line"
                    )));
                }
                Some(s.as_str())
            }
            _ => None,
        };
        let n = text.chars().count();
        if n > budget {
            return Err(HostError::limit(format!(
                "{AT}: the cues hold more than the {MAX_HOST_INPUT_CHARS} character text limit"
            )));
        }
        budget -= n;
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&(i + 1).to_string());
        out.push('\n');
        out.push_str(&timestamp(start, vtt));
        out.push_str(" --> ");
        out.push_str(&timestamp(end, vtt));
        if let Some(s) = settings {
            out.push(' ');
            out.push_str(s);
        }
        out.push('\n');
        out.push_str(&text);
        out.push('\n');
    }
    Ok(Value::String(out))
}

/// `hh:mm:ss,mmm` (or `.` for WebVTT) of a non-negative millisecond count.
fn timestamp(ms: f64, vtt: bool) -> String {
    let total = ms.floor() as u64;
    let (h, m, s, f) = (
        total / 3_600_000,
        total / 60_000 % 60,
        total / 1000 % 60,
        total % 1000,
    );
    let sep = if vtt { '.' } else { ',' };
    format!("{h:02}:{m:02}:{s:02}{sep}{f:03}")
}

/// One cue read.
#[derive(Debug, Clone, PartialEq)]
struct Cue {
    start: f64,
    end: f64,
    text: String,
}

#[derive(Debug)]
enum ReadError {
    /// A timing line was due at 1-based `row` (counted from the first non-blank line).
    Row {
        row: usize,
        line: String,
    },
    TooMany,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    Header,
    Id,
    Timestamp,
    Text,
    VttComment,
}

#[derive(Clone, Copy, PartialEq)]
enum Node {
    None,
    Header,
    Cue(f64, f64),
}

struct Reader<'a> {
    expect: Expect,
    row: usize,
    started: bool,
    vtt: bool,
    node: Node,
    buffer: Vec<&'a str>,
    cues: Vec<Cue>,
}

fn read(text: &str) -> Result<Vec<Cue>, ReadError> {
    let mut r = Reader {
        expect: Expect::Header,
        row: 0,
        started: false,
        vtt: false,
        node: Node::None,
        buffer: Vec::new(),
        cues: Vec::new(),
    };
    // `\r\n` is a line break; a lone `\r` stays in its line, as in the library.
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        r.line(line)?;
    }
    if !r.buffer.is_empty() {
        r.push_node()?;
    }
    Ok(r.cues)
}

fn is_index(line: &str) -> bool {
    let t = js_trim(line);
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

fn is_note(line: &str) -> bool {
    line.starts_with("NOTE")
}

/// `[h+:]m{1,2}:s{1,2}[,.]f{1,3}` -> milliseconds (`f` as written: `,5` is 5).
fn time_of(token: &str) -> Option<f64> {
    let cut = token.find([',', '.'])?;
    let (clock, frac) = (&token[..cut], &token[cut + 1..]);
    let digits = |s: &str, max: usize| {
        !s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_digit())
    };
    if !digits(frac, 3) {
        return None;
    }
    let parts: Vec<&str> = clock.split(':').collect();
    let (hours, minutes, seconds) = match parts.as_slice() {
        [h, m, s] if digits(h, usize::MAX) => (*h, *m, *s),
        [m, s] => ("", *m, *s),
        _ => return None,
    };
    if !digits(minutes, 2) || !digits(seconds, 2) {
        return None;
    }
    let number = |s: &str| s.parse::<f64>().unwrap_or(0.0);
    Some(
        number(hours) * 3_600_000.0
            + number(minutes) * 60_000.0
            + number(seconds) * 1000.0
            + number(frac),
    )
}

/// A timing line's start and end, or `None` when the line is not one.
fn timing(line: &str) -> Option<(f64, f64)> {
    let (first, rest) = line.split_once(' ')?;
    let rest = rest.strip_prefix("--> ")?;
    let (second, settings) = match rest.split_once(' ') {
        Some((second, settings)) => (second, Some(settings)),
        None => (rest, None),
    };
    // The library's `(.*)$` does not cross a line terminator.
    if settings.is_some_and(|s| s.contains(['\r', '\u{2028}', '\u{2029}'])) {
        return None;
    }
    Some((time_of(first)?, time_of(second)?))
}

impl<'a> Reader<'a> {
    fn line(&mut self, line: &'a str) -> Result<(), ReadError> {
        let contents = if self.row == 0 {
            line.strip_prefix('\u{feff}').unwrap_or(line)
        } else {
            line
        };
        if !self.started {
            if js_trim(contents).is_empty() {
                return Ok(());
            }
            self.started = true;
        }
        match self.expect {
            Expect::Header => self.header(contents)?,
            Expect::Id => self.id(contents)?,
            Expect::Timestamp => self.timestamp(contents)?,
            Expect::Text => self.text(contents)?,
            Expect::VttComment => self.comment(contents),
        }
        self.row += 1;
        Ok(())
    }

    fn header(&mut self, line: &'a str) -> Result<(), ReadError> {
        if !self.vtt {
            self.vtt = line.starts_with("WEBVTT");
            if self.vtt {
                self.node = Node::Header;
            } else {
                return self.id(line);
            }
        }
        self.buffer.push(line);
        if line.is_empty() {
            self.expect = Expect::Id;
        }
        Ok(())
    }

    fn id(&mut self, line: &'a str) -> Result<(), ReadError> {
        self.expect = Expect::Timestamp;
        if self.node == Node::Header {
            self.push_node()?;
        }
        if is_index(line) {
            return Ok(());
        }
        if self.vtt && is_note(line) {
            self.expect = Expect::VttComment;
            return Ok(());
        }
        self.timestamp(line)
    }

    fn comment(&mut self, line: &str) {
        self.expect = Expect::VttComment;
        if js_trim(line).is_empty() {
            self.expect = Expect::Id;
        }
    }

    fn timestamp(&mut self, line: &str) -> Result<(), ReadError> {
        let Some((start, end)) = timing(line) else {
            return Err(ReadError::Row {
                row: self.row + 1,
                line: line.to_string(),
            });
        };
        self.node = Node::Cue(start, end);
        self.expect = Expect::Text;
        Ok(())
    }

    fn text(&mut self, line: &'a str) -> Result<(), ReadError> {
        if self.buffer.is_empty() {
            self.buffer.push(line);
            return Ok(());
        }
        if timing(line).is_some() {
            if self.buffer.last().is_some_and(|l| is_index(l)) {
                self.buffer.pop();
            }
            self.push_node()?;
            return self.timestamp(line);
        }
        if is_note(line) {
            self.push_node()?;
            self.comment(line);
            return Ok(());
        }
        self.buffer.push(line);
        Ok(())
    }

    fn push_node(&mut self) -> Result<(), ReadError> {
        if let Node::Cue(start, end) = self.node {
            let blank = |l: &&str| l.is_empty() || *l == "\n";
            let first = self.buffer.iter().position(|l| !blank(l));
            let text = match first {
                None => String::new(),
                Some(first) => {
                    let last = self.buffer.iter().rposition(|l| !blank(l)).unwrap_or(first);
                    self.buffer[first..=last].join("\n")
                }
            };
            if self.cues.len() == MAX_CUES {
                return Err(ReadError::TooMany);
            }
            self.cues.push(Cue { start, end, text });
        }
        self.node = Node::None;
        self.buffer.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value a test needs from a result or an option, or a panic saying what was there.
    trait Must<T> {
        fn must(self, what: &str) -> T;
    }

    impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
        fn must(self, what: &str) -> T {
            self.unwrap_or_else(|e| panic!("{what}: {e:?}"))
        }
    }

    impl<T> Must<T> for Option<T> {
        fn must(self, what: &str) -> T {
            self.unwrap_or_else(|| panic!("{what}: nothing"))
        }
    }

    fn cues(text: &str) -> Vec<(f64, f64, String)> {
        read(text)
            .must("a value")
            .into_iter()
            .map(|c| (c.start, c.end, c.text))
            .collect()
    }

    #[test]
    fn srt_and_webvtt() {
        let srt = "\u{feff}1\r\n00:00:01,000 --> 00:00:02,500\r\nHello\r\nworld\r\n\r\n2\r\n00:00:03,000 --> 00:00:04,000\r\nBye\r\n";
        assert_eq!(
            cues(srt),
            vec![
                (1000.0, 2500.0, "Hello\nworld".into()),
                (3000.0, 4000.0, "Bye".into())
            ]
        );
        let vtt = "WEBVTT - title\nKind: captions\n\nNOTE a comment\nspanning lines\n\n00:01.000 --> 00:02.000 align:start\nHi\n\n100:00:00.001 --> 100:00:00.002\nLate\n";
        assert_eq!(
            cues(vtt),
            vec![
                (1000.0, 2000.0, "Hi".into()),
                (360_000_001.0, 360_000_002.0, "Late".into())
            ]
        );
    }

    #[test]
    fn a_missing_timing_line_names_its_row() {
        match read("1\n00:00:01,000 -> 00:00:02,000\nx\n") {
            Err(ReadError::Row { row, .. }) => assert_eq!(row, 2),
            other => panic!("{other:?}"),
        }
        assert!(time_of("00:00:01,0001").is_none());
        assert_eq!(time_of("1:02,5"), Some(62_005.0));
    }

    #[test]
    fn writing_does_not_wrap_hours() {
        assert_eq!(timestamp(90_000_000.0 + 12.7, false), "25:00:00,012");
        assert_eq!(timestamp(1.0, true), "00:00:00.001");
        let cue = Value::Object(vec![
            ("start".into(), Value::Number(0.0)),
            ("end".into(), Value::Number(1000.0)),
            ("text".into(), Value::String("a".into())),
            ("settings".into(), Value::String("line:0".into())),
        ]);
        let vtt = Value::Object(vec![("format".into(), Value::String("WebVTT".into()))]);
        assert_eq!(
            stringify(&[Value::Array(vec![cue.clone(), cue]), vtt]),
            Ok(Value::String(
                "WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000 line:0\na\n\n2\n00:00:00.000 --> 00:00:01.000 line:0\na\n".into()
            ))
        );
    }
}
