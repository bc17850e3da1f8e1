//! The SKILL.md format: a `---` fenced frontmatter of `key: value` lines (`name` and
//! `description` required), then a Markdown body whose `## ` headings name its sections.
//!
//! A pack's skill is documentation, never configuration: a broken one disables agent
//! discoverability and nothing else.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Characters a skill name may have.
pub const MAX_SKILL_NAME_CHARS: usize = 64;
/// Characters a skill description may have.
pub const MAX_SKILL_DESCRIPTION_CHARS: usize = 1024;

/// A parsed SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SkillDocument {
    /// `[a-z0-9-]`, at most 64 characters.
    pub name: String,
    /// One to 1024 characters, no markup tags.
    pub description: String,
    /// Everything after the frontmatter.
    pub body: String,
    /// `## ` sections of the body, keyed by lowercased heading. Text before the first heading
    /// belongs to no section; empty sections are dropped.
    pub sections: BTreeMap<String, String>,
}

/// Parses a SKILL.md, or says which rule it breaks.
pub fn parse_skill_document(text: &str) -> Result<SkillDocument, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("it must start with a --- frontmatter fence".into());
    }
    let mut frontmatter = Vec::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        frontmatter.push(line);
    }
    if !closed {
        return Err("its frontmatter has no closing --- fence".into());
    }
    let body: String = lines.collect();

    let mut fields = BTreeMap::new();
    for line in frontmatter {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((key, value)) = line.split_once(':') {
            fields.insert(key.trim().to_string(), unquote(value.trim()).to_string());
        }
    }
    let name = fields.remove("name").unwrap_or_default();
    let description = fields.remove("description").unwrap_or_default();
    if name.is_empty() || name.chars().count() > MAX_SKILL_NAME_CHARS {
        return Err("its name must have 1 to 64 characters".into());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Err("its name may only contain a-z, 0-9 and '-'".into());
    }
    if name.contains("anthropic") || name.contains("claude") {
        return Err("its name uses a reserved word".into());
    }
    if description.is_empty() || description.chars().count() > MAX_SKILL_DESCRIPTION_CHARS {
        return Err("its description must have 1 to 1024 characters".into());
    }
    if has_tag(&description) {
        return Err("its description contains a markup tag".into());
    }
    if body.trim().is_empty() {
        return Err("its body is empty".into());
    }
    let sections = sections_of(&body);
    Ok(SkillDocument {
        name,
        description,
        body,
        sections,
    })
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// Whether `s` contains something shaped like `<tag>`.
fn has_tag(s: &str) -> bool {
    let mut rest = s;
    while let Some(open) = rest.find('<') {
        let after = &rest[open + 1..];
        match after.find('>') {
            Some(close) if close > 0 => return true,
            Some(_) => rest = &after[1..],
            None => return false,
        }
    }
    false
}

fn sections_of(body: &str) -> BTreeMap<String, String> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    let mut flush = |current: &mut Option<(String, String)>| {
        if let Some((key, text)) = current.take() {
            let text = text.trim().to_string();
            if !key.is_empty() && !text.is_empty() {
                sections.entry(key).or_insert(text);
            }
        }
    };
    for line in body.split_inclusive('\n') {
        let heading = line
            .strip_prefix("##")
            .filter(|rest| rest.starts_with(' ') || rest.starts_with('\t'));
        match heading {
            Some(title) => {
                flush(&mut current);
                current = Some((title.trim().to_lowercase(), String::new()));
            }
            None => {
                if let Some((_, text)) = current.as_mut() {
                    text.push_str(line);
                }
            }
        }
    }
    flush(&mut current);
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "---\nname: sandbox-csv\n# a comment\ndescription: \"Parse and write CSV.\"\n---\n# CSV\n\nIntro.\n\n## parse — read CSV\nuse it\n\n## Gotchas\nall async\n---\nkept\n\n## Empty\n\n";

    #[test]
    fn parses_frontmatter_body_and_sections() {
        let doc = parse_skill_document(CSV).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(doc.name, "sandbox-csv");
        assert_eq!(doc.description, "Parse and write CSV.");
        assert!(doc.body.starts_with("# CSV"));
        assert_eq!(
            doc.sections.get("parse — read csv").map(String::as_str),
            Some("use it")
        );
        assert_eq!(
            doc.sections.get("gotchas").map(String::as_str),
            Some("all async\n---\nkept")
        );
        assert!(!doc.sections.contains_key("empty"));
        assert_eq!(doc.sections.len(), 2);
    }

    #[test]
    fn rejects_each_broken_rule() {
        let cases = [
            ("no fence\n", "start with"),
            ("---\nname: a\n", "closing"),
            ("---\ndescription: d\n---\nbody", "name must"),
            (
                "---\nname: Bad_Name\ndescription: d\n---\nbody",
                "may only contain",
            ),
            (
                "---\nname: claude-helper\ndescription: d\n---\nbody",
                "reserved",
            ),
            ("---\nname: a\n---\nbody", "description must"),
            (
                "---\nname: a\ndescription: see <system>\n---\nbody",
                "markup tag",
            ),
            ("---\nname: a\ndescription: d\n---\n  \n", "body is empty"),
        ];
        for (text, rule) in cases {
            let e = parse_skill_document(text).err().unwrap_or_default();
            assert!(e.contains(rule), "{text:?}: {e}");
        }
        assert!(
            parse_skill_document(&format!(
                "---\nname: {}\ndescription: d\n---\nb",
                "a".repeat(65)
            ))
            .is_err()
        );
        assert!(
            parse_skill_document("---\nname: a\ndescription: 1 < 2 and 3 > 2\n---\nb").is_err()
        );
        assert!(parse_skill_document("---\nname: a\ndescription: a <> b\n---\nb").is_ok());
    }
}
