//! The service helpers, `notion`, `supabase`, `twilio` and `apify`: each builds the request an
//! API expects (URL, method, headers, body) for the guest to send with its own `fetch`, or
//! reads what such an API returned (Notion's rich text and blocks).
//!
//! They act only through what the run was granted. Nothing here opens a connection: the guest
//! passes the prepared request to `fetch`, so the run's allowlist, its broker and its caps apply
//! to it as to any other request. Nothing here holds a secret: the token is an argument the guest
//! read with `getSecret`, and it goes only where the guest sends the request. No message quotes
//! a token, a key, a URL or a body, so an error cannot leak one into a log.
//!
//! A prepared request is `{ url, method, headers, body? }` (the reference's `PreparedRequest`):
//! `fetch(req.url, req)` sends it. `body` is absent for a request without one.

pub mod apify;
pub mod notion;
pub mod supabase;
pub mod twilio;

use nodetool_protocol::value::Value;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::error::HostError;
use crate::limits::{JsonStop, js_string, option};

/// The largest body a helper builds, in UTF-16 code units (JavaScript's `length`), as the
/// reference counts it.
pub const MAX_BODY_CHARS: usize = 1024 * 1024;

/// The longest URL a helper builds, in bytes (ours; the reference has none): a query bag that
/// fans out past it is refused rather than built.
pub const MAX_URL_BYTES: usize = 64 * 1024;

/// The deepest value a JSON body may nest (the guest's own conversion stops sooner).
const MAX_JSON_DEPTH: usize = 512;

/// What `encodeURIComponent` leaves alone: `A-Z a-z 0-9 - _ . ! ~ * ' ( )`.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// JavaScript's `encodeURIComponent`.
pub(crate) fn encode_component(text: &str) -> String {
    utf8_percent_encode(text, URI_COMPONENT).to_string()
}

/// A required non-empty string argument, or `<label> is required`.
pub(crate) fn require_string<'a>(
    at: &str,
    options: &'a [(String, Value)],
    label: &str,
) -> Result<&'a str, HostError> {
    match option(options, label) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(HostError::invalid(format!("{at}: {label} is required"))),
    }
}

/// An HTTP method, upper-cased, or `fallback` when absent.
pub(crate) fn method_of(
    at: &str,
    options: &[(String, Value)],
    fallback: &str,
) -> Result<String, HostError> {
    let Some(value) = option(options, "method") else {
        return Ok(fallback.to_string());
    };
    let text = js_string(value);
    let token = !text.is_empty()
        && text.len() <= 32
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
    if !token {
        return Err(HostError::invalid(format!(
            "{at}: method must be an HTTP method name such as \"GET\" or \"POST\""
        )));
    }
    Ok(text.to_ascii_uppercase())
}

/// A header value built from an argument: it may not break the header's line.
pub(crate) fn header_value(at: &str, label: &str, text: String) -> Result<String, HostError> {
    if text.chars().any(|c| c.is_control() && c != '\t') {
        return Err(HostError::invalid(format!(
            "{at}: {label} has a line break or control character"
        )));
    }
    Ok(text)
}

/// A query as `URLSearchParams` holds it: its pairs, and whether one was set or appended.
#[derive(Default)]
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
    touched: bool,
}

impl Params {
    /// `searchParams.set`: the first pair named `key` takes the value and the others go, or
    /// the pair is appended.
    pub(crate) fn set(&mut self, key: &str, value: String) {
        self.touched = true;
        match self.pairs.iter().position(|(k, _)| k == key) {
            Some(first) => {
                self.pairs[first].1 = value;
                let mut i = 0;
                self.pairs.retain(|(k, _)| {
                    i += 1;
                    i - 1 == first || k != key
                });
            }
            None => self.pairs.push((key.to_string(), value)),
        }
    }

    /// `searchParams.append`.
    pub(crate) fn append(&mut self, key: &str, value: String) {
        self.touched = true;
        self.pairs.push((key.to_string(), value));
    }

    /// The reference's `withQuery`: each present entry of a query bag set, an array's items
    /// appended under one key.
    pub(crate) fn with_query(&mut self, query: Option<&Value>) {
        let Some(Value::Object(members)) = query else {
            return;
        };
        for (key, value) in members {
            match value {
                Value::Undefined | Value::Null => {}
                Value::Array(items) => {
                    for item in items {
                        if !matches!(item, Value::Undefined | Value::Null) {
                            self.append(key, js_string(item));
                        }
                    }
                }
                value => self.set(key, js_string(value)),
            }
        }
    }
}

/// A URL whose query is edited as `url.searchParams`: the list is written back into the URL
/// (form-encoded, `+` for a space) only once something was set or appended, as the URL
/// standard's update steps do.
pub(crate) struct Target {
    url: url::Url,
    /// Its query's pairs.
    pub(crate) params: Params,
}

impl Target {
    pub(crate) fn new(url: url::Url) -> Target {
        let pairs = url
            .query_pairs()
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        Target {
            url,
            params: Params {
                pairs,
                touched: false,
            },
        }
    }

    /// The URL as text, its query rewritten if touched; refused past [`MAX_URL_BYTES`].
    pub(crate) fn finish(mut self, at: &str) -> Result<String, HostError> {
        if self.params.touched {
            let query = form_encode(&self.params.pairs);
            self.url
                .set_query((!query.is_empty()).then_some(query.as_str()));
        }
        let text = self.url.to_string();
        if text.len() > MAX_URL_BYTES {
            return Err(HostError::limit(format!(
                "{at}: the URL would pass the {MAX_URL_BYTES} byte limit"
            )));
        }
        Ok(text)
    }
}

/// `application/x-www-form-urlencoded` text of pairs, as `URLSearchParams.toString()`.
fn form_encode(pairs: &[(String, String)]) -> String {
    let mut serializer = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        serializer.append_pair(k, v);
    }
    serializer.finish()
}

/// The reference's `formBody`: a parameter bag form-encoded (absent entries dropped, arrays
/// repeated), refused past [`MAX_BODY_CHARS`].
pub(crate) fn form_body(at: &str, params: Option<&Value>) -> Result<String, HostError> {
    let mut bag = Params::default();
    bag.with_query(params);
    let text = form_encode(&bag.pairs);
    check_body(at, &text)?;
    Ok(text)
}

fn check_body(at: &str, text: &str) -> Result<(), HostError> {
    if text.len() > MAX_BODY_CHARS && text.encode_utf16().count() > MAX_BODY_CHARS {
        return Err(HostError::limit(format!(
            "{at}: body exceeds the {MAX_BODY_CHARS} character limit"
        )));
    }
    Ok(())
}

/// `JSON.stringify(value ?? {})`, refused past [`MAX_BODY_CHARS`] (the writing stops there).
pub(crate) fn json_body(at: &str, value: Option<&Value>) -> Result<String, HostError> {
    let mut out = String::new();
    match value {
        None | Some(Value::Undefined | Value::Null) => out.push_str("{}"),
        Some(value) => write_json(at, value, 0, &mut out)?,
    }
    check_body(at, &out)?;
    Ok(out)
}

/// [`crate::limits::write_json`] under the body's caps, its stops named for the guest.
fn write_json(at: &str, value: &Value, depth: usize, out: &mut String) -> Result<(), HostError> {
    // Four bytes per UTF-16 unit at most: past this the body is surely over the cap.
    crate::limits::write_json(value, out, depth, MAX_JSON_DEPTH, 4 * MAX_BODY_CHARS).map_err(
        |stop| match stop {
            JsonStop::Size => HostError::limit(format!(
                "{at}: body exceeds the {MAX_BODY_CHARS} character limit"
            )),
            JsonStop::Depth => HostError::limit(format!(
                "{at}: body nests more than {MAX_JSON_DEPTH} levels deep"
            )),
        },
    )
}

/// A prepared request: `{ url, method, headers, body? }`.
pub(crate) fn prepared(
    url: String,
    method: String,
    headers: Vec<(&str, String)>,
    body: Option<String>,
) -> Value {
    let mut members = vec![
        ("url".to_string(), Value::String(url)),
        ("method".into(), Value::String(method)),
        (
            "headers".into(),
            Value::Object(
                headers
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v)))
                    .collect(),
            ),
        ),
    ];
    if let Some(body) = body {
        members.push(("body".into(), Value::String(body)));
    }
    Value::Object(members)
}

/// `base` joined with `path`, which must stay on `base`'s origin (a path such as
/// `//elsewhere.example/` would otherwise take the request, and its token, to another host).
pub(crate) fn on_origin(at: &str, base: &url::Url, path: &str) -> Result<url::Url, HostError> {
    let joined = base
        .join(path)
        .map_err(|_| HostError::invalid(format!("{at}: path is not a valid URL path")))?;
    if joined.origin() != base.origin() {
        return Err(HostError::invalid(format!(
            "{at}: path must stay on {}",
            base.host_str().unwrap_or_default()
        )));
    }
    Ok(joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_matches_javascript() {
        let v = Value::Object(vec![
            ("a".into(), Value::Number(1.5)),
            ("skip".into(), Value::Undefined),
            ("n".into(), Value::Number(f64::NAN)),
            ("s".into(), Value::String("q\"\\\n\u{1}é😀".into())),
            (
                "l".into(),
                Value::Array(vec![
                    Value::Undefined,
                    Value::Number(-0.0),
                    Value::Bool(true),
                ]),
            ),
            ("b".into(), Value::Bytes(vec![7, 8])),
            ("big".into(), Value::Number(1e21)),
        ]);
        assert_eq!(
            json_body("t.x", Some(&v)).ok().as_deref(),
            Some(
                r#"{"a":1.5,"n":null,"s":"q\"\\\n\u0001é😀","l":[null,0,true],"b":{"0":7,"1":8},"big":1e+21}"#
            )
        );
        assert_eq!(json_body("t.x", None).ok().as_deref(), Some("{}"));
    }

    #[test]
    fn search_params_set_and_append() {
        let url = url::Url::parse("https://x.test/p?a=1&b=2&a=3").unwrap_or_else(|e| panic!("{e}"));
        let mut t = Target::new(url);
        t.params.set("a", "z z".into());
        t.params.append("c", "*+~".into());
        assert_eq!(
            t.finish("t.x").ok().as_deref(),
            Some("https://x.test/p?a=z+z&b=2&c=*%2B%7E")
        );
        // Untouched, the query stays as written.
        let url = url::Url::parse("https://x.test/p?a=1%20").unwrap_or_else(|e| panic!("{e}"));
        let mut t = Target::new(url);
        t.params
            .with_query(Some(&Value::Object(vec![("x".into(), Value::Null)])));
        assert_eq!(
            t.finish("t.x").ok().as_deref(),
            Some("https://x.test/p?a=1%20")
        );
    }

    #[test]
    fn encode_component_is_javascripts() {
        assert_eq!(encode_component("a/b c~!*'()é"), "a%2Fb%20c~!*'()%C3%A9");
    }

    #[test]
    fn body_cap_holds_without_building_a_huge_string() {
        let huge = Value::Array(vec![Value::String("x".repeat(1000)); 100_000]);
        let e = json_body("t.x", Some(&huge)).err();
        assert_eq!(
            e.map(|e| e.code()),
            Some(crate::error::HostErrorCode::LimitExceeded)
        );
        let deep = (0..600).fold(Value::Null, |v, _| Value::Array(vec![v]));
        assert!(json_body("t.x", Some(&deep)).is_err());
    }
}
