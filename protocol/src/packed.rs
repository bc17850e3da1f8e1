//! A value packed for its trip into the guest: a byte tape, one text buffer and a key table,
//! instead of a tree of [`Value`]s.
//!
//! A host module whose result is many small values (`csv.parse`: a record per row, a string per
//! field) writes them through a [`PackedWriter`]: a few growing buffers rather than an
//! allocation per string, per key and per record, and nothing to free one by one afterwards.
//! Each distinct object key is stored once, so the guest can make it a property key once per
//! result rather than once per use. [`Packed::to_value`] expands it into the same [`Value`]
//! it stands for (for callers that are not the guest, and for tests).
//!
//! A string that is likely to repeat (a column of city names) can be written shared
//! ([`PackedWriter::shared_string`], through a [`SharedCache`] per stream of such strings): its
//! text is stored once, and every later occurrence is a reference to it, so the guest makes one
//! JavaScript string for all of them. Strings are values in JavaScript, so sharing one cannot
//! be observed.
//!
//! The tape is a sequence of one-byte tags: scalars (numbers carry 8 bytes, strings and bytes a
//! LEB128 length; a shared string's first occurrence a length, a repeat the LEB128 index of
//! that first occurrence among the shared ones), `ARRAY` and `OBJECT` opening a container that
//! `END` closes, and inside an object `KEY` plus a LEB128 key index before each member's value.
//! String contents live in order in one `String`, so reading them back needs no UTF-8
//! validation, only boundary checks.

use std::collections::HashMap;
use std::fmt;

use crate::value::Value;

const UNDEFINED: u8 = 0;
const NULL: u8 = 1;
const FALSE: u8 = 2;
const TRUE: u8 = 3;
const NUMBER: u8 = 4;
const STRING: u8 = 5;
const BYTES: u8 = 6;
const ARRAY: u8 = 7;
const OBJECT: u8 = 8;
const END: u8 = 9;
const KEY: u8 = 10;
const SHARED: u8 = 11;
const AGAIN: u8 = 12;

/// The longest string [`PackedWriter::shared_string`] shares (longer ones rarely repeat).
pub const MAX_SHARED_LEN: usize = 64;
/// The most distinct shared strings one packed value holds; later ones are written plainly.
pub const MAX_SHARED: usize = 1 << 16;

/// A packed value (see the module documentation). Built only by [`PackedWriter::finish`],
/// which checks that the tape holds exactly one well-formed value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Packed {
    tape: Vec<u8>,
    text: String,
    keys: Vec<String>,
}

/// A key interned in a [`PackedWriter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyId(u32);

/// Why a packed value could not be written or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedError(pub String);

impl fmt::Display for PackedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An open container while writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Array,
    /// An object; `true` while a key waits for its value.
    Object(bool),
}

/// Writes one value into a [`Packed`]: scalars, `begin_array`/`begin_object` ... `end`, and
/// inside an object [`member`](PackedWriter::member) before each value. A misuse (a value
/// without its key, an unbalanced `end`, a second root) is reported by `finish`.
#[derive(Debug, Default)]
pub struct PackedWriter {
    tape: Vec<u8>,
    text: String,
    keys: Vec<String>,
    index: HashMap<String, u32>,
    open: Vec<Open>,
    done: bool,
    error: Option<&'static str>,
    /// Each shared string's place in `text`, by index.
    shared: Vec<(usize, usize)>,
}

/// Where a [`PackedWriter`] finds the shared strings already written for one stream of
/// likely-repeating strings (say, a column): a direct-mapped table from a string's hash to its
/// index, made on first use. The first string to land in a slot keeps it; another string with
/// the same slot is written plainly, so collisions cost a plain write, never a growing table.
#[derive(Debug, Default, Clone)]
pub struct SharedCache {
    slots: Vec<u32>,
}

impl SharedCache {
    /// Slots per cache (a power of two).
    const SLOTS: usize = 1 << 12;

    /// An empty cache (it allocates on first use).
    pub fn new() -> SharedCache {
        SharedCache::default()
    }
}

impl PackedWriter {
    /// An empty writer.
    pub fn new() -> PackedWriter {
        PackedWriter::default()
    }

    /// An empty writer with room for `tape` tape bytes and `text` bytes of string contents.
    pub fn with_capacity(tape: usize, text: usize) -> PackedWriter {
        PackedWriter {
            tape: Vec::with_capacity(tape),
            text: String::with_capacity(text),
            ..PackedWriter::default()
        }
    }

    /// The id of `name` as an object key (interned: the same name, the same id).
    pub fn key(&mut self, name: &str) -> KeyId {
        if let Some(&id) = self.index.get(name) {
            return KeyId(id);
        }
        let Ok(id) = u32::try_from(self.keys.len()) else {
            self.fail("too many distinct keys");
            return KeyId(0);
        };
        self.keys.push(name.to_string());
        self.index.insert(name.to_string(), id);
        KeyId(id)
    }

    /// Names the object member whose value is written next.
    pub fn member(&mut self, key: KeyId) {
        match self.open.last_mut() {
            Some(Open::Object(waiting @ false)) => *waiting = true,
            _ => self.fail("a key outside an object, or two keys in a row"),
        }
        self.tape.push(KEY);
        push_length(&mut self.tape, key.0 as usize);
    }

    /// `undefined`.
    pub fn undefined(&mut self) {
        self.scalar(UNDEFINED);
    }

    /// `null`.
    pub fn null(&mut self) {
        self.scalar(NULL);
    }

    /// A boolean.
    pub fn bool(&mut self, b: bool) {
        self.scalar(if b { TRUE } else { FALSE });
    }

    /// A number.
    pub fn number(&mut self, n: f64) {
        self.scalar(NUMBER);
        self.tape.extend_from_slice(&n.to_le_bytes());
    }

    /// A string.
    pub fn string(&mut self, s: &str) {
        self.scalar(STRING);
        push_length(&mut self.tape, s.len());
        self.text.push_str(s);
    }

    /// A string that is likely to repeat: written once, then referred to, looked up in
    /// `cache`. Returns whether it was a repeat, so a caller can stop sharing strings that do
    /// not repeat. A string longer than [`MAX_SHARED_LEN`], one whose cache slot another string
    /// holds, or one past [`MAX_SHARED`] distinct ones, is written plainly.
    pub fn shared_string(&mut self, cache: &mut SharedCache, s: &str) -> bool {
        if s.len() > MAX_SHARED_LEN {
            self.string(s);
            return false;
        }
        if cache.slots.is_empty() {
            cache.slots = vec![u32::MAX; SharedCache::SLOTS];
        }
        let slot = (hash(s.as_bytes()) as usize) & (SharedCache::SLOTS - 1);
        let Some(entry) = cache.slots.get_mut(slot) else {
            self.string(s);
            return false;
        };
        if let Some(&(start, len)) = self.shared.get(*entry as usize) {
            if self.text.get(start..start + len) == Some(s) {
                self.scalar(AGAIN);
                push_length(&mut self.tape, *entry as usize);
                return true;
            }
            self.string(s);
            return false;
        }
        if self.shared.len() >= MAX_SHARED {
            self.string(s);
            return false;
        }
        *entry = self.shared.len() as u32;
        self.shared.push((self.text.len(), s.len()));
        self.scalar(SHARED);
        push_length(&mut self.tape, s.len());
        self.text.push_str(s);
        false
    }

    /// Bytes (a `Uint8Array` in the guest).
    pub fn bytes(&mut self, b: &[u8]) {
        self.scalar(BYTES);
        push_length(&mut self.tape, b.len());
        self.tape.extend_from_slice(b);
    }

    /// Opens an array: its items follow, then [`end`](PackedWriter::end).
    pub fn begin_array(&mut self) {
        self.scalar(ARRAY);
        self.open.push(Open::Array);
    }

    /// Opens an object: `member` + value pairs follow, then [`end`](PackedWriter::end).
    pub fn begin_object(&mut self) {
        self.scalar(OBJECT);
        self.open.push(Open::Object(false));
    }

    /// Closes the innermost open array or object.
    pub fn end(&mut self) {
        match self.open.pop() {
            Some(Open::Array | Open::Object(false)) => {}
            _ => self.fail("an end without an open container, or after a key"),
        }
        self.tape.push(END);
    }

    /// Writes a whole [`Value`].
    pub fn value(&mut self, value: &Value) {
        // An explicit stack of the containers still being written, so depth costs no host stack.
        enum Item<'a> {
            Value(&'a Value),
            Member(&'a str, &'a Value),
            End,
        }
        let mut work = vec![Item::Value(value)];
        while let Some(item) = work.pop() {
            let value = match item {
                Item::End => {
                    self.end();
                    continue;
                }
                Item::Member(key, value) => {
                    let key = self.key(key);
                    self.member(key);
                    value
                }
                Item::Value(value) => value,
            };
            match value {
                Value::Undefined => self.undefined(),
                Value::Null => self.null(),
                Value::Bool(b) => self.bool(*b),
                Value::Number(n) => self.number(*n),
                Value::String(s) => self.string(s),
                Value::Bytes(b) => self.bytes(b),
                Value::Array(items) => {
                    self.begin_array();
                    work.push(Item::End);
                    work.extend(items.iter().rev().map(Item::Value));
                }
                Value::Object(members) => {
                    self.begin_object();
                    work.push(Item::End);
                    work.extend(members.iter().rev().map(|(k, v)| Item::Member(k, v)));
                }
            }
        }
    }

    /// The packed value, or why the writes did not make exactly one well-formed value.
    pub fn finish(self) -> Result<Packed, PackedError> {
        if let Some(error) = self.error {
            return Err(PackedError(format!("packed value misuse: {error}")));
        }
        if !self.open.is_empty() || !self.done {
            return Err(PackedError(
                "packed value misuse: an unclosed container, or no value".into(),
            ));
        }
        Ok(Packed {
            tape: self.tape,
            text: self.text,
            keys: self.keys,
        })
    }

    /// Checks that a value may start here, and writes its tag.
    fn scalar(&mut self, tag: u8) {
        let misuse = match self.open.last_mut() {
            Some(Open::Array) => None,
            Some(Open::Object(waiting)) => {
                let keyed = std::mem::replace(waiting, false);
                (!keyed).then_some("an object member without a key")
            }
            None => {
                std::mem::replace(&mut self.done, true).then_some("a second value after the first")
            }
        };
        if let Some(why) = misuse {
            self.fail(why);
        }
        self.tape.push(tag);
    }

    fn fail(&mut self, why: &'static str) {
        self.error.get_or_insert(why);
    }
}

/// FxHash over 8-byte words: fast on short strings, and collisions only cost a plain write.
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
    }
    h
}

fn push_length(tape: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        tape.push((n as u8) | 0x80);
        n >>= 7;
    }
    tape.push(n as u8);
}

/// One step of a walk over a packed value (see [`Packed::walk`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Token<'a> {
    /// `undefined`.
    Undefined,
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number.
    Number(f64),
    /// A string.
    String(&'a str),
    /// A shared string and its index among the shared ones: its first occurrence (the index is
    /// the number of shared strings before it) or a repeat (an earlier index).
    Shared(&'a str, u32),
    /// Bytes.
    Bytes(&'a [u8]),
    /// An array opens; its items follow, then [`Token::End`].
    Array,
    /// An object opens; [`Token::Key`] + value pairs follow, then [`Token::End`].
    Object,
    /// The innermost array or object closes.
    End,
    /// The next value is the member with this key (an index into [`Packed::keys`]).
    Key(u32),
}

impl Packed {
    /// The packed form of `value`.
    pub fn from_value(value: &Value) -> Packed {
        let mut writer = PackedWriter::new();
        writer.value(value);
        // `value` writes exactly one balanced value, so `finish` cannot refuse it.
        writer.finish().unwrap_or_default()
    }

    /// The distinct object keys, indexed by [`Token::Key`].
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// Calls `visit` with each token in order. Stops at the first error `visit` returns, or
    /// at a malformed tape (which [`PackedWriter::finish`] never produces).
    pub fn walk<E: From<PackedError>>(
        &self,
        mut visit: impl FnMut(Token<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let bad = |why: &str| PackedError(format!("malformed packed value: {why}"));
        let tape = self.tape.as_slice();
        let (mut at, mut text_at) = (0usize, 0usize);
        // Each shared string's place in the text, by index.
        let mut shared: Vec<(usize, usize)> = Vec::new();
        // Per open container: is it an object, and does a key wait for its value.
        let mut open: Vec<(bool, bool)> = Vec::new();
        let mut done = false;
        while let Some(&tag) = tape.get(at) {
            at += 1;
            if done {
                return Err(bad("bytes after the value").into());
            }
            if tag == KEY {
                let key = read_length(tape, &mut at).ok_or_else(|| bad("a truncated key"))?;
                match open.last_mut() {
                    Some((true, waiting @ false)) if key < self.keys.len() => *waiting = true,
                    _ => return Err(bad("a misplaced or unknown key").into()),
                }
                visit(Token::Key(key as u32))?;
                continue;
            }
            if tag == END {
                match open.pop() {
                    Some((_, false)) => {}
                    _ => return Err(bad("a misplaced end").into()),
                }
                done = open.is_empty();
                visit(Token::End)?;
                continue;
            }
            match open.last_mut() {
                None | Some((false, _)) => {}
                Some((true, waiting @ true)) => *waiting = false,
                Some((true, false)) => return Err(bad("an object member without a key").into()),
            }
            let token = match tag {
                UNDEFINED => Token::Undefined,
                NULL => Token::Null,
                FALSE => Token::Bool(false),
                TRUE => Token::Bool(true),
                NUMBER => {
                    let bytes = tape
                        .get(at..at + 8)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .ok_or_else(|| bad("a truncated number"))?;
                    at += 8;
                    Token::Number(f64::from_le_bytes(bytes))
                }
                STRING => {
                    let len =
                        read_length(tape, &mut at).ok_or_else(|| bad("a truncated length"))?;
                    let end = text_at
                        .checked_add(len)
                        .ok_or_else(|| bad("a string length"))?;
                    let s = self
                        .text
                        .get(text_at..end)
                        .ok_or_else(|| bad("a string out of range"))?;
                    text_at = end;
                    Token::String(s)
                }
                SHARED => {
                    let len =
                        read_length(tape, &mut at).ok_or_else(|| bad("a truncated length"))?;
                    let end = text_at
                        .checked_add(len)
                        .ok_or_else(|| bad("a string length"))?;
                    let s = self
                        .text
                        .get(text_at..end)
                        .ok_or_else(|| bad("a string out of range"))?;
                    let index =
                        u32::try_from(shared.len()).map_err(|_| bad("too many shared strings"))?;
                    shared.push((text_at, end));
                    text_at = end;
                    Token::Shared(s, index)
                }
                AGAIN => {
                    let index =
                        read_length(tape, &mut at).ok_or_else(|| bad("a truncated index"))?;
                    let s = shared
                        .get(index)
                        .and_then(|&(start, end)| self.text.get(start..end))
                        .ok_or_else(|| bad("an unknown shared string"))?;
                    Token::Shared(s, index as u32)
                }
                BYTES => {
                    let len =
                        read_length(tape, &mut at).ok_or_else(|| bad("a truncated length"))?;
                    let end = at.checked_add(len).ok_or_else(|| bad("a bytes length"))?;
                    let b = tape.get(at..end).ok_or_else(|| bad("bytes out of range"))?;
                    at = end;
                    Token::Bytes(b)
                }
                ARRAY => {
                    open.push((false, false));
                    Token::Array
                }
                OBJECT => {
                    open.push((true, false));
                    Token::Object
                }
                _ => return Err(bad("an unknown tag").into()),
            };
            done = open.is_empty();
            visit(token)?;
        }
        if !done {
            return Err(bad("it ends before its value does").into());
        }
        Ok(())
    }

    /// The [`Value`] this stands for.
    pub fn to_value(&self) -> Result<Value, PackedError> {
        enum Building {
            Array(Vec<Value>),
            Object(Vec<(String, Value)>, String),
        }
        let mut stack: Vec<Building> = Vec::new();
        let mut root: Option<Value> = None;
        let place = |stack: &mut Vec<Building>, root: &mut Option<Value>, value: Value| match stack
            .last_mut()
        {
            Some(Building::Array(items)) => items.push(value),
            Some(Building::Object(members, key)) => {
                members.push((std::mem::take(key), value));
            }
            None => *root = Some(value),
        };
        self.walk(|token| -> Result<(), PackedError> {
            let value = match token {
                Token::Array => {
                    stack.push(Building::Array(Vec::new()));
                    return Ok(());
                }
                Token::Object => {
                    stack.push(Building::Object(Vec::new(), String::new()));
                    return Ok(());
                }
                Token::Key(key) => {
                    if let (Some(Building::Object(_, pending)), Some(name)) =
                        (stack.last_mut(), self.keys.get(key as usize))
                    {
                        pending.clone_from(name);
                    }
                    return Ok(());
                }
                Token::End => match stack.pop() {
                    Some(Building::Array(items)) => Value::Array(items),
                    Some(Building::Object(members, _)) => Value::Object(members),
                    None => return Ok(()),
                },
                Token::Undefined => Value::Undefined,
                Token::Null => Value::Null,
                Token::Bool(b) => Value::Bool(b),
                Token::Number(n) => Value::Number(n),
                Token::String(s) | Token::Shared(s, _) => Value::String(s.to_string()),
                Token::Bytes(b) => Value::Bytes(b.to_vec()),
            };
            place(&mut stack, &mut root, value);
            Ok(())
        })?;
        root.ok_or_else(|| PackedError("malformed packed value: no value".into()))
    }
}

/// The most nested containers [`Packed::from_bytes`] accepts: a value the guest builds is at
/// most 64 deep, so anything deeper did not come from a guest and is refused before it is read
/// (a deep tree would also be dropped recursively).
pub const MAX_WIRE_DEPTH: usize = 128;

/// The most bytes of strings, bytes and containers the value [`Packed::from_bytes`] accepts
/// may stand for once expanded. A shared string is stored once but counts at every use, so a
/// small tape cannot ask its reader for gigabytes.
pub const MAX_WIRE_EXPANDED_BYTES: usize = 512 * 1024 * 1024;

impl Packed {
    /// The value as one byte string, for a trip between processes: the tape, the text and the
    /// keys, each behind a LEB128 length ([`Packed::from_bytes`] reads it back).
    pub fn to_bytes(&self) -> Vec<u8> {
        let keys: usize = self.keys.iter().map(|k| k.len() + 5).sum();
        let mut out = Vec::with_capacity(self.tape.len() + self.text.len() + keys + 16);
        push_length(&mut out, self.tape.len());
        out.extend_from_slice(&self.tape);
        push_length(&mut out, self.text.len());
        out.extend_from_slice(self.text.as_bytes());
        push_length(&mut out, self.keys.len());
        for key in &self.keys {
            push_length(&mut out, key.len());
            out.extend_from_slice(key.as_bytes());
        }
        out
    }

    /// Reads what [`Packed::to_bytes`] wrote, trusting nothing: every length is checked against
    /// what is left, text and keys must be UTF-8, the tape must walk as exactly one
    /// well-formed value nested at most [`MAX_WIRE_DEPTH`] deep, and nothing may follow.
    pub fn from_bytes(bytes: &[u8]) -> Result<Packed, PackedError> {
        let bad = |why: &str| PackedError(format!("malformed packed bytes: {why}"));
        let mut at = 0usize;
        let chunk = |at: &mut usize| -> Result<&[u8], PackedError> {
            let len = read_length(bytes, at).ok_or_else(|| bad("a truncated length"))?;
            let end = at.checked_add(len).ok_or_else(|| bad("a length"))?;
            let part = bytes
                .get(*at..end)
                .ok_or_else(|| bad("a length past the end"))?;
            *at = end;
            Ok(part)
        };
        let tape = chunk(&mut at)?.to_vec();
        let text = std::str::from_utf8(chunk(&mut at)?)
            .map_err(|_| bad("text that is not UTF-8"))?
            .to_string();
        let count = read_length(bytes, &mut at).ok_or_else(|| bad("a truncated key count"))?;
        // Each key takes at least one byte, so the count cannot exceed what is left.
        if count > bytes.len().saturating_sub(at) {
            return Err(bad("more keys than bytes"));
        }
        let mut keys = Vec::with_capacity(count);
        for _ in 0..count {
            let key =
                std::str::from_utf8(chunk(&mut at)?).map_err(|_| bad("a key that is not UTF-8"))?;
            keys.push(key.to_string());
        }
        if at != bytes.len() {
            return Err(bad("bytes after the keys"));
        }
        let packed = Packed { tape, text, keys };
        let mut depth = 0usize;
        let mut expanded = 0usize;
        packed.walk(|token| -> Result<(), PackedError> {
            // Every token costs at least a value's worth; strings and bytes their length.
            expanded = expanded.saturating_add(match token {
                Token::String(s) | Token::Shared(s, _) => s.len() + 16,
                Token::Bytes(b) => b.len() + 16,
                Token::Key(k) => packed.keys.get(k as usize).map_or(16, |k| k.len() + 16),
                _ => 16,
            });
            if expanded > MAX_WIRE_EXPANDED_BYTES {
                return Err(bad("a value larger than the wire allows once expanded"));
            }
            match token {
                Token::Array | Token::Object => {
                    depth += 1;
                    if depth > MAX_WIRE_DEPTH {
                        return Err(bad("containers nested too deep"));
                    }
                }
                Token::End => depth = depth.saturating_sub(1),
                _ => {}
            }
            Ok(())
        })?;
        Ok(packed)
    }
}

fn read_length(tape: &[u8], at: &mut usize) -> Option<usize> {
    let mut n = 0usize;
    let mut shift = 0u32;
    loop {
        let byte = *tape.get(*at)?;
        *at += 1;
        let bits = usize::from(byte & 0x7f);
        n |= bits.checked_shl(shift).filter(|v| v >> shift == bits)?;
        if byte & 0x80 == 0 {
            return Some(n);
        }
        shift += 7;
        if shift >= usize::BITS {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn values_round_trip() {
        for value in [
            Value::Undefined,
            Value::Null,
            Value::Bool(true),
            Value::Number(-0.5),
            s(""),
            s("Zürich 😀"),
            Value::Bytes(vec![0, 255, 7]),
            Value::Array(vec![]),
            Value::Object(vec![]),
            Value::Array(vec![
                Value::Object(vec![
                    ("a".into(), s("1")),
                    ("__proto__".into(), Value::Array(vec![s("x"), Value::Null])),
                    ("a".into(), s("duplicate keys stay as written")),
                ]),
                Value::Object(vec![("a".into(), Value::Undefined)]),
                s(&"long ".repeat(100)),
            ]),
        ] {
            let packed = Packed::from_value(&value);
            assert_eq!(packed.to_value(), Ok(value));
        }
    }

    #[test]
    fn bytes_round_trip_and_refuse_what_was_not_written() {
        let value = Value::Array(vec![
            Value::Object(vec![
                ("k".into(), s("Zürich")),
                ("b".into(), Value::Bytes(vec![1, 2])),
            ]),
            Value::Number(1.5),
        ]);
        let bytes = Packed::from_value(&value).to_bytes();
        let back = Packed::from_bytes(&bytes).map(|p| p.to_value());
        assert_eq!(back, Ok(Ok(value)));
        // Every truncation, and one byte more, is refused, never a panic.
        for cut in 0..bytes.len() {
            assert!(Packed::from_bytes(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Packed::from_bytes(&longer).is_err());
        // A huge key count with nothing behind it.
        let mut lying = Packed::from_value(&Value::Null).to_bytes();
        lying.pop();
        lying.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert!(Packed::from_bytes(&lying).is_err());
    }

    #[test]
    fn a_shared_string_repeated_past_the_expansion_cap_is_refused() {
        let mut w = PackedWriter::new();
        let mut cache = SharedCache::new();
        let long = "x".repeat(MAX_SHARED_LEN);
        w.begin_array();
        // 64 bytes counted per use: 10 million uses are 800 MB expanded from a ~20 MB tape.
        for _ in 0..10_000_000 {
            w.shared_string(&mut cache, &long);
        }
        w.end();
        let bytes = w.finish().map(|p| p.to_bytes()).unwrap_or_default();
        assert!(bytes.len() < 32 * 1024 * 1024);
        let refused = Packed::from_bytes(&bytes)
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(refused.contains("larger than the wire allows"), "{refused}");
    }

    #[test]
    fn bytes_nested_deeper_than_the_wire_allows_are_refused() {
        let mut w = PackedWriter::new();
        for _ in 0..=MAX_WIRE_DEPTH {
            w.begin_array();
        }
        for _ in 0..=MAX_WIRE_DEPTH {
            w.end();
        }
        let deep = w.finish().map(|p| p.to_bytes()).unwrap_or_default();
        let refused = Packed::from_bytes(&deep)
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(refused.contains("nested too deep"), "{refused}");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = Packed::from_bytes(&bytes).map(|p| p.to_value());
        }
    }

    #[test]
    fn keys_are_stored_once() {
        let row = |v: &str| Value::Object(vec![("id".into(), s(v)), ("name".into(), s(v))]);
        let packed = Packed::from_value(&Value::Array(vec![row("1"), row("2"), row("3")]));
        assert_eq!(packed.keys(), ["id".to_string(), "name".to_string()]);
    }

    #[test]
    fn shared_strings_are_stored_once() {
        let mut w = PackedWriter::new();
        let mut cache = SharedCache::new();
        w.begin_array();
        let repeats: Vec<bool> = ["Berlin", "Paris", "Berlin", "", "", "Berlin"]
            .iter()
            .map(|city| w.shared_string(&mut cache, city))
            .collect();
        w.string("Paris");
        w.shared_string(&mut cache, &"long".repeat(MAX_SHARED_LEN));
        w.end();
        assert_eq!(repeats, [false, false, true, false, true, true]);
        let packed = w.finish().unwrap_or_default();
        assert_eq!(
            packed.text,
            format!("BerlinParisParis{}", "long".repeat(MAX_SHARED_LEN))
        );
        let mut tokens = Vec::new();
        let walked = packed.walk(|token| -> Result<(), PackedError> {
            if let Token::Shared(s, index) = token {
                tokens.push((s.to_string(), index));
            }
            Ok(())
        });
        assert_eq!(walked, Ok(()));
        let expected = [
            ("Berlin", 0),
            ("Paris", 1),
            ("Berlin", 0),
            ("", 2),
            ("", 2),
            ("Berlin", 0),
        ];
        assert_eq!(tokens, expected.map(|(s, i)| (s.to_string(), i)).to_vec());
        let strings =
            |v: &[&str]| Value::Array(v.iter().map(|s| Value::String((*s).into())).collect());
        let long = "long".repeat(MAX_SHARED_LEN);
        assert_eq!(
            packed.to_value(),
            Ok(strings(&[
                "Berlin", "Paris", "Berlin", "", "", "Berlin", "Paris", &long
            ]))
        );
    }

    #[test]
    fn the_writer_refuses_misuse() {
        let refused = |write: &dyn Fn(&mut PackedWriter)| {
            let mut w = PackedWriter::new();
            write(&mut w);
            w.finish().is_err()
        };
        assert!(refused(&|_| {}));
        assert!(refused(&|w| w.begin_array()));
        assert!(refused(&|w| w.end()));
        assert!(refused(&|w| {
            w.null();
            w.null();
        }));
        assert!(refused(&|w| {
            w.begin_object();
            w.null();
            w.end();
        }));
        assert!(refused(&|w| {
            let k = w.key("k");
            w.begin_object();
            w.member(k);
            w.end();
        }));
        assert!(refused(&|w| {
            let k = w.key("k");
            w.begin_array();
            w.member(k);
            w.null();
            w.end();
        }));
        assert!(refused(&|w| {
            w.begin_array();
            w.end();
            w.null();
        }));
        assert!(!refused(&|w| {
            let k = w.key("k");
            w.begin_object();
            w.member(k);
            w.begin_array();
            w.string("x");
            w.end();
            w.end();
        }));
    }

    #[test]
    fn a_malformed_tape_is_an_error_not_a_panic() {
        // Every kind of token, shared strings (a first occurrence and a repeat) included.
        let mut w = PackedWriter::new();
        let mut cache = SharedCache::new();
        w.begin_array();
        w.shared_string(&mut cache, "ab");
        w.shared_string(&mut cache, "ab");
        w.value(&Value::Object(vec![("k".into(), s("vv"))]));
        w.number(1.0);
        w.bytes(&[1, 2]);
        w.end();
        let good = w.finish().unwrap_or_default();
        assert!(good.to_value().is_ok());
        // Every truncation and every single-byte corruption of the tape.
        for cut in 0..good.tape.len() {
            let mut bad = good.clone();
            bad.tape.truncate(cut);
            assert!(bad.to_value().is_err(), "cut at {cut}");
        }
        for at in 0..good.tape.len() {
            for byte in [0u8, 5, 9, 10, 11, 12, 0x7f, 0x80, 0xff] {
                let mut bad = good.clone();
                bad.tape[at] = byte;
                let _ = bad.to_value();
            }
        }
        let mut bad = good.clone();
        bad.text = "abv".into();
        assert!(bad.to_value().is_err());
        let mut bad = good;
        bad.keys.clear();
        assert!(bad.to_value().is_err());
        assert_eq!(read_length(&[0xff; 11], &mut 0), None);
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Undefined),
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<f64>()
                .prop_filter("NaN != NaN", |n| !n.is_nan())
                .prop_map(Value::Number),
            ".{0,12}".prop_map(Value::String),
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::Bytes),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec(("[a-c_]{0,3}", inner), 0..6).prop_map(Value::Object),
            ]
        })
    }

    proptest! {
        #[test]
        fn any_value_round_trips(value in any_value()) {
            prop_assert_eq!(Packed::from_value(&value).to_value(), Ok(value));
        }

        #[test]
        fn shared_and_plain_strings_mix(strings in proptest::collection::vec(("[ab]{0,3}", any::<bool>()), 0..40)) {
            let mut w = PackedWriter::new();
            // Two caches, so strings are shared in one and repeat in the other too.
            let mut caches = [SharedCache::new(), SharedCache::new()];
            w.begin_array();
            for (i, (text, shared)) in strings.iter().enumerate() {
                if *shared {
                    w.shared_string(&mut caches[i % 2], text);
                } else {
                    w.string(text);
                }
            }
            w.end();
            let expected = Value::Array(strings.into_iter().map(|(text, _)| Value::String(text)).collect());
            prop_assert_eq!(w.finish().and_then(|p| p.to_value()), Ok(expected));
        }
    }
}
