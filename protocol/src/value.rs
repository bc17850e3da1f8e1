//! The values that cross the guest boundary: inputs, results, log arguments and dispatcher
//! arguments. JSON-compatible data plus bytes (any typed array crosses as bytes), with
//! `undefined` kept apart from `null` so a body that returns nothing says so.
//!
//! On the wire (CLI `--json`, HTTP) bytes are `{"$bytes": "<standard base64>"}` and
//! `undefined` is `null`.

use std::fmt;

use base64::Engine as _;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A value that crosses the guest boundary.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `undefined` (serialized as `null`).
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number (JavaScript numbers are doubles; NaN and infinities serialize as `null`).
    Number(f64),
    /// A string.
    String(String),
    /// Bytes: a `Uint8Array` in the guest (any typed array or ArrayBuffer on the way in).
    Bytes(Vec<u8>),
    /// An array.
    Array(Vec<Value>),
    /// A plain object, keys in insertion order.
    Object(Vec<(String, Value)>),
}

/// The key that marks bytes in JSON.
pub const BYTES_KEY: &str = "$bytes";

/// The map key serde_json's `arbitrary_precision` feature carries a number's text under.
const ARBITRARY_PRECISION_NUMBER_KEY: &str = "$serde_json::private::Number";

impl Value {
    /// An object's member by key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Converts plain JSON (with `{"$bytes": ...}` decoded back into bytes).
    pub fn from_json(json: serde_json::Value) -> Value {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(b),
            serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Value::String(s),
            serde_json::Value::Array(a) => {
                Value::Array(a.into_iter().map(Value::from_json).collect())
            }
            serde_json::Value::Object(o) => {
                if o.len() == 1
                    && let Some(serde_json::Value::String(b64)) = o.get(BYTES_KEY)
                    && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64)
                {
                    return Value::Bytes(bytes);
                }
                Value::Object(
                    o.into_iter()
                        .map(|(k, v)| (k, Value::from_json(v)))
                        .collect(),
                )
            }
        }
    }

    /// Converts to plain JSON (bytes as `{"$bytes": ...}`, `undefined` and non-finite numbers as
    /// `null`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Undefined | Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(n) if !n.is_finite() => serializer.serialize_unit(),
            Value::Number(n) if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 => {
                // Integral doubles print as integers (`42`, not `42.0`), as JSON.stringify does.
                serializer.serialize_i64(*n as i64)
            }
            Value::Number(n) => serializer.serialize_f64(*n),
            Value::String(s) => serializer.serialize_str(s),
            Value::Bytes(b) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(
                    BYTES_KEY,
                    &base64::engine::general_purpose::STANDARD.encode(b),
                )?;
                map.end()
            }
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (k, v) in members {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
                Ok(Value::Bool(b))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
                Ok(Value::Number(n as f64))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
                Ok(Value::Number(n as f64))
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
                Ok(Value::Number(n))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
                Ok(Value::String(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
                Ok(Value::String(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(Value::Array(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let mut members: Vec<(String, Value)> = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    members.push((k, v));
                }
                if let [(k, Value::String(b64))] = members.as_slice()
                    && k == BYTES_KEY
                    && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64)
                {
                    return Ok(Value::Bytes(bytes));
                }
                // serde_json's `arbitrary_precision` (on in this workspace: rolldown needs it)
                // hands a number to `deserialize_any` as a one-entry map holding its text.
                if let [(k, Value::String(text))] = members.as_slice()
                    && k == ARBITRARY_PRECISION_NUMBER_KEY
                    && let Ok(n) = text.parse::<f64>()
                {
                    return Ok(Value::Number(n));
                }
                Ok(Value::Object(members))
            }
        }
        deserializer.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arbitrary_precision_number_reads_as_a_number() {
        let v: Value =
            serde_json::from_str(r#"{"x": {"$serde_json::private::Number": "0.25"}, "y": 0.5}"#)
                .unwrap_or(Value::Null);
        assert_eq!(v.get("x"), Some(&Value::Number(0.25)));
        assert_eq!(v.get("y"), Some(&Value::Number(0.5)));
    }

    #[test]
    fn json_round_trip_with_bytes() {
        let v = Value::Object(vec![
            ("n".into(), Value::Number(42.0)),
            ("f".into(), Value::Number(0.5)),
            ("b".into(), Value::Bytes(vec![1, 2, 3])),
            ("u".into(), Value::Undefined),
            (
                "a".into(),
                Value::Array(vec![Value::Bool(true), Value::Null]),
            ),
        ]);
        let text = serde_json::to_string(&v).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"n":42,"f":0.5,"b":{"$bytes":"AQID"},"u":null,"a":[true,null]}"#
        );
        let back: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert_eq!(back.get("b"), Some(&Value::Bytes(vec![1, 2, 3])));
        assert_eq!(back.get("u"), Some(&Value::Null));
        assert_eq!(
            Value::from_json(serde_json::json!({"$bytes": "AQID"})),
            Value::Bytes(vec![1, 2, 3])
        );
        assert_eq!(Value::Number(f64::NAN).to_json(), serde_json::Value::Null);
    }
}
