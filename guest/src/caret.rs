//! The caret rule the Rust guest and the browser runner share (`web/src/caret.js` is its
//! port): where in the body an uncaught throw is shown.
//!
//! QuickJS places an error at the last position it evaluated when the error object was made,
//! which for `throw new Error(\`bad ${x}\`)` is inside the template literal, and engine versions
//! differ there. The rule: when the reported line holds the keyword `throw` before the
//! reported column, the caret moves to the last such `throw` before it, the statement that
//! threw; otherwise the position stays as reported. Columns count characters.
//!
//! [`short_stack`] is the rest of where a throw came from, for people: the engine's frames with
//! body lines as the body numbers them and pack files as `pack::file`.

/// The caret for an uncaught throw reported at (`line`, `column`) of `body`.
pub fn on_throw(body: &str, line: Option<u32>, column: Option<u32>) -> (Option<u32>, Option<u32>) {
    let (Some(l), Some(c)) = (line, column) else {
        return (line, column);
    };
    let Some(text) = body.lines().nth(l.saturating_sub(1) as usize) else {
        return (line, column);
    };
    let chars: Vec<char> = text.chars().collect();
    let before = (c.saturating_sub(1) as usize).min(chars.len());
    let word = |ch: char| ch.is_alphanumeric() || ch == '_' || ch == '$';
    let mut found = None;
    for start in 0..before {
        let end = start + 5;
        if end > chars.len() || chars[start..end].iter().collect::<String>() != "throw" {
            continue;
        }
        let clear_before = start == 0 || !word(chars[start - 1]);
        let clear_after = chars.get(end).is_none_or(|ch| !word(*ch));
        if clear_before && clear_after {
            found = Some(start);
        }
    }
    match found {
        Some(start) => (line, u32::try_from(start + 1).ok().or(column)),
        None => (line, column),
    }
}

/// The most frames [`short_stack`] keeps.
pub const MAX_STACK_FRAMES: usize = 8;

/// The frames of an engine stack a person can use, innermost first: `at f (body:3:5)` for the
/// body (the entry's wrapper lines dropped, each position under the caret rule), `at g (pack::file:12:3)` for a pack file, `at map
/// (native)` for a builtin. Anything else (the sandbox's own preludes) is left out, and so is
/// the whole stack when it has one frame (the caret already shows it).
pub fn short_stack(stack: &str, body: &str) -> Vec<String> {
    let body_lines = body.lines().count();
    let entry = format!("{}:", crate::entry::ENTRY_MODULE_NAME);
    let mut frames = Vec::new();
    for raw in stack.lines() {
        let Some(frame) = raw.trim().strip_prefix("at ") else {
            continue;
        };
        let (name, place) = match frame.strip_suffix(')').and_then(|f| f.rsplit_once(" (")) {
            Some((name, place)) => (name, place),
            None => ("<anonymous>", frame),
        };
        let shown = if place == "native" {
            "native".to_string()
        } else if let Some(at) = place.strip_prefix(&entry) {
            let mut parts = at.split(':');
            let line = parts.next().and_then(|l| l.parse::<usize>().ok());
            let column = parts.next().and_then(|c| c.parse::<usize>().ok());
            let Some(line) = line
                .map(|l| l.saturating_sub(crate::entry::ENTRY_LINE_OFFSET as usize))
                .filter(|l| (1..=body_lines).contains(l))
            else {
                continue;
            };
            let column = column.and_then(|c| u32::try_from(c).ok());
            let at = u32::try_from(line).ok();
            match on_throw(body, at, column) {
                (_, Some(column)) => format!("body:{line}:{column}"),
                (_, None) => format!("body:{line}"),
            }
        } else {
            let scrubbed = nodetool_jssource::exports::scrub_module_ids(place);
            if scrubbed == place || scrubbed.contains("nodetool-sandbox:") {
                continue;
            }
            scrubbed
        };
        frames.push(format!("at {name} ({shown})"));
        if frames.len() == MAX_STACK_FRAMES {
            break;
        }
    }
    if frames.len() < 2 {
        frames.clear();
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_name_body_lines_and_pack_files() {
        let stack = "    at round (nodetool-sandbox:@acme/geo|sandbox/internal/round.js:1:40)\n    at f (code:4:10)\n    at map (native)\n    at <anonymous> (code:6:11)\n    at <anonymous> (code:8:1)\n    at guard (nodetool-sandbox:prelude:3:1)\n";
        assert_eq!(
            short_stack(stack, "a\nb\nc\nd\ne"),
            [
                "at round (@acme/geo::sandbox/internal/round.js:1:40)",
                "at f (body:3:10)",
                "at map (native)",
                "at <anonymous> (body:5:11)",
            ]
        );
        assert!(short_stack("    at f (code:2:3)\n", "a").is_empty());
        assert!(short_stack("garbage\n\n", "a").is_empty());
        let deep = "    at f (code:2:3)\n".repeat(100);
        assert_eq!(short_stack(&deep, "a\nb").len(), MAX_STACK_FRAMES);
        // A body frame follows the caret rule.
        let thrown = "    at f (code:3:20)\n    at g (code:4:1)\n";
        assert_eq!(
            short_stack(thrown, "function f() {\n  throw new Error(`${1}`);\n}")[0],
            "at f (body:2:3)"
        );
    }

    #[test]
    fn the_caret_goes_to_the_throw() {
        let body = "const x = 1;\n  throw new Error(`bad ${x}`);";
        assert_eq!(on_throw(body, Some(2), Some(30)), (Some(2), Some(3)));
        // No throw before the column: as reported.
        assert_eq!(on_throw(body, Some(1), Some(7)), (Some(1), Some(7)));
        // `rethrow` and `throwable` are not the keyword.
        let body = "rethrow(throwable.x); f()";
        assert_eq!(on_throw(body, Some(1), Some(22)), (Some(1), Some(22)));
        // The last throw before the column wins; a line past the end stays.
        let body = "if (a) throw 1; else throw new Error(`${a}`)";
        assert_eq!(on_throw(body, Some(1), Some(42)), (Some(1), Some(22)));
        assert_eq!(on_throw(body, Some(9), Some(1)), (Some(9), Some(1)));
        assert_eq!(on_throw(body, None, None), (None, None));
    }
}
