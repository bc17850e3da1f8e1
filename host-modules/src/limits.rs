//! The shared input rules of host modules: text and byte caps, argument shapes, and the
//! messages every module uses for them (`<id>.<export>: ...`).

use nodetool_protocol::limits::{MAX_HOST_INPUT_BYTES, MAX_HOST_INPUT_CHARS};
use nodetool_protocol::value::Value;

use crate::error::{HostError, HostErrorCode};

/// Bytes of values one host call may produce, its strings and the keys of its records counted
/// once per copy: 64 MiB, the standard guest heap, which could not hold a larger result
/// anyway. It is what is *made* that counts, not what is read: a parser that copies one
/// string of its input to every place that refers to it (an xlsx shared string, say) turns a
/// few KiB of input into any amount of host memory.
pub const MAX_RESULT_BYTES: usize = 64 * 1024 * 1024;

/// A text argument: a string of at most 5 MiB characters.
pub fn require_text<'a>(
    at: &str,
    value: Option<&'a Value>,
    label: &str,
) -> Result<&'a str, HostError> {
    match value {
        Some(Value::String(s)) => {
            // Characters, as the reference counts them (UTF-16 code units there; chars here,
            // which never exceed them).
            if s.len() > MAX_HOST_INPUT_CHARS && s.chars().count() > MAX_HOST_INPUT_CHARS {
                Err(HostError::new(
                    HostErrorCode::InputTooLarge,
                    format!("{at}: input exceeds the {MAX_HOST_INPUT_CHARS} character limit"),
                ))
            } else {
                Ok(s)
            }
        }
        _ => Err(HostError::invalid(format!(
            "{at}: {label} must be a string"
        ))),
    }
}

/// A binary argument: bytes (a Uint8Array in the guest) of at most 10 MiB.
pub fn require_bytes<'a>(
    at: &str,
    value: Option<&'a Value>,
    label: &str,
) -> Result<&'a [u8], HostError> {
    match value {
        Some(Value::Bytes(b)) if b.len() > MAX_HOST_INPUT_BYTES => Err(HostError::new(
            HostErrorCode::InputTooLarge,
            format!("{at}: input exceeds the {MAX_HOST_INPUT_BYTES} byte limit"),
        )),
        Some(Value::Bytes(b)) => Ok(b),
        _ => Err(HostError::invalid(format!(
            "{at}: {label} must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())"
        ))),
    }
}

/// An options argument: a plain object, or an empty one for anything else (as the reference).
pub fn options_of(value: Option<&Value>) -> &[(String, Value)] {
    match value {
        Some(Value::Object(members)) => members,
        _ => &[],
    }
}

/// An option by name.
pub fn option<'a>(options: &'a [(String, Value)], name: &str) -> Option<&'a Value> {
    options
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .filter(|v| !matches!(v, Value::Undefined | Value::Null))
}

/// A boolean option with its default (anything but a boolean keeps the default).
pub fn bool_option(options: &[(String, Value)], name: &str, default: bool) -> bool {
    match option(options, name) {
        Some(Value::Bool(b)) => *b,
        _ => default,
    }
}

/// A numeric option floored and clamped to `min..=max`; non-finite or absent gives `default`.
pub fn clamped_option(
    options: &[(String, Value)],
    name: &str,
    default: i64,
    min: i64,
    max: i64,
) -> i64 {
    match option(options, name) {
        Some(Value::Number(n)) if n.is_finite() => (n.floor() as i64).clamp(min, max),
        _ => default,
    }
}

/// Why [`write_json`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonStop {
    /// The value nests deeper than the caller's depth limit.
    Depth,
    /// What was written passed the caller's byte limit.
    Size,
}

/// `JSON.stringify(value)` appended to `out`, as the guest would write it: a Uint8Array as
/// its index-keyed object, `undefined` members left out and `undefined` items as `null`,
/// non-finite numbers as `null`. Stops with [`JsonStop::Depth`] past `max_depth` levels, and
/// with [`JsonStop::Size`] once `out` is past `max_bytes` (checked before each value, and
/// before a byte array that would surely pass it, at 24 bytes of limit per byte: `"i":b,`
/// is at least 6 characters of 4 bytes each), so a huge value is never written whole.
pub fn write_json(
    value: &Value,
    out: &mut String,
    depth: usize,
    max_depth: usize,
    max_bytes: usize,
) -> Result<(), JsonStop> {
    if out.len() > max_bytes {
        return Err(JsonStop::Size);
    }
    if depth > max_depth {
        return Err(JsonStop::Depth);
    }
    match value {
        Value::Undefined | Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if n.is_finite() => out.push_str(&js_number(*n)),
        Value::Number(_) => out.push_str("null"),
        Value::String(s) => write_json_string(s, out),
        Value::Bytes(bytes) => {
            if bytes.len() > max_bytes / 24 + 1 {
                return Err(JsonStop::Size);
            }
            out.push('{');
            for (i, b) in bytes.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!("\"{i}\":{b}"));
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out, depth + 1, max_depth, max_bytes)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            out.push('{');
            let mut first = true;
            for (key, item) in members {
                if matches!(item, Value::Undefined) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                write_json_string(key, out);
                out.push(':');
                write_json(item, out, depth + 1, max_depth, max_bytes)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// A JSON string as `JSON.stringify` writes it.
pub fn write_json_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// JavaScript's `String(n)` for a number (shortest round-trip digits, exponent past 1e21).
pub fn js_number(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if n == 0.0 {
        return "0".into();
    }
    let sci = format!("{:e}", n.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i64 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    let point = exponent + 1;
    let body = if k <= point && point <= 21 {
        format!("{digits}{}", "0".repeat((point - k) as usize))
    } else if 0 < point && point <= 21 {
        let (int, frac) = digits.split_at(point as usize);
        format!("{int}.{frac}")
    } else if -6 < point && point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else {
        let e = point - 1;
        let sign = if e >= 0 { "+" } else { "-" };
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        format!("{mantissa}e{sign}{}", e.abs())
    };
    if n < 0.0 { format!("-{body}") } else { body }
}

/// JavaScript's `String(value)`.
pub fn js_string(value: &Value) -> String {
    match value {
        Value::Undefined => "undefined".into(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => js_number(*n),
        Value::String(s) => s.clone(),
        Value::Bytes(b) => b.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Undefined | Value::Null => String::new(),
                v => js_string(v),
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
    }
}

/// JavaScript's whitespace (`\s`, and what `String.prototype.trim` strips): Unicode White_Space
/// without U+0085, plus the BOM.
pub fn is_js_space(c: char) -> bool {
    c == '\u{feff}' || (c.is_whitespace() && c != '\u{85}')
}

/// JavaScript's `s.trim()`.
pub fn js_trim(s: &str) -> &str {
    s.trim_matches(is_js_space)
}

/// JavaScript's `Number(value)` for the values an option can hold (a numeric string converts,
/// anything that is not a number is `NaN`).
pub fn js_to_number(value: &Value) -> f64 {
    match value {
        Value::Number(n) => *n,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Null => 0.0,
        Value::String(s) => {
            let s = js_trim(s);
            let (sign, digits) = match s.strip_prefix('-') {
                Some(rest) => (-1.0, rest),
                None => (1.0, s.strip_prefix('+').unwrap_or(s)),
            };
            if s.is_empty() {
                0.0
            } else if digits == "Infinity" {
                sign * f64::INFINITY
            } else if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                u64::from_str_radix(hex, 16).map_or(f64::NAN, |n| n as f64)
            } else if digits
                .bytes()
                .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
            {
                s.parse().unwrap_or(f64::NAN)
            } else {
                f64::NAN
            }
        }
        Value::Undefined | Value::Bytes(_) | Value::Array(_) | Value::Object(_) => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_json_stops_at_its_depth_and_size_before_writing_the_rest() {
        // As deep as the limit is fine; one level more stops, however deep the rest goes.
        let nest =
            |levels: usize| (0..levels).fold(Value::Null, |inner, _| Value::Array(vec![inner]));
        let mut out = String::new();
        assert_eq!(write_json(&nest(8), &mut out, 0, 8, usize::MAX), Ok(()));
        assert_eq!(out, format!("{}null{}", "[".repeat(8), "]".repeat(8)));
        let mut out = String::new();
        assert_eq!(
            write_json(&nest(1_000), &mut out, 0, 8, usize::MAX),
            Err(JsonStop::Depth)
        );
        assert!(out.len() <= 9, "{out}");
        // A byte array that would surely pass the size limit is refused before a byte of it is
        // written; a string past it stops the next value.
        let mut out = String::new();
        let bytes = Value::Bytes(vec![7; 64 * 1024 * 1024]);
        assert_eq!(
            write_json(&bytes, &mut out, 0, 8, 1024),
            Err(JsonStop::Size)
        );
        assert!(out.is_empty());
        let many = Value::Array(vec![Value::String("x".repeat(600)); 100_000]);
        let mut out = String::new();
        assert_eq!(write_json(&many, &mut out, 0, 8, 1024), Err(JsonStop::Size));
        assert!(out.len() <= 1024 + 2 * 603, "{}", out.len());
        // What JSON.stringify writes: undefined members left out, items as null, bytes by index.
        let value = Value::Object(vec![
            ("a".into(), Value::Undefined),
            (
                "b\n".into(),
                Value::Array(vec![Value::Undefined, Value::Number(f64::NAN)]),
            ),
            ("c".into(), Value::Bytes(vec![1, 2])),
        ]);
        let mut out = String::new();
        assert_eq!(write_json(&value, &mut out, 0, 8, usize::MAX), Ok(()));
        assert_eq!(out, r#"{"b\n":[null,null],"c":{"0":1,"1":2}}"#);
    }

    #[test]
    fn caps_by_one() {
        let at_cap = Value::String("x".repeat(MAX_HOST_INPUT_CHARS));
        assert!(require_text("csv.parse", Some(&at_cap), "text").is_ok());
        let over = Value::String("x".repeat(MAX_HOST_INPUT_CHARS + 1));
        assert_eq!(
            require_text("csv.parse", Some(&over), "text"),
            Err(HostError::new(
                HostErrorCode::InputTooLarge,
                "csv.parse: input exceeds the 5242880 character limit"
            ))
        );
        let bytes = Value::Bytes(vec![0; MAX_HOST_INPUT_BYTES + 1]);
        assert_eq!(
            require_bytes("zip.unzip", Some(&bytes), "bytes"),
            Err(HostError::new(
                HostErrorCode::InputTooLarge,
                "zip.unzip: input exceeds the 10485760 byte limit"
            ))
        );
        assert!(
            require_bytes("zip.unzip", Some(&Value::String("x".into())), "bytes")
                .err()
                .is_some_and(|e| e.code() == HostErrorCode::InvalidArgument
                    && e.message().contains("must be a Uint8Array"))
        );
        assert_eq!(
            require_text("csv.parse", None, "text"),
            Err(HostError::invalid("csv.parse: text must be a string"))
        );
    }

    #[test]
    fn options() {
        let o = vec![
            ("context".to_string(), Value::Number(1e9)),
            ("x".into(), Value::Number(f64::NAN)),
        ];
        assert_eq!(clamped_option(&o, "context", 3, 0, 100), 100);
        assert_eq!(clamped_option(&o, "x", 3, 0, 100), 3);
        assert_eq!(clamped_option(&o, "missing", 3, 0, 100), 3);
        assert!(bool_option(&[], "header", true));
    }

    #[test]
    fn javascript_conversions() {
        assert_eq!(js_trim("\u{feff}\u{a0} x \n"), "x");
        assert_eq!(js_trim("\u{85}x"), "\u{85}x");
        for (text, n) in [
            ("5", 5.0),
            (" 7.5 ", 7.5),
            ("", 0.0),
            ("-Infinity", f64::NEG_INFINITY),
            ("0x10", 16.0),
            ("1e3", 1000.0),
        ] {
            assert_eq!(js_to_number(&Value::String(text.into())), n, "{text:?}");
        }
        for text in ["abc", "inf", "nan", "5px", "0x"] {
            assert!(
                js_to_number(&Value::String(text.into())).is_nan(),
                "{text:?}"
            );
        }
        assert_eq!(js_to_number(&Value::Bool(true)), 1.0);
        assert!(js_to_number(&Value::Object(vec![])).is_nan());
    }
}
