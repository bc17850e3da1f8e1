//! Reading a SKILL.md's examples, for the tests that run every example as written.

/// The bodies of a SKILL.md's ```` ```js ```` blocks, in order (the first is usually the import
/// forms, not a body).
pub fn js_blocks(skill: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in skill.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```js") => current = Some(String::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// The text of shipped pack `sandbox-<id>`'s SKILL.md in this checkout.
pub fn shipped_skill(id: &str) -> String {
    let path = format!(
        "{}/../packs/@nodetool-ai/sandbox-{id}/SKILL.md",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_read_in_order_and_other_fences_are_skipped() {
        let skill = "# x\n```js\nimport a from \"b\";\n```\ntext\n```sh\nls\n```\n```js\nreturn 1;\nreturn 2;\n```\n";
        assert_eq!(
            js_blocks(skill),
            ["import a from \"b\";\n", "return 1;\nreturn 2;\n"]
        );
        assert!(js_blocks("```js\nunterminated\n").is_empty());
    }
}
