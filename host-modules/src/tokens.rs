//! `tokens`: tiktoken token counts, ids and text (the `tiktoken-rs` crate, whose rank files are
//! compiled into the binary, so a confined worker that cannot open files encodes as well).
//!
//! The encodings are the reference's four: `cl100k_base` (the default), `o200k_base`,
//! `p50k_base` and `r50k_base`. Each is built once per process, on first use (the BPE tables
//! take a few hundred milliseconds and some tens of MiB to build), and shared by every later
//! call. Ids are js-tiktoken's, id for id (`host-modules/tests/tokens_interop.rs` checks it).
//!
//! Differences from the reference (js-tiktoken's defaults), each on purpose:
//! - Text that contains a special token's spelling (`<|endoftext|>`) is encoded as the ordinary
//!   text it is: js-tiktoken throws for it by default, which made counting a document that
//!   mentions one impossible. A model API treats such text the same way.
//! - `decode` refuses an id that is not in the encoding (js-tiktoken skips it silently, so the
//!   text came back shorter with no sign of why).
//! - `encode`'s result and `decode`'s argument are capped at [`MAX_TOKEN_IDS`] ids.
//!
//! Cost: the BPE merge of one regex piece is O(n log n) in the crate (a heap for pieces of 100
//! bytes and more), so a 5 MiB "word" costs the same order as 5 MiB of prose: one bounded pass.
//! The text is encoded in chunks of about 64 KiB cut where the ids cannot change (see
//! [`chunks`]), and the run's deadline is checked between them.

use std::sync::OnceLock;

use nodetool_protocol::value::Value;
use tiktoken_rs::CoreBPE;

use crate::error::HostError;
use crate::limits::{MAX_RESULT_BYTES, require_text};

/// Ids `encode` may return and `decode` may take: 2 Mi. A guest array of that many numbers is
/// 32 MiB of its 64 MiB heap, and 5 MiB characters of prose encode to about 1.3 Mi ids.
pub const MAX_TOKEN_IDS: usize = 2 * 1024 * 1024;

/// The encodings, in the reference's order of its error message.
pub const ENCODINGS: [&str; 4] = ["cl100k_base", "p50k_base", "r50k_base", "o200k_base"];

/// One encoding's tables, once built (`None` if building failed).
type Built = OnceLock<Option<CoreBPE>>;

/// One encoding, built on first use.
fn bpe(at: &str, name: &str) -> Result<&'static CoreBPE, HostError> {
    static CL100K: Built = OnceLock::new();
    static P50K: Built = OnceLock::new();
    static R50K: Built = OnceLock::new();
    static O200K: Built = OnceLock::new();
    // The crate's builders fail only on a defect of its compiled-in rank files.
    let (cell, build): (&Built, fn() -> Option<CoreBPE>) = match name {
        "cl100k_base" => (&CL100K, || tiktoken_rs::cl100k_base().ok()),
        "p50k_base" => (&P50K, || tiktoken_rs::p50k_base().ok()),
        "r50k_base" => (&R50K, || tiktoken_rs::r50k_base().ok()),
        "o200k_base" => (&O200K, || tiktoken_rs::o200k_base().ok()),
        _ => return Err(encoding_error(at)),
    };
    cell.get_or_init(build).as_ref().ok_or_else(|| {
        HostError::new(
            crate::error::HostErrorCode::Internal,
            format!("{at}: the {name} tables could not be built"),
        )
    })
}

fn encoding_error(at: &str) -> HostError {
    HostError::invalid(format!(
        "{at}: encoding must be one of {}",
        ENCODINGS.join(", ")
    ))
}

/// The encoding an argument names (absent or null: `cl100k_base`).
fn encoding_of<'a>(at: &str, value: Option<&'a Value>) -> Result<&'a str, HostError> {
    match value {
        None | Some(Value::Undefined | Value::Null) => Ok("cl100k_base"),
        Some(Value::String(s)) if ENCODINGS.contains(&s.as_str()) => Ok(s),
        Some(_) => Err(encoding_error(at)),
    }
}

/// Bytes of text encoded between two deadline checks (at least: a chunk ends at the next
/// place it can, see [`chunks`]).
const CHUNK_BYTES: usize = 64 * 1024;

/// `text` cut into pieces that encode to the same ids apart as together, each at least
/// [`CHUNK_BYTES`] long but the last. A cut goes only between an ASCII letter and a space that
/// is followed by an ASCII letter (`"word| word"`): in every encoding's pattern a run of letters
/// ends at a space and a space is taken by the word after it, no piece starts before such a
/// place and ends after it, and what a piece matches depends only on the text after its start,
/// so each side tokenizes alone as it does in place. A text with no such place (a 5 MiB word)
/// is one chunk, which the crate encodes in O(n log n).
fn chunks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let bytes = rest.as_bytes();
        let mut cut = rest.len();
        let mut i = CHUNK_BYTES.max(1);
        while i + 1 < bytes.len() {
            if bytes[i] == b' '
                && bytes[i - 1].is_ascii_alphabetic()
                && bytes[i + 1].is_ascii_alphabetic()
            {
                cut = i;
                break;
            }
            i += 1;
        }
        let (chunk, after) = rest.split_at(cut);
        rest = after;
        Some(chunk)
    })
}

/// The run's deadline, checked between chunks.
fn check_deadline(at: &str) -> Result<(), HostError> {
    if crate::call_deadline().is_some_and(|d| std::time::Instant::now() >= d) {
        return Err(HostError::deadline(format!(
            "{at}: stopped at the run's deadline"
        )));
    }
    Ok(())
}

/// `count(text, encoding?)` -> how many tokens `text` is.
pub fn count(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "tokens.count";
    let text = require_text(AT, args.first(), "text")?;
    let encoding = encoding_of(AT, args.get(1))?;
    if text.is_empty() {
        return Ok(Value::Number(0.0));
    }
    let bpe = bpe(AT, encoding)?;
    let mut n = 0;
    for chunk in chunks(text) {
        check_deadline(AT)?;
        n += bpe.count_ordinary(chunk);
    }
    Ok(Value::Number(n as f64))
}

/// `encode(text, encoding?)` -> the token ids of `text`.
pub fn encode(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "tokens.encode";
    let text = require_text(AT, args.first(), "text")?;
    let encoding = encoding_of(AT, args.get(1))?;
    if text.is_empty() {
        return Ok(Value::Array(Vec::new()));
    }
    let bpe = bpe(AT, encoding)?;
    let mut ids = Vec::new();
    for chunk in chunks(text) {
        check_deadline(AT)?;
        ids.extend(bpe.encode_ordinary(chunk));
        if ids.len() > MAX_TOKEN_IDS {
            break;
        }
    }
    if ids.len() > MAX_TOKEN_IDS {
        return Err(HostError::output(format!(
            "{AT}: the text is more than {MAX_TOKEN_IDS} tokens, the id limit of one call; encode it in parts"
        )));
    }
    Ok(Value::Array(
        ids.into_iter()
            .map(|id| Value::Number(f64::from(id)))
            .collect(),
    ))
}

/// `decode(ids, encoding?)` -> the text the ids spell (bytes that are not UTF-8, as a cut
/// through a character, become U+FFFD, as js-tiktoken's TextDecoder makes them).
pub fn decode(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "tokens.decode";
    let Some(Value::Array(items)) = args.first() else {
        return Err(HostError::invalid(format!(
            "{AT}: tokens must be an array of token ids"
        )));
    };
    if items.len() > MAX_TOKEN_IDS {
        return Err(HostError::limit(format!(
            "{AT}: {} token ids pass the {MAX_TOKEN_IDS} id limit of one call; decode them in parts",
            items.len()
        )));
    }
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        let n = crate::limits::js_to_number(item);
        if !(n.is_finite() && n >= 0.0 && n.fract() == 0.0) {
            return Err(HostError::invalid(format!(
                "{AT}: tokens must be non-negative integers"
            )));
        }
        // Past u32 no encoding has the id: refused below as an unknown one.
        ids.push(u32::try_from(n as u64).unwrap_or(u32::MAX));
    }
    let encoding = encoding_of(AT, args.get(1))?;
    if ids.is_empty() {
        return Ok(Value::String(String::new()));
    }
    let bytes = bpe(AT, encoding)?.decode_bytes(&ids).map_err(|e| {
        HostError::invalid(format!("{AT}: {} is not a token id of {encoding}", e.token))
    })?;
    // No token is longer than 128 bytes, but 2 Mi long ones would pass the result cap.
    if bytes.len() > MAX_RESULT_BYTES {
        return Err(HostError::output(format!(
            "{AT}: the text would pass the {MAX_RESULT_BYTES} byte result limit"
        )));
    }
    Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HostErrorCode;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    fn ids(v: Value) -> Vec<u32> {
        match v {
            Value::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    Value::Number(n) => n as u32,
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn known_ids_and_round_trip() {
        // "hello world" is [15339, 1917] in cl100k_base and [24912, 2375] in o200k_base.
        assert_eq!(
            ids(encode(&[s("hello world")]).unwrap_or_else(|e| panic!("{e}"))),
            vec![15339, 1917]
        );
        assert_eq!(
            ids(encode(&[s("hello world"), s("o200k_base")]).unwrap_or_else(|e| panic!("{e}"))),
            vec![24912, 2375]
        );
        for encoding in ENCODINGS {
            let text = "Grüße, 世界! 🎉 fn main() { let x = 42; }\n\n\t  end";
            let v = encode(&[s(text), s(encoding)]).unwrap_or_else(|e| panic!("{e}"));
            let n = match &v {
                Value::Array(a) => a.len(),
                _ => unreachable!(),
            };
            assert_eq!(
                count(&[s(text), s(encoding)]).unwrap_or_else(|e| panic!("{e}")),
                Value::Number(n as f64)
            );
            assert_eq!(
                decode(&[v, s(encoding)]).unwrap_or_else(|e| panic!("{e}")),
                s(text),
                "{encoding}"
            );
        }
    }

    #[test]
    fn empty_and_defaults() {
        assert_eq!(
            count(&[s("")]).unwrap_or_else(|e| panic!("{e}")),
            Value::Number(0.0)
        );
        assert_eq!(
            encode(&[s(""), Value::Null]).unwrap_or_else(|e| panic!("{e}")),
            Value::Array(vec![])
        );
        assert_eq!(
            decode(&[Value::Array(vec![])]).unwrap_or_else(|e| panic!("{e}")),
            s("")
        );
    }

    #[test]
    fn special_token_spelling_is_ordinary_text() {
        let v = ids(encode(&[s("<|endoftext|>")]).unwrap_or_else(|e| panic!("{e}")));
        assert!(v.len() > 1 && !v.contains(&100257), "{v:?}");
        // The special id itself still decodes.
        assert_eq!(
            decode(&[Value::Array(vec![Value::Number(100257.0)])])
                .unwrap_or_else(|e| panic!("{e}")),
            s("<|endoftext|>")
        );
    }

    #[test]
    fn refusals() {
        let e = count(&[s("x"), s("gpt2")])
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert_eq!(e.code(), HostErrorCode::InvalidArgument);
        assert_eq!(
            e.message(),
            "tokens.count: encoding must be one of cl100k_base, p50k_base, r50k_base, o200k_base"
        );
        let e = count(&[Value::Number(1.0)])
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert_eq!(e.message(), "tokens.count: text must be a string");
        let e = decode(&[s("1,2")])
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert_eq!(
            e.message(),
            "tokens.decode: tokens must be an array of token ids"
        );
        for bad in [
            Value::Number(-1.0),
            Value::Number(1.5),
            s("x"),
            Value::Undefined,
        ] {
            let e = decode(&[Value::Array(vec![bad.clone()])])
                .err()
                .unwrap_or_else(|| panic!("expected an error"));
            assert_eq!(
                e.message(),
                "tokens.decode: tokens must be non-negative integers",
                "{bad:?}"
            );
        }
        let e = decode(&[Value::Array(vec![Value::Number(5e9)])])
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert!(
            e.message().contains("is not a token id of cl100k_base"),
            "{e}"
        );
        let e = decode(&[Value::Array(vec![Value::Number(200_000.0)])])
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert_eq!(
            e.message(),
            "tokens.decode: 200000 is not a token id of cl100k_base"
        );
        // A numeric string is a number, as `Number(token)` makes it.
        assert_eq!(
            decode(&[Value::Array(vec![s("15339")])]).unwrap_or_else(|e| panic!("{e}")),
            s("hello")
        );
    }

    /// A long mixed text: prose, code, scripts, emoji, whitespace runs, contractions.
    fn long_text() -> String {
        let parts = [
            "The quick brown fox jumps over the lazy dog. ",
            "It's what they'LL say: \"we've\" DONE it. ",
            "fn main() {\n    let x = 42;\n}\n\n",
            "日本語のテキスト。 Привет мир. ",
            "🎉👍🏽 emoji 🇩🇪 ",
            "   \t  \n\n   spaces   ",
            "HelloWorld ABC def 12345 3.14 ",
        ];
        let mut out = String::new();
        let mut i = 0usize;
        while out.len() < 600_000 {
            out.push_str(parts[(i * 7 + i / 3) % parts.len()]);
            i += 1;
        }
        out
    }

    #[test]
    fn chunked_encoding_equals_whole_text_encoding() {
        let text = long_text();
        assert!(chunks(&text).count() > 5);
        assert_eq!(chunks(&text).collect::<String>(), text);
        for encoding in ENCODINGS {
            let whole = bpe("t", encoding)
                .unwrap_or_else(|e| panic!("{e}"))
                .encode_ordinary(&text);
            let v = ids(encode(&[s(&text), s(encoding)]).unwrap_or_else(|e| panic!("{e}")));
            assert!(v == whole, "{encoding}: chunked ids differ");
        }
    }

    #[test]
    fn a_passed_deadline_stops_a_long_count() {
        let text = long_text();
        crate::CALL.with(|call| {
            *call.borrow_mut() = Some(("tokens.count".into(), std::time::Instant::now()))
        });
        let e = count(&[s(&text)]).err();
        crate::CALL.with(|call| *call.borrow_mut() = None);
        let e = e.unwrap_or_else(|| panic!("expected the deadline"));
        assert_eq!(e.code(), HostErrorCode::DeadlineExceeded);
        assert_eq!(e.message(), "tokens.count: stopped at the run's deadline");
    }

    #[test]
    fn decode_ids_are_capped() {
        let over = Value::Array(vec![Value::Number(0.0); MAX_TOKEN_IDS + 1]);
        let e = decode(&[over])
            .err()
            .unwrap_or_else(|| panic!("expected an error"));
        assert_eq!(e.code(), HostErrorCode::LimitExceeded);
        assert!(e.message().contains("2097152 id limit"), "{e}");
    }

    #[test]
    fn a_cut_character_decodes_to_the_replacement() {
        // "🎉" is several byte tokens in r50k_base; its first alone is a cut character.
        let v = ids(encode(&[s("🎉"), s("r50k_base")]).unwrap_or_else(|e| panic!("{e}")));
        assert!(v.len() > 1);
        let first = Value::Array(vec![Value::Number(f64::from(v[0]))]);
        assert_eq!(
            decode(&[first, s("r50k_base")]).unwrap_or_else(|e| panic!("{e}")),
            s("\u{fffd}")
        );
    }
}
