//! What a run answers: its typed outcome codes, its errors and its captured logs. These cross
//! to the CLI's `--json`, the server's `/api/run` and the browser runner unchanged.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Declares the run error codes once: the enum, its string form and the list.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $code:literal,)*) => {
        /// How a run failed. The string form is stable.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum RunErrorCode {
            $($(#[doc = $doc])* #[serde(rename = $code)] $variant,)*
        }

        impl RunErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [RunErrorCode] = &[$(RunErrorCode::$variant,)*];

            /// The stable string form.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(RunErrorCode::$variant => $code,)*
                }
            }
        }
    };
}

error_codes! {
    /// The body (or a module it loads) does not parse.
    SyntaxError = "syntax-error",
    /// An import the run does not serve was refused by the loader.
    ModuleDenied = "module-denied",
    /// A dynamic `import()` was refused.
    DynamicImportDenied = "dynamic-import-denied",
    /// The body imports a specifier no installed pack offers.
    ModuleNotFound = "module-not-found",
    /// The body imports a module that is discovered but not executable (e.g. not compiled).
    ModuleUnavailable = "module-unavailable",
    /// The body imports a name its module does not export (a link error, placed on the name).
    MissingExport = "missing-export",
    /// The run passed its deadline.
    Timeout = "timeout",
    /// The run exhausted its memory limit.
    MemoryLimit = "memory-limit",
    /// The run exhausted its stack.
    StackOverflow = "stack-overflow",
    /// The body threw, or its result could not cross the boundary.
    RuntimeError = "runtime-error",
    /// The host cancelled the run.
    Cancelled = "cancelled",
    /// A host module call failed and nothing caught it.
    HostModuleError = "host-module-error",
    /// A WASM call failed and nothing caught it.
    WasmError = "wasm-error",
    /// The sandbox worker process running the body died on a signal (a memory-safety bug in
    /// the engine or a native library, a failed allocation outside every budget); the message
    /// names the signal. Nothing else was affected, and the next run gets a fresh worker.
    SandboxCrashed = "sandbox-crashed",
    /// The sandbox worker's confinement refused an operation the run needed (opening a file, a
    /// socket, a process); the message names the operation when it is known. Runs never reach
    /// the host's files, network or processes but through the capabilities they were granted.
    SandboxDenied = "sandbox-denied",
}

impl fmt::Display for RunErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed run: the code, the message, and where in the body, when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// The stable code.
    pub code: RunErrorCode,
    /// The message as the guest saw it (for a thrown error, `Name: message`).
    pub message: String,
    /// 1-based line in the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column in the body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
    /// The specifier involved (denials, missing modules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specifier: Option<String>,
    /// Where an uncaught throw came from, innermost first, at most a few frames: `at f
    /// (body:3:5)` for the body, `at g (pack::file:12:3)` for a pack's file. Never an engine
    /// module id or a path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
}

impl RunError {
    /// An error with no position and no specifier.
    pub fn new(code: RunErrorCode, message: impl Into<String>) -> RunError {
        RunError {
            code,
            message: message.into(),
            line: None,
            column: None,
            specifier: None,
            stack: Vec::new(),
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)?;
        if let Some(line) = self.line {
            write!(f, " (line {line}")?;
            if let Some(column) = self.column {
                write!(f, ", column {column}")?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A console level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// `console.log`
    Log,
    /// `console.info`
    Info,
    /// `console.warn`
    Warn,
    /// `console.error`
    Error,
    /// `console.debug`
    Debug,
}

/// One captured console line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// Its level.
    pub level: LogLevel,
    /// The formatted arguments, space-separated.
    pub message: String,
}
