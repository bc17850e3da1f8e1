//! Host-module errors as data: a stable code and the sentence, rendered at the edge.
//!
//! Every failure a host module reports is a [`HostError`]: one of the codes declared in
//! [`CODES`] (what it means, and what the author of the body can do about it, each in one
//! place) and a message that already starts `<id>.<export>: ` and names the argument, entry,
//! sheet or cap at fault. The dispatcher renders it as the message the guest's `Error` carries;
//! the code table is what `docs/host-modules.md`'s error table is generated from (a test keeps
//! the two equal).

use std::fmt;

nodetool_protocol::stable_codes! {
    /// Why a host call failed. The codes are stable: a body or a front end may match on them.
    pub enum HostErrorCode, table CODES;
    /// An argument is missing or has the wrong type, shape or value.
    InvalidArgument = "host-invalid-argument",
        "An argument is missing, or has the wrong type, shape or value (the message names it).",
        "Pass the arguments the pack's SKILL.md shows for this export.";
    /// An input passes the shared caps every host call has.
    InputTooLarge = "host-input-too-large",
        "A text argument passes 5 MiB characters, or a byte argument 10 MiB: the caps every host call shares.",
        "Split the input and call once per part.";
    /// The input is not a well-formed file or text of the module's format.
    MalformedInput = "host-malformed-input",
        "The input is not a well-formed file or text of the module's format (the message says where it stops making sense).",
        "Check that the bytes are the format the export reads, and whole (not cut short or re-encoded as text).";
    /// The input passes one of the module's own caps.
    LimitExceeded = "host-limit-exceeded",
        "The input, or the work it asks for, passes one of the module's own caps: entries, nesting, inflation, cells, pixels, steps (the message names the cap).",
        "Make the input smaller, or do the work in several calls; the caps are in docs/host-modules.md.";
    /// The result would pass the module's output cap.
    OutputTooLarge = "host-output-too-large",
        "The result would pass the module's output cap (64 MiB of values, or the module's own cap).",
        "Ask for less at once: fewer pages, rows or entries per call.";
    /// The input uses something the module does not implement.
    Unsupported = "host-unsupported",
        "The input uses a feature, encoding or variant of the format that the module does not implement.",
        "Convert the input to a form the module reads (the message says which part it could not).";
    /// The call was stopped by its run's deadline.
    DeadlineExceeded = "host-deadline-exceeded",
        "The call was still working when its run's deadline passed, and stopped.",
        "Give the run a longer timeout, or a smaller input.";
    /// A native library the module loads at run time is not usable on this host.
    Unavailable = "host-unavailable",
        "A native library the module loads at run time is missing on this host (the message says what to install).",
        "Install what the message names on the machine that runs the sandbox (`nodetool packs doctor` checks it).";
    /// A bug in the host module.
    Internal = "host-internal",
        "The host module failed in a way it should not (a bug); the host logged one line about it.",
        "Report it with the input that caused it.";
}

/// One code's documentation.
pub type CodeDoc = nodetool_protocol::codes::CodeDoc<HostErrorCode>;

/// A host call's failure: its code and its message (starting `<id>.<export>: `).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    code: HostErrorCode,
    message: String,
}

impl HostError {
    /// An error with `code` and `message` (which starts `<id>.<export>: `).
    pub fn new(code: HostErrorCode, message: impl Into<String>) -> HostError {
        HostError {
            code,
            message: message.into(),
        }
    }

    /// [`HostErrorCode::InvalidArgument`].
    pub fn invalid(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::InvalidArgument, message)
    }

    /// [`HostErrorCode::MalformedInput`].
    pub fn malformed(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::MalformedInput, message)
    }

    /// [`HostErrorCode::LimitExceeded`].
    pub fn limit(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::LimitExceeded, message)
    }

    /// [`HostErrorCode::OutputTooLarge`].
    pub fn output(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::OutputTooLarge, message)
    }

    /// [`HostErrorCode::Unsupported`].
    pub fn unsupported(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::Unsupported, message)
    }

    /// [`HostErrorCode::DeadlineExceeded`].
    pub fn deadline(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::DeadlineExceeded, message)
    }

    /// [`HostErrorCode::Unavailable`].
    pub fn unavailable(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::Unavailable, message)
    }

    /// [`HostErrorCode::Internal`].
    pub fn internal(message: impl Into<String>) -> HostError {
        HostError::new(HostErrorCode::Internal, message)
    }

    /// The code.
    pub fn code(&self) -> HostErrorCode {
        self.code
    }

    /// The message, as the guest reads it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The message, owned.
    pub fn into_message(self) -> String {
        self.message
    }
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for HostError {}

/// The error table of `docs/host-modules.md`, generated from [`CODES`].
pub fn docs_table() -> String {
    nodetool_protocol::codes::docs_table(CODES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodetool_protocol::value::Value;

    #[test]
    fn codes_are_unique_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for doc in CODES {
            assert!(seen.insert(doc.name), "{} twice", doc.name);
            assert!(doc.name.starts_with("host-"), "{}", doc.name);
            assert_eq!(doc.code.as_str(), doc.name);
            assert_eq!(doc.code.doc().name, doc.name);
            assert!(doc.meaning.ends_with('.') && doc.todo.ends_with('.'));
        }
    }

    fn text(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// Runs `f` as a dispatched call of `at` whose run's deadline is `deadline`.
    fn with_deadline<T>(at: &str, deadline: std::time::Instant, f: impl FnOnce() -> T) -> T {
        crate::CALL.with(|call| *call.borrow_mut() = Some((at.to_string(), deadline)));
        let out = f();
        crate::CALL.with(|call| *call.borrow_mut() = None);
        out
    }

    fn panics(_: &[Value]) -> Result<Value, HostError> {
        panic!("a bug")
    }

    /// One real call per code that fails with it: the call in words (for the snapshot) and its
    /// result. `None` for a call this host cannot make (OCR without Tesseract).
    fn provoke(code: HostErrorCode) -> (&'static str, Result<Value, HostError>) {
        match code {
            HostErrorCode::InvalidArgument => {
                ("csv.parse(1)", crate::csv::parse(&[Value::Number(1.0)]))
            }
            HostErrorCode::InputTooLarge => {
                let over = "x".repeat(nodetool_protocol::limits::MAX_HOST_INPUT_CHARS + 1);
                (
                    "csv.parse(<5 MiB + 1 characters>)",
                    crate::csv::parse(&[text(over)]),
                )
            }
            HostErrorCode::MalformedInput => (
                "xml.parse(\"<a><b></a>\")",
                crate::xml::parse(&[text("<a><b></a>")]),
            ),
            HostErrorCode::LimitExceeded => (
                "xml.parse(<513 nested elements>)",
                crate::xml::parse(&[text("<a>".repeat(513) + &"</a>".repeat(513))]),
            ),
            HostErrorCode::OutputTooLarge => {
                // One 4 MiB column name that each of 20 records repeats: 80 MiB of keys.
                let csv = format!("{}\n{}", "k".repeat(4 << 20), "v\n".repeat(20));
                (
                    "csv.parse(<a 4 MiB header over 20 rows>)",
                    crate::csv::parse(&[text(csv)]),
                )
            }
            HostErrorCode::Unsupported => {
                let legacy = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0];
                (
                    "xlsx.parse(<a legacy .xls file>)",
                    crate::xlsx::parse(&[Value::Bytes(legacy)]),
                )
            }
            HostErrorCode::DeadlineExceeded => {
                let pdf = crate::documents::pdf::tests::pdf_of(&[&["one"]]);
                let past = std::time::Instant::now();
                let out = with_deadline("pdf.extractText", past, || {
                    crate::documents::pdf::extract_text(&[Value::Bytes(pdf)])
                });
                ("pdf.extractText(<a PDF>) after the run's deadline", out)
            }
            HostErrorCode::Unavailable => {
                let mut png = Vec::new();
                image::GrayImage::from_pixel(8, 8, image::Luma([255]))
                    .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
                    .unwrap_or_else(|e| panic!("{e}"));
                let options = Value::Object(vec![("language".into(), text("zzz"))]);
                (
                    "ocr.recognize(<a PNG>, {language: \"zzz\"})",
                    crate::ocr::recognize(&[Value::Bytes(png), options]),
                )
            }
            HostErrorCode::Internal => (
                "an export that panics, run by the dispatcher",
                crate::run_caught(
                    crate::Implementation::Value(panics),
                    "csv.parse",
                    &[],
                    &mut None,
                )
                .map(|_| Value::Null),
            ),
        }
    }

    /// Every code is provoked by a real call (the dispatcher's own catch, for a bug), and its
    /// declaration and rendered message are one snapshot each, ruff-style: what it means, what
    /// to do, and what the guest reads for a representative input.
    #[test]
    fn every_code_is_what_a_real_call_fails_with() {
        for doc in CODES {
            let (call, result) = provoke(doc.code);
            let error = match result {
                Err(e) => e,
                Ok(v) => panic!("{call} succeeded: {v:?}"),
            };
            assert_eq!(error.code(), doc.code, "{call}: {error}");
            let prefix = call.split('(').next().unwrap_or_default();
            assert!(
                doc.code == HostErrorCode::Internal
                    || error.message().starts_with(&format!("{prefix}: ")),
                "{call}: {error}"
            );
            // Without Tesseract the sentence says to install it (same code, other words).
            if doc.code == HostErrorCode::Unavailable
                && crate::ocr::availability().is_err()
                && std::env::var_os("CI").is_none()
            {
                eprintln!(
                    "Tesseract is not installed here: the host-unavailable snapshot is not compared"
                );
                continue;
            }
            insta::assert_snapshot!(
                doc.name,
                format!(
                    "code: {}\nmeaning: {}\nwhat to do: {}\ncall: {call}\nmessage: {}\n",
                    doc.name,
                    doc.meaning,
                    doc.todo,
                    error.message()
                )
            );
        }
    }
}
