//! `diff`: unified patches between two texts (the `similar` crate, Myers' algorithm), written
//! as GNU `diff -u` writes them.
//!
//! The patch is `--- oldName`, `+++ newName`, then one hunk per group of changes with `context`
//! unchanged lines around it; a hunk header is `@@ -l,s +l,s @@` with `,s` left out when a side
//! has exactly one line, and `l` the line before the hunk when a side has none (GNU's and
//! POSIX's rule, which `patch` reads). A last line without `\n` is followed by
//! `\ No newline at end of file`. Identical texts give `""`.
//!
//! Myers' algorithm costs (N+M)·D steps: two fully different 40,000-line texts took 15 s, and
//! the 5 MiB cap allows hours. The search is given a time budget, [`MAX_DIFF_TIME`] or the
//! run's deadline if sooner; past it, the part still being searched is written as one removal
//! and one addition. The patch stays exact (applying it gives the new text), only larger than
//! the smallest one, and the call ends within the budget plus linear work.

use std::time::{Duration, Instant};

use nodetool_protocol::value::Value;
use similar::{Algorithm, ChangeTag, TextDiff};

use crate::error::HostError;
use crate::limits::{clamped_option, option, options_of, require_text};

/// The longest the line matching may search before the rest is written coarse.
pub const MAX_DIFF_TIME: Duration = Duration::from_secs(2);

/// `unified(a, b, {context=3, oldName="a", newName="b"})` -> a unified patch string. The
/// context is floored and clamped to 0..=100; a non-finite one is 3.
pub fn unified(args: &[Value]) -> Result<Value, HostError> {
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
    let budget = Instant::now() + MAX_DIFF_TIME;
    let deadline = crate::call_deadline().map_or(budget, |run| run.min(budget));
    Ok(Value::String(patch(
        a, b, context, &old_name, &new_name, deadline,
    )))
}

/// The unified patch from `a` to `b`.
fn patch(
    a: &str,
    b: &str,
    context: usize,
    old_name: &str,
    new_name: &str,
    deadline: Instant,
) -> String {
    // Texts that share no line need no search: the answer is every line out and every line in,
    // which a passed deadline makes the search give at once (two fully different 40,000-line
    // texts would otherwise spend the whole budget finding that).
    let deadline = if share_no_line(a, b) {
        Instant::now()
    } else {
        deadline
    };
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .deadline(deadline)
        .diff_lines(a, b);
    // The hunks are cut from the sequence of changes itself, each line's numbers counted as
    // it goes: similar's ops can carry a stale index on the side they do not touch (a removal
    // shifted by its compaction), and its own writer put those into the headers.
    let changes: Vec<(ChangeTag, &str)> = diff
        .iter_all_changes()
        .map(|change| (change.tag(), change.value()))
        .collect();
    // Lines of each side before change `i`, for every `i` up to the end.
    let mut before = Vec::with_capacity(changes.len() + 1);
    let (mut old, mut new) = (0usize, 0usize);
    for (tag, _) in &changes {
        before.push((old, new));
        match tag {
            ChangeTag::Equal => (old, new) = (old + 1, new + 1),
            ChangeTag::Delete => old += 1,
            ChangeTag::Insert => new += 1,
        }
    }
    before.push((old, new));
    let edits: Vec<usize> = (0..changes.len())
        .filter(|&i| changes[i].0 != ChangeTag::Equal)
        .collect();
    if edits.is_empty() {
        return String::new();
    }
    let mut out = String::with_capacity(a.len().max(b.len()) / 4);
    out.push_str(&format!("--- {old_name}\n+++ {new_name}\n"));
    let mut next = 0;
    let mut written_to = 0;
    while next < edits.len() {
        let first = edits[next];
        let mut last = first;
        next += 1;
        // Changes closer than twice the context share a hunk.
        while next < edits.len() && edits[next] - last - 1 <= 2 * context {
            last = edits[next];
            next += 1;
        }
        let start = first.saturating_sub(context).max(written_to);
        let end = (last + 1 + context).min(changes.len());
        written_to = end;
        let ((old_start, new_start), (old_end, new_end)) = (before[start], before[end]);
        out.push_str(&format!(
            "@@ -{} +{} @@\n",
            range(old_start, old_end - old_start),
            range(new_start, new_end - new_start)
        ));
        for &(tag, line) in &changes[start..end] {
            write_line(tag, line, &mut out);
        }
    }
    out
}

/// Whether no line of `b` is a line of `a` (lines as `diff_lines` cuts them, ends included).
fn share_no_line(a: &str, b: &str) -> bool {
    let lines: std::collections::HashSet<&str> = a.split_inclusive('\n').collect();
    !b.split_inclusive('\n').any(|line| lines.contains(line))
}

/// One side of a hunk header: `start,count` (1-based), `start` alone for one line, and the line
/// before for none.
fn range(start: usize, count: usize) -> String {
    match count {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        n => format!("{},{n}", start + 1),
    }
}

fn write_line(tag: ChangeTag, line: &str, out: &mut String) {
    out.push(match tag {
        ChangeTag::Equal => ' ',
        ChangeTag::Delete => '-',
        ChangeTag::Insert => '+',
    });
    out.push_str(line);
    if !line.ends_with('\n') {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(600)
    }

    /// Applies a unified patch the way `patch` reads one (hunk ranges checked), or says why not.
    fn apply(old: &str, patch: &str) -> Result<String, String> {
        let old_lines: Vec<&str> = old.split_inclusive('\n').collect();
        let mut out = String::new();
        let mut at = 0usize;
        let mut lines = patch.split_inclusive('\n').peekable();
        let header = |r: &str| -> Result<(usize, usize), String> {
            let (start, count) = match r.split_once(',') {
                Some((s, c)) => (s, c),
                None => (r, "1"),
            };
            let parse = |x: &str| x.parse::<usize>().map_err(|_| format!("bad range {r}"));
            Ok((parse(start)?, parse(count)?))
        };
        while let Some(line) = lines.next() {
            if line.starts_with("--- ") || line.starts_with("+++ ") {
                continue;
            }
            let Some(rest) = line.strip_prefix("@@ -") else {
                return Err(format!("unexpected line {line:?}"));
            };
            let Some((ranges, _)) = rest.split_once(" @@") else {
                return Err(format!("bad header {line:?}"));
            };
            let Some((old_r, new_r)) = ranges.split_once(" +") else {
                return Err(format!("bad header {line:?}"));
            };
            let ((old_start, old_count), (_, new_count)) = (header(old_r)?, header(new_r)?);
            let first = if old_count == 0 {
                old_start
            } else {
                old_start - 1
            };
            if first < at {
                return Err(format!("hunk {line:?} goes backwards"));
            }
            out.extend(old_lines[at..first].iter().copied());
            at = first;
            let (mut seen_old, mut seen_new) = (0, 0);
            while seen_old < old_count || seen_new < new_count {
                let Some(body) = lines.next() else {
                    return Err(format!("hunk {line:?} ends early"));
                };
                let (tag, text) = body.split_at(1);
                let mut text = text.to_string();
                if lines.peek() == Some(&"\\ No newline at end of file\n") {
                    lines.next();
                    text.pop();
                }
                match tag {
                    " " | "-" => {
                        if old_lines.get(at).copied() != Some(text.as_str()) {
                            return Err(format!("hunk {line:?} does not match line {at}"));
                        }
                        at += 1;
                        seen_old += 1;
                        if tag == " " {
                            out.push_str(&text);
                            seen_new += 1;
                        }
                    }
                    "+" => {
                        out.push_str(&text);
                        seen_new += 1;
                    }
                    _ => return Err(format!("bad line {body:?}")),
                }
            }
            if seen_old != old_count || seen_new != new_count {
                return Err(format!("hunk {line:?} miscounts"));
            }
        }
        out.extend(old_lines[at..].iter().copied());
        Ok(out)
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
            Err(HostError::invalid("diff.unified: a must be a string"))
        );
        assert_eq!(
            unified(&[s(""), s("x\n")]),
            Ok(s("--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n"))
        );
        assert_eq!(
            unified(&[s("a\nb"), s("a\nc")]),
            Ok(s(
                "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
            ))
        );
    }

    #[test]
    fn hunk_ranges_count_the_lines_they_hold() {
        // similar's own writer gave `@@ -1,4 +2,3 @@` here, and `patch` stopped.
        let (old, new) = ("a\n{\nx\nreturn x;\n", "{\n{\nx\nreturn x;\n");
        let Ok(Value::String(p)) = unified(&[s(old), s(new)]) else {
            panic!("no patch")
        };
        assert!(p.contains("@@ -1,4 +1,4 @@"), "{p}");
        assert_eq!(apply(old, &p), Ok(new.to_string()));
    }

    #[test]
    fn random_patches_apply() {
        // Small alphabets make many equal lines, the inputs that broke the header before.
        let mut state: u64 = 0x853c_49e6_748f_ea9b;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for round in 0..2000 {
            let mut text = || {
                let lines = next(12);
                let mut t: String = (0..lines)
                    .map(|_| ["a\n", "b\n", "{\n", "}\n", "\n"][next(5) as usize])
                    .collect();
                if next(4) == 0 {
                    t.push('z');
                }
                t
            };
            let (old, new) = (text(), text());
            let context = next(4) as usize;
            let p = patch(&old, &new, context, "a", "b", far());
            assert_eq!(
                apply(&old, &p),
                Ok(new.clone()),
                "round {round}: {old:?} -> {new:?}\n{p}"
            );
        }
    }

    #[test]
    fn a_search_past_its_budget_is_finished_coarse_and_exact() {
        let old: String = (0..40_000).map(|i| format!("old {i}\n")).collect();
        let new: String = (0..40_000).map(|i| format!("new {i}\n")).collect();
        // A deadline already passed: the whole changed region is one removal and one addition.
        let p = patch(&old, &new, 3, "a", "b", Instant::now());
        assert!(p.starts_with("--- a\n+++ b\n@@ -1,40000 +1,40000 @@\n-old 0\n"));
        assert_eq!(apply(&old, &p), Ok(new.clone()));
        // Sharing no line, the full budget gives the same patch without searching.
        assert_eq!(patch(&old, &new, 3, "a", "b", far()), p);
        assert!(share_no_line(&old, &new) && !share_no_line(&old, "x\nold 7\n"));
        // Within the budget, a mostly equal pair still gets its small patch.
        let mut edited = old.clone();
        edited.replace_range(0..6, "OLD 0\n");
        let p = patch(&old, &edited, 0, "a", "b", Instant::now() + MAX_DIFF_TIME);
        assert_eq!(p, "--- a\n+++ b\n@@ -1 +1 @@\n-old 0\n+OLD 0\n");
    }
}
