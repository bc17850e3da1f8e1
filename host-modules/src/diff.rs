//! `diff`: unified patches between two texts (the `similar` crate, Myers' algorithm).

use nodetool_protocol::value::Value;
use similar::TextDiff;

use crate::limits::{clamped_option, option, options_of, require_text};

/// `unified(a, b, {context=3, oldName="a", newName="b"})` -> a unified patch string. The
/// context is floored and clamped to 0..=100; a non-finite one is 3.
pub fn unified(args: &[Value]) -> Result<Value, String> {
    const AT: &str = "diff.unified";
    let a = require_text(AT, args.first(), "a")?;
    let b = require_text(AT, args.get(1), "b")?;
    let options = options_of(args.get(2));
    let context = clamped_option(options, "context", 3, 0, 100) as usize;
    let name = |key: &str, default: &str| match option(options, key) {
        Some(Value::String(s)) => s.clone(),
        _ => default.to_string(),
    };
    let (old_name, new_name) = (name("oldName", "a"), name("newName", "b"));
    let diff = TextDiff::from_lines(a, b);
    let patch = diff
        .unified_diff()
        .context_radius(context)
        .header(&old_name, &new_name)
        .to_string();
    Ok(Value::String(patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    #[test]
    fn a_unified_patch_with_names_and_context() {
        let out = unified(&[
            s("a\nb\nc\nd\n"),
            s("a\nB\nc\nd\n"),
            Value::Object(vec![
                ("context".into(), Value::Number(0.0)),
                ("oldName".into(), s("old.txt")),
            ]),
        ]);
        assert_eq!(out, Ok(s("--- old.txt\n+++ b\n@@ -2 +2 @@\n-b\n+B\n")));
        assert_eq!(unified(&[s("x\n"), s("x\n")]), Ok(s("")));
        assert_eq!(
            unified(&[Value::Number(1.0), s("x")]),
            Err("diff.unified: a must be a string".into())
        );
    }
}
