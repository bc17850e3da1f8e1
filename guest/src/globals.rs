//! The standard web globals every run has: `TextEncoder`/`TextDecoder`, `atob`/`btoa`,
//! `crypto` (`getRandomValues`, `randomUUID`, `subtle.digest`), `structuredClone`, `URL` and
//! `URLSearchParams`, `queueMicrotask`, `performance.now()`, the reference's byte helpers
//! (`toBase64`, `fromBase64`, `toHex`, `fromHex`) and `sleep(ms)`.
//!
//! The API's shape (classes, argument checks, every error message) is one script,
//! `globals.js`, which the browser runner evaluates too (as `web/src/globals.js`), so both
//! runtimes answer alike. It is compiled once per process with the hardening's samples and
//! evaluated per run; its value is a function called here with one native function whose ops
//! do the byte and text work in Rust and which is reachable only through the script's
//! closures (no global holds it). Each global is a read-only accessor (non-configurable, no
//! setter) whose group (a script of `globals/`, compiled once per process) is evaluated on its
//! first read: the whole API evaluated eagerly made a trivial run 204 µs instead of 118 µs
//! (medians, `cargo xtask bench guest`, shared 2-core machine).
//!
//! `Intl` is absent: a useful `Intl` (collation, number and date formats for more than one
//! locale) means ICU data of several megabytes in every worker, for what a pack library can
//! bring itself. Timers stay absent, as the contract says; `sleep` is the one way to wait.
//!
//! *Invariants:* every native copies guest bytes out before it works on them and creates its
//! results with the engine's allocator (counted by the run's memory limit); `randomBytes` reads
//! the kernel's CSPRNG through the `getrandom` system call, never a file; `performance.now()`
//! answers whole milliseconds, so it is no finer clock than the deadline already is; a `sleep`
//! that would end after the run's deadline is refused at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value as Plain;
use rquickjs::function::Opt;
use rquickjs::{Array, ArrayBuffer, Ctx, Exception, Function, Persistent, Promise, Value};
use url::{Url, quirks};

use crate::bridge::{Awaited, PendingCall, current};
use crate::engine::{bytes_of, eval_script};
use crate::{DispatchError, Reply};

/// The script, as `harden::SAMPLES` embeds it (checked against the browser's copy).
#[cfg(test)]
pub(crate) const SHELL: &str = include_str!("globals.js");

/// The group scripts, by name: each is evaluated in a run only when one of its globals is first
/// read, so a run that uses none reads none of their bytecode (reading it all was 60 µs of a
/// 175 µs trivial run).
const GROUPS: [(&str, &str); 6] = [
    ("text", include_str!("globals/text.js")),
    ("bytes", include_str!("globals/bytes.js")),
    ("crypto", include_str!("globals/crypto.js")),
    ("clone", include_str!("globals/clone.js")),
    ("url", include_str!("globals/url.js")),
    ("misc", include_str!("globals/misc.js")),
];

/// Each group's bytecode, compiled once per process on first use.
static GROUP_BYTECODE: [OnceLock<Result<Vec<u8>, String>>; 6] = [const { OnceLock::new() }; 6];

/// The function a group script evaluates to, in `ctx`.
fn group<'js>(ctx: &Ctx<'js>, name: &str) -> rquickjs::Result<Value<'js>> {
    let Some(at) = GROUPS.iter().position(|(n, _)| *n == name) else {
        return Err(Exception::throw_type(ctx, "unknown group"));
    };
    let (name, source) = GROUPS[at];
    let compiled = GROUP_BYTECODE[at].get_or_init(|| {
        crate::compile::compile_script(&format!("nodetool:globals/{name}"), source)
            .map_err(|e| e.message)
    });
    match compiled {
        Ok(bytecode) => eval_script(ctx, bytecode),
        Err(message) => Err(Exception::throw_internal(
            ctx,
            &format!("the sandbox's {name} globals did not compile: {message}"),
        )),
    }
}

/// The most bytes one `crypto.getRandomValues` call fills (the Web Crypto quota).
const MAX_RANDOM_BYTES: usize = 65_536;

/// Calls `shell` (the script's value) with the one native, `native(op, a, b, c)`.
pub(crate) fn install<'js>(ctx: &Ctx<'js>, shell: Function<'js>) -> rquickjs::Result<()> {
    let started = Instant::now();
    let native = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              op: rquickjs::String<'js>,
              a: Opt<Value<'js>>,
              b: Opt<Value<'js>>,
              c: Opt<Value<'js>>|
              -> rquickjs::Result<Value<'js>> {
            let op = rust_text(&ctx, &op)?;
            let undefined = || Value::new_undefined(ctx.clone());
            let (a, b, c) = (
                a.0.unwrap_or_else(undefined),
                b.0.unwrap_or_else(undefined),
                c.0.unwrap_or_else(undefined),
            );
            native(&ctx, &op, a, b, c, started)
        },
    )?;
    shell.call::<_, ()>((native,))
}

/// One op of the native (the list is in `globals.js`'s header).
fn native<'js>(
    ctx: &Ctx<'js>,
    op: &str,
    a: Value<'js>,
    b: Value<'js>,
    c: Value<'js>,
    started: Instant,
) -> rquickjs::Result<Value<'js>> {
    let null = || Value::new_null(ctx.clone());
    let bytes_out =
        |bytes: &[u8]| ArrayBuffer::new_copy(ctx.clone(), bytes).map(|b| b.into_value());
    let text_out =
        |text: &str| rquickjs::String::from_str(ctx.clone(), text).map(|s| s.into_value());
    match op {
        "utf8Encode" => bytes_out(text_of(ctx, &a)?.as_bytes()),
        "utf8Decode" => {
            let bytes = buffer(ctx, &a)?;
            if b.as_bool() == Some(true) {
                match std::str::from_utf8(&bytes) {
                    Ok(text) => text_out(text),
                    Err(_) => Ok(null()),
                }
            } else {
                text_out(&String::from_utf8_lossy(&bytes))
            }
        }
        "base64Encode" => {
            text_out(&base64::engine::general_purpose::STANDARD.encode(buffer(ctx, &a)?))
        }
        "base64Decode" => {
            // A string with a lone surrogate is not base64 either.
            let decoded = a
                .as_string()
                .and_then(|t| t.to_string().ok())
                .and_then(|t| forgiving_base64(&t));
            match decoded {
                Some(bytes) => bytes_out(&bytes),
                None => Ok(null()),
            }
        }
        "randomBytes" => {
            let count = a.as_number().unwrap_or(-1.0);
            if !(0.0..=MAX_RANDOM_BYTES as f64).contains(&count) || count.fract() != 0.0 {
                return Err(Exception::throw_range(
                    ctx,
                    "at most 65536 random bytes at a time",
                ));
            }
            let mut bytes = vec![0u8; count as usize];
            getrandom::fill(&mut bytes).map_err(|_| {
                Exception::throw_message(ctx, "the operating system's random source failed")
            })?;
            bytes_out(&bytes)
        }
        "digest" => {
            let name = text_of(ctx, &a)?;
            let bytes = buffer(ctx, &b)?;
            match sha_digest(&name, &bytes) {
                Some(digest) => bytes_out(&digest),
                None => Err(Exception::throw_type(ctx, "unsupported digest")),
            }
        }
        "urlParse" => {
            let input = text_of(ctx, &a)?;
            let base = match b.as_string() {
                Some(base) => Some(rust_text(ctx, base)?),
                None => None,
            };
            match parse_url(&input, base.as_deref()) {
                Some(url) => record(ctx, &url),
                None => Ok(null()),
            }
        }
        "urlSet" => {
            let (href, field, value) = (text_of(ctx, &a)?, text_of(ctx, &b)?, text_of(ctx, &c)?);
            let Ok(mut url) = Url::parse(&href) else {
                return Ok(null());
            };
            if !set_url(&mut url, &field, &value) {
                return Ok(null());
            }
            record(ctx, &url)
        }
        "formParse" => {
            let text = text_of(ctx, &a)?;
            let flat = Array::new(ctx.clone())?;
            let mut at = 0;
            for (name, value) in url::form_urlencoded::parse(text.as_bytes()) {
                flat.set(at, name.as_ref())?;
                flat.set(at + 1, value.as_ref())?;
                at += 2;
            }
            Ok(flat.into_value())
        }
        "formSerialize" => {
            let Some(flat) = a.as_array() else {
                return Err(Exception::throw_type(ctx, "expected a list"));
            };
            let mut serializer = url::form_urlencoded::Serializer::new(String::new());
            let mut items = flat.iter::<Value>();
            while let (Some(name), Some(value)) = (items.next(), items.next()) {
                serializer.append_pair(&text_of(ctx, &name?)?, &text_of(ctx, &value?)?);
            }
            text_out(&serializer.finish())
        }
        "now" => Ok(Value::new_number(
            ctx.clone(),
            started.elapsed().as_millis() as f64,
        )),
        "sleep" => sleep(ctx, a.as_number().unwrap_or(0.0)),
        "group" => group(ctx, &text_of(ctx, &a)?),
        _ => Err(Exception::throw_type(ctx, "unknown native")),
    }
}

/// A string argument as Rust text (a TypeError for anything else).
fn text_of(ctx: &Ctx<'_>, value: &Value<'_>) -> rquickjs::Result<String> {
    match value.as_string() {
        Some(text) => rust_text(ctx, text),
        None => Err(Exception::throw_type(ctx, "expected a string")),
    }
}

/// A guest string as Rust text. The script passes well-formed strings only, so a failure is
/// the engine running out of memory for the copy: it is thrown as the engine's own
/// out-of-memory error, which the run reports as its memory limit.
fn rust_text(ctx: &Ctx<'_>, text: &rquickjs::String<'_>) -> rquickjs::Result<String> {
    text.to_string()
        .map_err(|_| Exception::throw_internal(ctx, "out of memory"))
}

/// A copy of the bytes of an `ArrayBuffer` the script passed.
fn buffer(ctx: &Ctx<'_>, value: &Value<'_>) -> rquickjs::Result<Vec<u8>> {
    bytes_of(value).ok_or_else(|| Exception::throw_type(ctx, "expected an ArrayBuffer"))
}

/// WHATWG forgiving-base64 decode: ASCII whitespace is ignored, padding is optional, bits
/// past the last whole byte are dropped; `None` for anything else.
fn forgiving_base64(text: &str) -> Option<Vec<u8>> {
    let mut data: Vec<u8> = text
        .bytes()
        .filter(|b| !matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' '))
        .collect();
    if data.len().is_multiple_of(4) {
        for _ in 0..2 {
            if data.last() == Some(&b'=') {
                data.pop();
            }
        }
    }
    if data.len() % 4 == 1
        || !data
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
    {
        return None;
    }
    const FORGIVING: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireNone),
    );
    FORGIVING.decode(&data).ok()
}

/// The digest of `bytes` under a Web Crypto algorithm name (already upper case).
fn sha_digest(name: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    use sha1::Digest as _;
    use sha2::Digest as _;
    Some(match name {
        "SHA-1" => sha1::Sha1::digest(bytes).to_vec(),
        "SHA-256" => sha2::Sha256::digest(bytes).to_vec(),
        "SHA-384" => sha2::Sha384::digest(bytes).to_vec(),
        "SHA-512" => sha2::Sha512::digest(bytes).to_vec(),
        _ => return None,
    })
}

/// The URL parser with an optional base, as `new URL(input, base)`.
fn parse_url(input: &str, base: Option<&str>) -> Option<Url> {
    match base {
        None => Url::parse(input).ok(),
        Some(base) => {
            let base = Url::parse(base).ok()?;
            Url::options().base_url(Some(&base)).parse(input).ok()
        }
    }
}

/// Applies one of URL's setters. `false` only for an `href` that does not parse or an unknown
/// field; the other setters ignore a value they refuse, as the standard says.
fn set_url(url: &mut Url, field: &str, value: &str) -> bool {
    match field {
        "href" => return quirks::set_href(url, value).is_ok(),
        "protocol" => {
            let _ = quirks::set_protocol(url, value);
        }
        "username" => {
            let _ = quirks::set_username(url, value);
        }
        "password" => {
            let _ = quirks::set_password(url, value);
        }
        "host" => {
            let _ = quirks::set_host(url, value);
        }
        "hostname" => {
            let _ = quirks::set_hostname(url, value);
        }
        "port" => {
            let _ = quirks::set_port(url, value);
        }
        "pathname" => quirks::set_pathname(url, value),
        "search" => quirks::set_search(url, value),
        "hash" => quirks::set_hash(url, value),
        _ => return false,
    }
    true
}

/// A URL record: `[href, origin, protocol, username, password, host, hostname, port, pathname,
/// search, hash]`.
fn record<'js>(ctx: &Ctx<'js>, url: &Url) -> rquickjs::Result<Value<'js>> {
    let origin = quirks::origin(url);
    let fields: [&str; 11] = [
        quirks::href(url),
        &origin,
        quirks::protocol(url),
        quirks::username(url),
        quirks::password(url),
        quirks::host(url),
        quirks::hostname(url),
        quirks::port(url),
        quirks::pathname(url),
        quirks::search(url),
        quirks::hash(url),
    ];
    let array = Array::new(ctx.clone())?;
    for (i, field) in fields.iter().enumerate() {
        array.set(i, *field)?;
    }
    Ok(array.into_value())
}

/// `sleep(ms)`: a promise the run's event loop settles once `ms` have passed, or `null` when
/// that would be after the run's deadline (the script then rejects). It waits in the run's
/// pending calls, so the event loop keeps polling while a body awaits it.
fn sleep<'js>(ctx: &Ctx<'js>, ms: f64) -> rquickjs::Result<Value<'js>> {
    let Some(state) = current() else {
        return Ok(Value::new_null(ctx.clone()));
    };
    let until = Duration::try_from_secs_f64(ms.max(0.0) / 1000.0)
        .ok()
        .and_then(|wait| Instant::now().checked_add(wait));
    let Some(until) = until.filter(|until| *until <= state.deadline) else {
        return Ok(Value::new_null(ctx.clone()));
    };
    let (promise, resolve, reject) = Promise::new(ctx)?;
    let error = Persistent::save(ctx, Exception::from_message(ctx.clone(), "")?.into_object());
    let queued = state.push_pending(PendingCall {
        awaited: Awaited::Dispatch {
            future: Box::pin(Sleep {
                until,
                timer: None,
                started: false,
            }),
            code: RunErrorCode::RuntimeError,
            error,
            slot: false,
        },
        resolve: Persistent::save(ctx, resolve),
        reject: Persistent::save(ctx, reject.clone()),
    });
    if let Err(message) = queued {
        let error = Exception::from_message(ctx.clone(), &format!("sleep: {message}"))?;
        reject.call::<_, ()>((error,))?;
    }
    Ok(promise.into_value())
}

/// Ready once its instant has passed. On its first pending poll it starts a small timer
/// thread that wakes the run's event loop at that instant; without one (the thread could not
/// start) the event loop still polls its pending calls at least every 20 ms, so the sleep ends
/// at most that late. Dropped unsettled (the run ended first), it stops its thread at once, so
/// no timer outlives the run it belongs to.
struct Sleep {
    until: Instant,
    /// The timer thread, once started, and the flag that tells it to stop.
    timer: Option<(Arc<AtomicBool>, std::thread::Thread)>,
    started: bool,
}

/// The timer thread's stack: it only parks and wakes.
const TIMER_STACK_BYTES: usize = 32 * 1024;

impl Future for Sleep {
    type Output = Result<Reply, DispatchError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        if Instant::now() >= self.until {
            return Poll::Ready(Ok(Reply::Value(Plain::Null)));
        }
        if !self.started {
            self.started = true;
            let (until, waker) = (self.until, cx.waker().clone());
            let stop = Arc::new(AtomicBool::new(false));
            let stopped = Arc::clone(&stop);
            let spawned = std::thread::Builder::new()
                .name("nodetool-sleep".into())
                .stack_size(TIMER_STACK_BYTES)
                .spawn(move || {
                    loop {
                        if stopped.load(Ordering::Relaxed) {
                            return;
                        }
                        let now = Instant::now();
                        if now >= until {
                            waker.wake();
                            return;
                        }
                        std::thread::park_timeout(until - now);
                    }
                });
            if let Ok(handle) = spawned {
                self.timer = Some((stop, handle.thread().clone()));
            }
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.timer.take() {
            stop.store(true, Ordering::Relaxed);
            thread.unpark();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648 section 10's vectors, both ways, and the forgiving decoder's extra latitude.
    #[test]
    fn base64_matches_rfc_4648() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(
                base64::engine::general_purpose::STANDARD.encode(plain),
                encoded
            );
            assert_eq!(forgiving_base64(encoded).as_deref(), Some(plain.as_bytes()));
            // Padding is optional and whitespace ignored.
            let bare = encoded.trim_end_matches('=');
            assert_eq!(forgiving_base64(bare).as_deref(), Some(plain.as_bytes()));
            assert_eq!(
                forgiving_base64(&format!(" {bare}\n")).as_deref(),
                Some(plain.as_bytes())
            );
        }
        for bad in ["Z", "Zm9vY", "Zm9v!", "Zg=", "Zg===", "=Zg=", "Zm=9"] {
            assert_eq!(forgiving_base64(bad), None, "{bad:?}");
        }
        // Bits past the last whole byte are dropped.
        assert_eq!(forgiving_base64("Zh").as_deref(), Some(&b"f"[..]));
    }

    /// FIPS 180 example digests of "abc".
    #[test]
    fn digests_match_fips_180() {
        let hex = |b: Vec<u8>| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let abc = |name| sha_digest(name, b"abc").map(hex);
        assert_eq!(
            abc("SHA-1").as_deref(),
            Some("a9993e364706816aba3e25717850c26c9cd0d89d")
        );
        assert_eq!(
            abc("SHA-256").as_deref(),
            Some("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            abc("SHA-384").as_deref(),
            Some(
                "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"
            )
        );
        assert_eq!(
            abc("SHA-512").as_deref(),
            Some(
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
            )
        );
        assert_eq!(abc("MD5"), None);
    }

    /// The browser runner's copy of the script is this script.
    #[test]
    fn browser_copy_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../web/src/globals.js");
        let groups: serde_json::Map<String, serde_json::Value> = GROUPS
            .iter()
            .map(|(name, source)| ((*name).to_string(), (*source).into()))
            .collect();
        let expected = format!(
            "// Generated from guest/src/globals.js and guest/src/globals/ (a guest test checks it); do not edit.\nexport const GLOBALS = {};\nexport const GLOBAL_GROUPS = {};\n",
            serde_json::to_string(SHELL).unwrap_or_default(),
            serde_json::to_string(&groups).unwrap_or_default()
        );
        let actual = std::fs::read_to_string(path).unwrap_or_default();
        if actual != expected && std::env::var_os("NODETOOL_REGENERATE").is_some() {
            std::fs::write(path, &expected).unwrap_or_else(|e| panic!("{path}: {e}"));
            return;
        }
        assert!(
            actual == expected,
            "web/src/globals.js is stale: NODETOOL_REGENERATE=1 cargo test -p nodetool-guest --lib browser_copy_is_current"
        );
    }
}
