//! The shared input rules of host modules: text and byte caps, argument shapes, and the
//! messages every module uses for them (`<id>.<export>: ...`).

use nodetool_protocol::limits::{MAX_HOST_INPUT_BYTES, MAX_HOST_INPUT_CHARS};
use nodetool_protocol::value::Value;

/// A text argument: a string of at most 5 MiB characters.
pub fn require_text<'a>(
    at: &str,
    value: Option<&'a Value>,
    label: &str,
) -> Result<&'a str, String> {
    match value {
        Some(Value::String(s)) => {
            // Characters, as the reference counts them (UTF-16 code units there; chars here,
            // which never exceed them).
            if s.len() > MAX_HOST_INPUT_CHARS && s.chars().count() > MAX_HOST_INPUT_CHARS {
                Err(format!(
                    "{at}: input exceeds the {MAX_HOST_INPUT_CHARS} character limit"
                ))
            } else {
                Ok(s)
            }
        }
        _ => Err(format!("{at}: {label} must be a string")),
    }
}

/// A binary argument: bytes (a Uint8Array in the guest) of at most 10 MiB.
pub fn require_bytes<'a>(
    at: &str,
    value: Option<&'a Value>,
    label: &str,
) -> Result<&'a [u8], String> {
    match value {
        Some(Value::Bytes(b)) if b.len() > MAX_HOST_INPUT_BYTES => Err(format!(
            "{at}: input exceeds the {MAX_HOST_INPUT_BYTES} byte limit"
        )),
        Some(Value::Bytes(b)) => Ok(b),
        _ => Err(format!(
            "{at}: {label} must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())"
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_by_one() {
        let at_cap = Value::String("x".repeat(MAX_HOST_INPUT_CHARS));
        assert!(require_text("csv.parse", Some(&at_cap), "text").is_ok());
        let over = Value::String("x".repeat(MAX_HOST_INPUT_CHARS + 1));
        assert_eq!(
            require_text("csv.parse", Some(&over), "text"),
            Err("csv.parse: input exceeds the 5242880 character limit".into())
        );
        let bytes = Value::Bytes(vec![0; MAX_HOST_INPUT_BYTES + 1]);
        assert_eq!(
            require_bytes("zip.unzip", Some(&bytes), "bytes"),
            Err("zip.unzip: input exceeds the 10485760 byte limit".into())
        );
        assert!(
            require_bytes("zip.unzip", Some(&Value::String("x".into())), "bytes")
                .err()
                .unwrap_or_default()
                .contains("must be a Uint8Array")
        );
        assert_eq!(
            require_text("csv.parse", None, "text"),
            Err("csv.parse: text must be a string".into())
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
}
