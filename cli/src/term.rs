//! What reaches a terminal: untrusted text with its control characters escaped, and the
//! renderer's own colour, when the output is a terminal and the user did not opt out.
//!
//! Invariant: every string that came from a body, a run or a pack (console lines, results,
//! error messages, pack and file names, SKILL.md text) passes through [`safe`] before human
//! output; the only escape sequences written are the ones [`paint`] adds. JSON output is
//! never escaped here (serde_json escapes control characters itself).

use std::borrow::Cow;
use std::io::IsTerminal;
use std::sync::OnceLock;

/// When to colour human output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// How this process writes: decided once from the flags.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    pub json: bool,
    pub quiet: bool,
    pub verbose: bool,
    colour_out: bool,
    colour_err: bool,
}

static OUTPUT: OnceLock<Output> = OnceLock::new();

/// Settles the output mode for the process (the first call wins).
pub(crate) fn init(json: bool, quiet: bool, verbose: bool, color: ColorChoice) {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let decide = |terminal: bool| match color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => terminal && !no_color,
    };
    let _ = OUTPUT.set(Output {
        json,
        quiet,
        verbose,
        colour_out: !json && decide(std::io::stdout().is_terminal()),
        colour_err: !json && decide(std::io::stderr().is_terminal()),
    });
}

/// The output mode (defaults before [`init`]: human, no colour).
pub(crate) fn output() -> Output {
    OUTPUT.get().copied().unwrap_or(Output {
        json: false,
        quiet: false,
        verbose: false,
        colour_out: false,
        colour_err: false,
    })
}

/// Whether JSON mode is on.
pub(crate) fn json() -> bool {
    output().json
}

/// `text` with every control character except newline and tab shown escaped (`\x1b`,
/// `\u{9b}`), so an escape sequence from a body or a pack cannot drive the terminal.
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A colour the renderer uses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Paint {
    Error,
    Warning,
    Help,
}

/// Where painted text goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    Out,
    Err,
}

/// `text` in `paint`'s colour when `stream` is coloured; `text` must already be safe.
pub(crate) fn paint(text: &str, paint: Paint, stream: Stream) -> String {
    let on = match stream {
        Stream::Out => output().colour_out,
        Stream::Err => output().colour_err,
    };
    if !on {
        return text.to_string();
    }
    let code = match paint {
        Paint::Error => "1;31",
        Paint::Warning => "1;33",
        Paint::Help => "1;36",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(safe("plain\ttext\n"), "plain\ttext\n");
        assert_eq!(safe("\x1b[31mred\x07"), "\\x1b[31mred\\x07");
        assert_eq!(safe("\u{9b}2J\u{7f}"), "\\u{9b}2J\\x7f");
        assert_eq!(safe("a\rb"), "a\\x0db");
    }
}
